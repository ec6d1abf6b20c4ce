// What a recording cost the program: the recorder times its own hooks, `memrec record --cost` and `memrec info` say
// it per step.
#include <gtest/gtest.h>

#include <string>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/info.h"
#include "memrec/load.h"
#include "memrec/recording_cost.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::TempDir;

const std::string kMemrec = MEMREC_BINARY;
const std::string kPython = MEMREC_TEST_PYTHON;

int64_t metadata_number(const Snapshot& s, const std::string& key) {
  auto it = s.metadata.find(key);
  return it == s.metadata.end() ? -1 : std::stoll(it->second);
}

TEST(RecordCost, RecordAndInfoSayWhatTheHooksCostAStep) {
  TempDir dir;
  std::string out = dir / "t.memrec";
  auto r = run_command(quote(kMemrec) + " record --cost -o " + quote(out) + " -- " + kPython + " " +
                       test::source("examples/train.py") + " --steps 3 --layers 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(out);

  // Every kind of hook ran and was timed: allocations, aten ops (op scopes are on by default), module scopes.
  for (const char* kind : {"events", "ops", "scopes"}) {
    EXPECT_GT(metadata_number(s, std::string("recorder.hook_ns.") + kind), 0) << kind;
    EXPECT_GT(metadata_number(s, std::string("recorder.hook_calls.") + kind), 0) << kind;
  }
  // One op callback for each start and end: more calls than allocations.
  EXPECT_GT(metadata_number(s, "recorder.hook_calls.ops"), int64_t(s.events.size()) / 3);

  std::optional<RecordingCost> c = recording_cost(s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->events, s.events.size());
  EXPECT_EQ(c->steps, 4u);  // the program's 3 optimizer steps and the one that runs until it exits
  EXPECT_GT(c->hooks_ns(), 0);
  EXPECT_LT(c->hooks_ns(), c->span_ns);  // the hooks run inside the recording
  EXPECT_GT(c->step_ns, 0);
  EXPECT_GT(c->share(), 0.0);
  EXPECT_LT(c->share(), 1.0);

  // The same line after the run and in `memrec info`.
  std::string line = cost_text(*c);
  EXPECT_TRUE(line.starts_with("recording cost: " + std::to_string(s.events.size()) + " events; memrec's hooks "));
  EXPECT_NE(r.output.find(line), std::string::npos) << r.output;
  auto info = run_command(quote(kMemrec) + " info " + quote(out));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find(line), std::string::npos) << info.output;
}

}  // namespace
}  // namespace memrec
