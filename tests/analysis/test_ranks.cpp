// Ranks side by side: which rank a file holds, one time axis, peaks and the rank that diverges, on runs whose
// answers are known by construction (one rank allocates a block more in layers.1's forward).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "common/process.h"
#include "common/rank_runs.h"
#include "memrec/ranks.h"

namespace memrec {
namespace {

using test::rank_run;
using test::RankFiles;
constexpr uint64_t MiB = test::kMiB;

uint64_t bytes_of(const std::vector<Group>& groups, const std::string& key) {
  auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.key == key; });
  return it == groups.end() ? 0 : it->bytes;
}

TEST(Ranks, RankFromFileName) {
  EXPECT_EQ(rank_from_file_name("/tmp/run.rank3.memrec"), 3);
  EXPECT_EQ(rank_from_file_name("snapshot_rank12.pickle"), 12);
  EXPECT_EQ(rank_from_file_name("out/rank-0.pickle"), 0);
  EXPECT_EQ(rank_from_file_name("rank_7_step100.pickle"), 7);
  EXPECT_EQ(rank_from_file_name("ranks/run.memrec"), std::nullopt) << "only the file name counts";
  EXPECT_EQ(rank_from_file_name("run.pid123.memrec"), std::nullopt);
  EXPECT_EQ(rank_from_file_name("rankings.memrec"), std::nullopt);
}

TEST(Ranks, FurthestRankAndHowItDiffersFromTheMedian) {
  RankFiles run;
  run.add("r.rank0.memrec", rank_run(0, 1'000'000, "h"));
  run.add("r.rank2.memrec", rank_run(3 * MiB, 1'000'040, "h"));  // the heavier rank, given out of order
  run.add("r.rank1.memrec", rank_run(0, 1'000'020, "h"));
  RankSet set = load_ranks(run.paths, {.threads = 2});
  ASSERT_EQ(set.ranks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const RankRecording& r = set.ranks[i];
    EXPECT_EQ(r.rank, static_cast<int>(i));
    EXPECT_EQ(r.rank_from, "file name");
    Snapshot s = read_file(r.path);
    Replay replay(s, 0);
    EXPECT_EQ(r.peak_allocated.bytes, replay.peak_allocated().bytes);
    EXPECT_EQ(r.peak_reserved.bytes, 64 * MiB);
    EXPECT_EQ(r.peak_step, "step 0");
    EXPECT_EQ(r.peak_phase, "forward");
    EXPECT_EQ(r.offset_ns, 0) << "one host: the shared clock";
  }
  EXPECT_EQ(set.ranks[2].peak_allocated.bytes, 23 * MiB);
  EXPECT_FALSE(set.aligned_on_steps);
  EXPECT_EQ(set.origin_ns, 1'000'010);
  EXPECT_EQ(set.on_axis(2, set.ranks[2].peak_allocated.time_ns), 40 + 260 - 10);
  ASSERT_TRUE(set.median && set.furthest);
  EXPECT_EQ(set.ranks[*set.furthest].rank, 2);
  EXPECT_EQ(set.ranks[*set.median].peak_allocated.bytes, 20 * MiB);

  EXPECT_EQ(set.delta_peak_allocated, int64_t(3 * MiB));
  EXPECT_EQ(set.delta_peak_reserved, 0);
  // At their peaks, rank 2 holds 3 MiB more than the median rank in layers.1's MLP, all of it activations.
  const RankRecording &median = set.ranks[*set.median], &furthest = set.ranks[*set.furthest];
  const std::pair<GroupBy, std::string> grown[] = {
      {GroupBy::layer, "layers.1"}, {GroupBy::module, "layers.1.mlp"}, {GroupBy::category, "activation"}};
  for (const auto& [by, key] : grown) {
    size_t g = std::find(kRankGroupings.begin(), kRankGroupings.end(), by) - kRankGroupings.begin();
    EXPECT_EQ(bytes_of(furthest.at_peak[g], key), bytes_of(median.at_peak[g], key) + 3 * MiB) << key;
    EXPECT_EQ(furthest.at_peak[g].size(), median.at_peak[g].size()) << key << ": no group comes or goes";
  }
}

TEST(Ranks, TwoRanksTheHigherPeakDiverges) {
  RankFiles run;
  run.add("a.memrec", rank_run(1 * MiB, 0, ""));
  run.add("b.memrec", rank_run(0, 0, ""));
  RankSet set = load_ranks(run.paths, {});
  EXPECT_EQ(set.ranks[0].rank_from, "order");
  EXPECT_EQ(set.ranks[*set.furthest].path, run.paths[0]);
  EXPECT_TRUE(set.hosts.empty());
  EXPECT_FALSE(set.aligned_on_steps) << "no host recorded: one clock";
}

TEST(Ranks, MetadataRankBeatsTheFileName) {
  RankFiles run;
  Snapshot s = rank_run(0, 0, "");
  s.metadata["rank"] = "5";
  run.add("r.rank0.memrec", s);
  RankSet set = load_ranks(run.paths, {});
  EXPECT_EQ(set.ranks[0].rank, 5);
  EXPECT_EQ(set.ranks[0].rank_from, "metadata");
  EXPECT_FALSE(set.furthest) << "one rank has no divergence";
}

