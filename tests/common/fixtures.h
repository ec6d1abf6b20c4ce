// Where the tests' inputs are: the recordings and pickles in tests/data, and files of this source tree.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace memrec::test {

// A file in tests/data: "alloc_default.memrec", "torch_2layer_all.pickle".
inline std::string data(const std::string& name) { return std::string(MEMREC_TEST_DATA) + "/" + name; }
// A file of the source tree: "examples/train.py", "tests/scripts/pool_bytes.py".
inline std::string source(const std::string& path) { return std::string(MEMREC_SOURCE_DIR) + "/" + path; }

// The 1-based line of the file at `path` that first holds `marker` (a test fails where none does).
inline uint32_t line_holding(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); ++n)
    if (line.find(marker) != std::string::npos) return n;
  ADD_FAILURE() << "no line of " << path << " holds " << marker;
  return 0;
}

}  // namespace memrec::test
