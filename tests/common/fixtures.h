// Where the tests' inputs are: the recordings and pickles in tests/data, and files of this source tree.
#pragma once

#include <string>

namespace memrec::test {

// A file in tests/data: "alloc_default.memrec", "torch_2layer_all.pickle".
inline std::string data(const std::string& name) { return std::string(MEMREC_TEST_DATA) + "/" + name; }
// A file of the source tree: "examples/train.py", "tests/scripts/pool_bytes.py".
inline std::string source(const std::string& path) { return std::string(MEMREC_SOURCE_DIR) + "/" + path; }

}  // namespace memrec::test