TEST(Ranks, TwoFilesOfOneRankAreAnError) {
  RankFiles run;
  run.add("x.rank1.memrec", rank_run(0, 0, ""));
  run.add("y.rank1.memrec", rank_run(0, 0, ""));
  try {
    load_ranks(run.paths, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("are both rank 1 (both by file name)"), std::string::npos) << e.what();
  }
}

TEST(Ranks, AFileThatIsNoRecordingIsNamed) {
  RankFiles run;
  for (int r = 0; r < 6; ++r) run.add("r.rank" + std::to_string(r) + ".memrec", rank_run(0, 0, ""));
  std::string bad = run.dir / "r.rank6.memrec";
  { std::ofstream(bad) << "not a recording"; }
  run.paths.push_back(bad);
  try {
    load_ranks(run.paths, {.threads = 3});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST(Ranks, RanksOfRunsOfDifferentSizesAreAnError) {
  RankFiles run;
  Snapshot of_two = rank_run(0, 0, "h"), of_four = rank_run(0, 0, "h");
  of_two.metadata["world_size"] = "2";
  of_four.metadata["world_size"] = "4";
  run.add("r.rank0.memrec", of_two);
  run.add("r.rank1.memrec", of_four);
  EXPECT_THROW(load_ranks(run.paths, {}), Error);
}

// Hosts' clocks disagree by a little, not by hours: recordings a day apart are runs of their own.
TEST(Ranks, HostsADayApartAreAnError) {
  RankFiles run;
  run.add("r.rank0.memrec", rank_run(0, 5'000'000, "node-a"));
  run.add("r.rank1.memrec", rank_run(0, 5'000'000 + 86'400'000'000'000, "node-b"));
  EXPECT_THROW(load_ranks(run.paths, {}), Error);
}

// Hosts' clocks differ: each rank's first step starts with rank 0's, whatever the clocks said.
TEST(Ranks, SeveralHostsAlignOnTheFirstStep) {
  RankFiles run;
  run.add("r.rank0.memrec", rank_run(0, 5'000'000, "node-a"));
  run.add("r.rank1.memrec", rank_run(2 * MiB, 9'000'000, "node-b"));
  RankSet set = load_ranks(run.paths, {});
  EXPECT_TRUE(set.aligned_on_steps);
  EXPECT_EQ(set.aligned_on, "steps") << "no collectives recorded";
  EXPECT_EQ(set.uncertainty_ns, 0) << "one shared step";
  EXPECT_EQ(set.ranks[1].offset_ns, -4'000'000);
  EXPECT_EQ(set.on_axis(0, set.ranks[0].peak_allocated.time_ns), set.on_axis(1, set.ranks[1].peak_allocated.time_ns) - 10);
  EXPECT_EQ(set.hosts, (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(set.step_reference, 0);
  EXPECT_TRUE(set.unaligned.empty());
}

// A rank that recorded no training step has nothing to align: it keeps its own clock, and says so.
TEST(Ranks, ARankWithoutStepsKeepsItsClock) {
  RankFiles run;
  Snapshot stepless = rank_run(0, 7'000'000, "node-c");
  stepless.scopes.update(1, [](Scope& sc) { sc.kind = ScopeKind::phase; });  // "step 0" is no step now
  run.add("r.rank0.memrec", stepless);
  run.add("r.rank1.memrec", rank_run(0, 5'000'000, "node-a"));
  run.add("r.rank2.memrec", rank_run(0, 9'000'000, "node-b"));
  RankSet set = load_ranks(run.paths, {});
  EXPECT_EQ(set.step_reference, 1) << "the lowest rank with a step";
  EXPECT_EQ(set.unaligned, std::vector<int>{0});
  EXPECT_EQ(set.ranks[0].offset_ns, 0);
  EXPECT_EQ(set.ranks[2].offset_ns, -4'000'000);
}

TEST(Ranks, MemoryCurveHoldsThePeak) {
  RankFiles run;
  run.add("r.rank0.memrec", rank_run(3 * MiB, 1'000, ""));
  RankSet set = load_ranks(run.paths, {.curve = true});
  const RankRecording& r = set.ranks[0];
  ASSERT_EQ(r.allocated_max.size(), kSummaryCurve);
  EXPECT_EQ(*std::max_element(r.allocated_max.begin(), r.allocated_max.end()), 23 * MiB);
  EXPECT_EQ(r.highest_in(r.begin_ns, r.end_ns + 1)->first, 23 * MiB);
  ASSERT_EQ(r.bucket_ns, 2);  // 600 ns from the first event to the last
  EXPECT_EQ(r.highest_in(r.begin_ns, r.begin_ns + 10)->first, 0u) << "before the first alloc";
  EXPECT_EQ(r.highest_in(r.begin_ns, r.begin_ns + 10)->second, 64 * MiB);
  EXPECT_EQ(r.highest_in(r.begin_ns + 20, r.begin_ns + 130)->first, 4 * MiB) << "the parameters alone";
  EXPECT_FALSE(r.highest_in(r.end_ns + 10, r.end_ns + 20)) << "after the last event";
  EXPECT_FALSE(r.highest_in(r.begin_ns - 20, r.begin_ns)) << "before the first";
}

}  // namespace
}  // namespace memrec
