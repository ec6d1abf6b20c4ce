// The Python frames memrec records against the stack traceback.extract_stack() sees at the same place, for code of
// every shape (stack_shapes.py): recursion, generators, coroutines, comprehensions, callbacks from C, properties,
// exception handlers, a second thread, with blocks, a class body, exec'd code.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/load.h"

namespace memrec {
namespace {

struct ShownFrame {
  std::string file;
  uint32_t line = 0;
  std::string function;
};

// stack_shapes.py's rows: bytes, file, line, function; innermost first.
std::map<uint64_t, std::vector<ShownFrame>> read_expected(const std::string& path) {
  std::map<uint64_t, std::vector<ShownFrame>> out;
  std::ifstream in(path);
  std::string row;
  while (std::getline(in, row)) {
    std::istringstream fields(row);
    std::string size, file, line, function;
    std::getline(fields, size, '\t'), std::getline(fields, file, '\t'), std::getline(fields, line, '\t');
    std::getline(fields, function);
    out[std::stoull(size)].push_back({file, uint32_t(std::stoul(line)), function});
  }
  return out;
}

std::string text_of(const std::vector<ShownFrame>& frames) {
  std::string out;
  for (const ShownFrame& f : frames) out += "\n    " + f.function + " " + f.file + ":" + std::to_string(f.line);
  return out;
}

TEST(PythonFrames, EveryShapeOfCodeGivesTheStackTracebackSees) {
  test::TempDir dir;
  auto r = test::run_command("PYTHONPATH=" + std::string(MEMREC_PYTHON_PACKAGE_DIR) + " " + MEMREC_TEST_PYTHON + " " +
                             test::source("tests/python/stack_shapes.py") + " " + dir / "shapes.memrec" + " " +
                             dir / "expected.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "shapes.memrec");
  auto expected = read_expected(dir / "expected.txt");
  ASSERT_GE(expected.size(), 60u);
  constexpr size_t kMaxFrames = 64;  // memrec's default: the innermost ones
  size_t compared = 0;
  for (const Event& e : s.events) {
    auto it = expected.find(e.size);
    if (e.action != Action::alloc || it == expected.end()) continue;
    std::vector<ShownFrame> want(it->second.begin(), it->second.begin() + std::min(it->second.size(), kMaxFrames));
    std::vector<ShownFrame> got;
    for (uint32_t f : s.stacks[e.stack])
      got.push_back({s.strings[s.frames[f].file], s.frames[f].line, s.strings[s.frames[f].function]});
    bool same = got.size() == want.size();
    for (size_t i = 0; same && i < got.size(); ++i)  // memrec names a function by its qualified name
      same = got[i].file == want[i].file && got[i].line == want[i].line && got[i].function.ends_with(want[i].function);
    EXPECT_TRUE(same) << e.size << " bytes: recorded" << text_of(got) << "\ntraceback" << text_of(want);
    ++compared;
  }
  EXPECT_EQ(compared, expected.size());
  // The program says which walk its Python version should get.
  std::string walk = r.output.substr(0, r.output.find('\n'));
  EXPECT_EQ(s.metadata["recorder.python_frames"].substr(0, walk.size()), walk);
}

}  // namespace
}  // namespace memrec
