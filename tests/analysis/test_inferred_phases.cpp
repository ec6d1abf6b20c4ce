// Phases and categories of PyTorch's own snapshots, which have no phase scopes: inferred from the frames and the
// Optimizer.step annotations, checked against tests/scripts/inferred_phases.py, which reads the same pickles with
// python3's pickle module and applies docs/analysis.md's rule on its own.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/load.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

nlohmann::json reference(const std::string& pickle) {
  auto r = run_command("/usr/bin/python3 " + quote(test::source("tests/scripts/inferred_phases.py")) +
                       " " + quote(pickle));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output)[0];
}

// The phase of each alloc entry, in trace order, as PhaseIndex places it.
std::vector<std::string> phases_of(const Snapshot& s) {
  PhaseIndex phases(s, 0);
  EXPECT_TRUE(phases.inferred());
  std::vector<std::string> out;
  for (const Event& e : s.events) {
    if (e.device != 0 || e.action != Action::alloc) continue;
    uint32_t p = phases.at(e.time_ns);
    out.emplace_back(p ? to_string(phases.kind(p)) : "");
  }
  return out;
}

class InferredPhases : public ::testing::TestWithParam<const char*> {};

TEST_P(InferredPhases, MatchTheFrames) {
  Snapshot s = load_snapshot(test::data(GetParam()));
  auto want = reference(test::data(GetParam()));
  std::vector<std::string> got = phases_of(s);
  ASSERT_EQ(got.size(), want["phases"].size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want["phases"][i].get<std::string>()) << "alloc " << i;
  for (const char* phase : {"forward", "backward", "optimizer"})
    EXPECT_NE(std::find(got.begin(), got.end(), phase), got.end()) << phase;
}

TEST_P(InferredPhases, CategoriesAtThePeak) {
  Snapshot s = load_snapshot(test::data(GetParam()));
  auto want = reference(test::data(GetParam()))["live_at_peak"];
  Replay r(s, 0);
  nlohmann::json got = nlohmann::json::object();
  for (const Group& g : group_live(s, r, r.peak_allocated().step, GroupBy::category)) got[g.key] = g.bytes;
  EXPECT_EQ(got, want);
  EXPECT_FALSE(got.contains("temporary") && got["temporary"].get<uint64_t>() * 2 > r.peak_allocated().bytes) << got;
}

INSTANTIATE_TEST_SUITE_P(PyTorch211, InferredPhases,
                         ::testing::Values("torch_2layer_all.pickle", "torch_2layer_python.pickle",
                                           "torch_compile_graph.pickle"));

// A memrec recording has phase scopes: they are used as recorded, nothing is inferred.
TEST(InferredPhases, RecordedPhasesStay) {
  Snapshot s = load_snapshot(test::data("transformer_2layer_cpu.memrec"));
  PhaseIndex phases(s, 0);
  EXPECT_FALSE(phases.inferred());
  size_t recorded = 0;
  for (const Scope& sc : s.scopes) recorded += sc.kind == ScopeKind::phase;
  EXPECT_EQ(phases.size(), recorded);
}

// Without any frame or annotation to go by, nothing is called temporary: every block is unknown.
TEST(InferredPhases, NothingToInferIsUnknown) {
  Snapshot s;
  for (int i = 0; i < 4; ++i) {
    s.events.push_back(Event{.time_ns = 1000 * i, .addr = 4096u * (i + 1), .size = 100, .action = Action::alloc});
    if (i % 2) s.events.push_back(Event{.time_ns = 1000 * i + 500, .addr = 4096u * (i + 1), .size = 100,
                                        .action = Action::free_requested});
  }
  Replay r(s, 0);
  for (Category c : categorize(s, r)) EXPECT_EQ(c, Category::unknown);
}

}  // namespace
}  // namespace memrec
