// Inputs the fuzzers found, kept so that each fix stays fixed, and the seed the .memrec target starts from.
// Built with the fuzz targets (ASan+UBSan), where a memory error aborts the test.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "memrec/format.h"
#include "memrec/range.h"

namespace memrec {
namespace {

const std::string kFuzzDir = MEMREC_FUZZ_DIR;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string read_error(const std::vector<uint8_t>& bytes) {
  try {
    read_buffer(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct Regression {
  const char* file;   // under tests/fuzz/regressions/
  const char* error;  // a fragment of the error it must give
};

TEST(FuzzRegressions, MemrecInputsGiveTheirError) {
  const Regression cases[] = {
      // The first pass over chunk headers stepped past the end by a chunk's compressed size, then read a
      // "header" out of bounds (read_buffer only: read_file's fread simply failed there).
      {"memrec/chunk-past-end-in-reserve-rows", "compressed size 822378240 is impossible for raw size 3073"},
  };
  for (const Regression& c : cases) {
    EXPECT_NE(read_error(read_bytes(kFuzzDir + "/regressions/" + c.file)).find(c.error), std::string::npos)
        << c.file;
  }
}

TEST(FuzzSeeds, ReadBufferEqualsReadFile) {
  const std::string path = kFuzzDir + "/seeds/tiny.memrec";
  Snapshot from_file = read_file(path);
  EXPECT_TRUE(from_file.complete);
  EXPECT_EQ(from_file.events.size(), 5u);
  EXPECT_EQ(read_buffer(read_bytes(path)), from_file);
}

// The seed with an index reads ranges through it, so the fuzzer starts from index and live_state chunks in use.
TEST(FuzzSeeds, IndexedSeedReadsRangesThroughItsIndex) {
  std::vector<uint8_t> bytes = read_bytes(kFuzzDir + "/seeds/indexed.memrec");
  Snapshot whole = read_buffer(bytes);
  int64_t duration = whole.events.back().time_ns - whole.events[0].time_ns;
  for (int64_t from : {int64_t{0}, duration / 3, duration * 2 / 3}) {
    Range range{.kind = Range::Kind::time, .first = from, .last = from + duration / 4, .flag = "--range (a quarter)"};
    RangeRead part = read_range(bytes, range);
    EXPECT_EQ(part.snapshot, cut_range(whole, range, ".memrec buffer")) << from;
    EXPECT_LT(part.chunks_read, part.chunks_total) << from;
  }
}

TEST(FuzzSeeds, ErrorsNameTheBufferOrThePath) {
  std::vector<uint8_t> bytes = read_bytes(kFuzzDir + "/seeds/tiny.memrec");
  bytes[1] = 'X';
  EXPECT_EQ(read_error(bytes), ".memrec buffer: not a .memrec file (bad magic)");
}

}  // namespace
}  // namespace memrec
