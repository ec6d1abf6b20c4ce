// Helpers shared by the pickle tests: temp files and the independent Python reference
// (tests/scripts/pickle_facts.py, which reads pickles with Python's own pickle module).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/process.h"  // test::TempDir
#include "common/fixtures.h"

namespace memrec::test {

inline std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Runs a shell command; returns its exit status.
inline int run(const std::string& command) {
  int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Runs pickle_facts.py MODE A B; returns its exit status.
inline int facts_script(const std::string& mode, const std::string& a, const std::string& b) {
  return run(fmt::format("python3 '{}' {} '{}' '{}'", source("tests/scripts/pickle_facts.py"), mode, a, b));
}

// Writes pickle.dumps(<python expression>, protocol=4) to `path` (the expression is test data, never user input).
inline void python_pickle(const std::string& expression, const std::string& path) {
  std::string code = fmt::format("import pickle,sys\nsys.stdout.buffer.write(pickle.dumps({}, protocol=4))", expression);
  std::string script = path + ".py";
  std::ofstream(script) << code;
  ASSERT_EQ(run(fmt::format("python3 '{}' > '{}'", script, path)), 0) << code;
}

}  // namespace memrec::test
