// `memrec growth` on the recordings in tests/data: steps from scopes and from a PyTorch pickle's phases, a run
// without steps, and bad input.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/replay.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::memrec;
using test::quote;
using test::TempDir;

json growth_json(const std::string& args) {
  auto r = memrec("growth --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output.substr(r.output.find('{')));
}

// The allocated bytes just before the first event at or after `t` on device 0, replayed here from the events.
uint64_t allocated_before(const Snapshot& s, int64_t t) {
  Replay r(s, 0);
  uint32_t step = 0;
  while (step < r.steps() && r.time_of(step) < t) ++step;
  return step == 0 ? r.initial().allocated : r.after(step - 1).allocated;
}

TEST(CliGrowth, EachStepStartsWithWhatWasLiveBeforeItsFirstEvent) {
  std::string file = test::data("transformer_2layer_cpu.memrec");
  json g = growth_json(quote(file));
  Snapshot s = load_snapshot(file);
  ASSERT_FALSE(g["steps"].empty()) << g.dump(1);
  int64_t origin = s.events[0].time_ns;
  for (const json& step : g["steps"]) {
    uint32_t scope = 0;
    for (uint32_t id = 1; id < s.scopes.size(); ++id)
      if (s.scopes[id].kind == ScopeKind::step && s.strings[s.scopes[id].name] == "step " + step["step"].dump())
        scope = id;
    ASSERT_NE(scope, 0u) << step;
    EXPECT_EQ(step["start_ns"].get<int64_t>(), s.scopes[scope].start_ns - origin);
    EXPECT_EQ(step["allocated"].get<uint64_t>(), allocated_before(s, s.scopes[scope].start_ns)) << step;
  }
  EXPECT_TRUE(g["settled_from"].is_number());
  EXPECT_TRUE(g["per_step"]["allocated"].is_number());
}

TEST(CliGrowth, APickleHasStepsFromItsPhases) {
  json g = growth_json(quote(test::data("torch_2layer_all.pickle")));
  EXPECT_TRUE(g["inferred_steps"].get<bool>()) << g.dump(1);
  EXPECT_GE(g["steps"].size(), 2u) << g.dump(1);
  for (size_t i = 1; i < g["steps"].size(); ++i)
    EXPECT_GT(g["steps"][i]["start_ns"].get<int64_t>(), g["steps"][i - 1]["start_ns"].get<int64_t>());
}

TEST(CliGrowth, ARunWithoutStepsSaysSoInOneSentence) {
  TempDir dir;
  Snapshot s;  // two blocks, no scopes and no frames to infer phases from
  s.events.push_back(Event{.time_ns = 1000, .addr = 0x1000, .size = 4096, .action = Action::alloc});
  s.events.push_back(Event{.time_ns = 2000, .addr = 0x2000, .size = 8192, .action = Action::alloc});
  write_file(s, dir / "nosteps.memrec");
  auto r = memrec("growth " + quote(dir / "nosteps.memrec"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no training steps"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  json g = growth_json(quote(dir / "nosteps.memrec"));
  EXPECT_TRUE(g["steps"].empty());
  EXPECT_EQ(g["verdict"], "too few steps");
  EXPECT_TRUE(g["projected_full_step"].is_null());
}

TEST(CliGrowth, BadInputIsOneClearError) {
  TempDir dir;
  std::ofstream(dir / "bad.memrec") << "not a recording";
  std::string steps = quote(test::data("transformer_2layer_cpu.memrec"));
  for (const std::string& args : {"growth " + quote(dir / "bad.memrec"), "growth " + steps + " --steps 900..901",
                                  "growth " + steps + " --steps 3..1", "growth " + steps + " --device-memory lots"}) {
    auto r = memrec(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_TRUE(r.output.starts_with("memrec: error: ")) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace memrec
