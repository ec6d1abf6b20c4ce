// libFuzzer target: the .memrec reader must turn any file into a Snapshot or a memrec::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "memrec/format.h"

namespace {

// The reader takes a path: each input goes through one scratch file.
const std::string& scratch_path() {
  static const std::string path = "/tmp/memrec-fuzz-" + std::to_string(getpid()) + ".memrec";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(scratch_path().c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    memrec::read_file(scratch_path());
  } catch (const memrec::Error&) {
  }
  return 0;
}
