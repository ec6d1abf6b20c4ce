// The Python frames memrec records against the stack traceback.extract_stack() sees at the same place, for code of
// every shape (stack_shapes.py): recursion, generators, coroutines, comprehensions, callbacks from C, properties,
// exception handlers, a second thread, with blocks, a class body, exec'd code, code objects born where dead ones
// were; and a thread's frames taken while another thread holds the interpreter's lock.
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

// held_gil.py: a worker allocates while the main thread holds the interpreter's lock; its frames, each first seen
// then, are named without waiting for the lock (the program fails when the worker made no progress meanwhile).
TEST(PythonFrames, AThreadWithoutTheInterpreterLockGetsItsFramesWhileAnotherHoldsIt) {
  test::TempDir dir;
  std::string script = test::source("tests/python/held_gil.py");
  auto r = test::run_command("PYTHONPATH=" + std::string(MEMREC_PYTHON_PACKAGE_DIR) + " " + MEMREC_TEST_PYTHON + " " +
                             script + " " + dir / "held.memrec");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  uint32_t call_line = std::stoul(r.output.substr(0, r.output.find(' ')));
  Snapshot s = load_snapshot(dir / "held.memrec");
  size_t worker_allocs = 0;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc || e.size < 4000 || e.size > 4024) continue;  // churn's torch.empty(1000..1006)
    ++worker_allocs;
    auto stack = s.stacks[e.stack];
    ASSERT_GE(stack.size(), 2u);
    const Frame& call = s.frames[stack[0]];
    EXPECT_EQ(s.strings[call.function], "worker");
    EXPECT_EQ(s.strings[call.file], script);
    EXPECT_EQ(call.line, call_line);
    EXPECT_EQ(s.strings[s.frames[stack[1]].function], "Thread.run");
  }
  EXPECT_EQ(worker_allocs, 2000u);
  EXPECT_EQ(s.metadata["recorder.python_frames_unnamed"], "0");
}

}  // namespace
}  // namespace memrec
