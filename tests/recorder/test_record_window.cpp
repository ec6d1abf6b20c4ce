// `memrec run --record wait=,warmup=,active=`: only the active steps are in the file, which says which they were.
#include <gtest/gtest.h>

#include <string>

#include "common/process.h"
#include "memrec/format.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

std::string run_args(const std::string& record, const std::string& file) {
  return quote(MEMREC_BINARY) + " run transformer --device cpu --layers 1 --warmup 1 --steps 4 --stacks off -o " +
         quote(file) + " --record " + quote(record);
}

TEST(RecordWindow, RecordsOnlyTheActiveSteps) {
  test::TempDir dir;
  std::string file = dir / "window.memrec";
  auto r = run_command(run_args("wait=1,warmup=1,active=2", file));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = read_file(file);
  std::vector<std::string> steps;
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step && sc.name) steps.push_back(s.strings[sc.name]);
  EXPECT_EQ(steps, (std::vector<std::string>{"step 2", "step 3"}));
  ASSERT_FALSE(s.events.empty());
  int64_t first_step_start = INT64_MAX, last_step_end = 0;
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step && sc.name) {
      first_step_start = std::min(first_step_start, sc.start_ns);
      last_step_end = std::max(last_step_end, sc.end_ns);
    }
  EXPECT_GE(s.events.front().time_ns, first_step_start);  // nothing from the model's setup or steps 0-1
  EXPECT_LE(s.events.back().time_ns, last_step_end);      // nor from step 4 or the teardown
  EXPECT_EQ(s.metadata.at("record.steps"), "2-3 (wait=1,warmup=1,active=2)");

  auto info = run_command(quote(MEMREC_BINARY) + " info " + quote(file));
  EXPECT_NE(info.output.find("2-3 (wait=1,warmup=1,active=2)"), std::string::npos) << info.output;
}

TEST(RecordWindow, BadSchedulesAreOneClearError) {
  test::TempDir dir;
  for (const char* spec : {"wait=1", "active=0", "active=x", "active=6", "wait=3,active=3", "foo=1,active=1",
                           "active=1,active=2", "active", "active=-1", "active=1,"}) {
    std::string file = dir / "bad.memrec";
    auto r = run_command(run_args(spec, file));
    EXPECT_NE(r.exit_code, 0) << spec;
    EXPECT_NE(r.output.find("--record '" + std::string(spec) + "'"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("parameters:"), std::string::npos) << "built the model anyway: " << r.output;
  }
}

}  // namespace
}  // namespace memrec
