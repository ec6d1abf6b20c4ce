// libFuzzer target: the .memrec reader must turn any bytes into a Snapshot or a memrec::Error.
#include <cstddef>
#include <cstdint>
#include <span>

#include "memrec/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    memrec::read_buffer(std::span<const uint8_t>(data, size));
  } catch (const memrec::Error&) {
  }
  return 0;
}
