// libFuzzer target: the pickle importer must turn any input into a Snapshot or a memrec::Error.
#include <cstddef>
#include <cstdint>
#include <span>

#include "memrec/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    memrec::import_pickle(std::span<const uint8_t>(data, size));
  } catch (const memrec::Error&) {
  }
  return 0;
}
