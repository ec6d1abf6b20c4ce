// `memrec stats --by rank`'s JSON and wording, rendered from the ranks of runs whose answers are known by
// construction (tests/common/rank_runs.h) and from RankSets written by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/rank_runs.h"
#include "memrec/ranks_output.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::rank_run;
using test::RankFiles;
constexpr uint64_t MiB = test::kMiB;

TEST(RanksOutput, JsonNamesTheFurthestRankAndWhatItHoldsMore) {
  RankFiles run;
  run.add("r.rank0.memrec", rank_run(0, 1'000'000, "h"));
  run.add("r.rank2.memrec", rank_run(3 * MiB, 1'000'040, "h"));
  run.add("r.rank1.memrec", rank_run(0, 1'000'020, "h"));
  RankSet set = load_ranks(run.paths, {});
  json j = ranks_json(set, 10);
  ASSERT_EQ(j["ranks"].size(), 3u);
  EXPECT_EQ(j["ranks"][2]["rank"], 2);
  EXPECT_EQ(j["ranks"][2]["file"], run.paths[1]);
  EXPECT_EQ(j["ranks"][2]["rank_from"], "file name");
  EXPECT_EQ(j["ranks"][2]["peak_allocated"], 23 * MiB);
  EXPECT_EQ(j["ranks"][2]["peak_allocated_ns"], set.on_axis(2, set.ranks[2].peak_allocated.time_ns));
  EXPECT_EQ(j["ranks"][2]["training_step"], "step 0");
  EXPECT_EQ(j["ranks"][2]["phase"], "forward");
  EXPECT_EQ(j["duration_ns"], set.duration_ns);
  EXPECT_EQ(j["median_rank"], 1);
  EXPECT_EQ(j["furthest_rank"], 2);
  const json& d = j["divergence"];
  EXPECT_EQ(d["rank"], 2);
  EXPECT_EQ(d["median_rank"], 1);
  EXPECT_EQ(d["delta_peak_allocated"], 3 * MiB);
  EXPECT_EQ(d["delta_peak_reserved"], 0);
  const std::pair<const char*, const char*> grown[] = {
      {"layer", "layers.1"}, {"module", "layers.1.mlp"}, {"category", "activation"}, {"stack", "<no stack>"}};
  for (const auto& [by, key] : grown) {
    EXPECT_EQ(d["by"][by]["groups_changed"], 1) << by;
    EXPECT_EQ(d["by"][by]["rows"][0]["key"], key) << by;
    EXPECT_EQ(d["by"][by]["rows"][0]["delta"], 3 * MiB) << by;
  }
}

TEST(RanksOutput, OneRankHasNoDivergence) {
  RankFiles run;
  run.add("r.rank0.memrec", rank_run(0, 0, ""));
  RankSet set = load_ranks(run.paths, {});
  json j = ranks_json(set, 10);
  EXPECT_TRUE(j["median_rank"].is_null());
  EXPECT_TRUE(j["furthest_rank"].is_null());
  EXPECT_TRUE(j["divergence"].is_null());
  std::string text = ranks_text(set, 10);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5)
      << "the note, that the file had no summary, a blank line, the header and the rank:\n" << text;
}

TEST(RanksOutput, RanksThatHoldTheSameAreSaidToBeTheSame) {
  RankFiles run;
  run.add("r.rank0.memrec", rank_run(0, 0, ""));
  run.add("r.rank1.memrec", rank_run(0, 10, ""));
  RankSet set = load_ranks(run.paths, {});
  for (const char* by : {"layer", "module", "category", "owner", "stack"})
    EXPECT_EQ(ranks_json(set, 10)["divergence"]["by"][by]["groups_changed"], 0) << by;
  std::string text = ranks_text(set, 10);
  EXPECT_TRUE(text.ends_with("\nm: the median rank (0); *: the rank furthest from it (1, +0 B allocated at its peak)\n"
                             "what was live at their peaks is the same by layer, module, category, owner and stack\n"))
      << text;
}

TEST(RanksOutput, TheClockNoteSaysHowTheRanksShareATimeAxis) {
  RankSet set;
  EXPECT_EQ(clock_note(set), "no host recorded: the ranks' clocks are taken as one (CLOCK_REALTIME)");
  EXPECT_EQ(ranks_json(set, 1)["clock"]["aligned_on"], "shared clock");
  set.hosts = {"h"};
  EXPECT_EQ(clock_note(set), "the ranks ran on one host (h) and share its clock");
  set.hosts = {"a", "b", "c"};
  set.aligned_on_steps = true;
  set.aligned_on = "steps";
  set.step_reference = 1;
  EXPECT_EQ(clock_note(set), "the ranks ran on 3 hosts, whose clocks differ: aligned on rank 1's clock by the "
                             "training steps (their starts) they share with it");
  EXPECT_EQ(ranks_json(set, 1)["clock"]["aligned_on"], "steps");
  set.aligned_on = "collectives";
  set.uncertainty_ns = 19'873;
  EXPECT_EQ(clock_note(set), "the ranks ran on 3 hosts, whose clocks differ: aligned on rank 1's clock by the "
                             "collectives (their ends) they share with it, to within 19.9 us");
  EXPECT_EQ(ranks_json(set, 1)["clock"]["uncertainty_ns"], 19'873);
  set.unaligned = {0};
  EXPECT_TRUE(clock_note(set).ends_with("19.9 us; rank 0 shared none and keep their own clock"));
  set.unaligned = {0, 2};
  EXPECT_TRUE(clock_note(set).ends_with("19.9 us; ranks 0, 2 shared none and keep their own clock"));
}

TEST(RanksOutput, PeakStepAndPhase) {
  RankRecording r;
  EXPECT_EQ(peak_step_and_phase(r), "");
  r.peak_phase = "forward";
  EXPECT_EQ(peak_step_and_phase(r), "forward");
  r.peak_step = "step 3";
  EXPECT_EQ(peak_step_and_phase(r), "step 3 / forward");
  r.peak_phase.clear();
  EXPECT_EQ(peak_step_and_phase(r), "step 3");
}

}  // namespace
}  // namespace memrec
