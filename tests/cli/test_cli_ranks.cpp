// `memrec stats --by rank` and `memrec diff` on two ranks, with the real binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/rank_runs.h"
#include "common/fixtures.h"
#include "memrec/format.h"
#include "memrec/ranks.h"

namespace memrec {
namespace {

using test::kMiB;
using test::rank_run;

// Three ranks of one host; rank 2 holds 3 MiB more in layers.1 at its peak.
test::RankFiles three_ranks() {
  test::RankFiles run;
  run.add("r.rank0.memrec", rank_run(0, 1'000'000, "h"));
  run.add("r.rank1.memrec", rank_run(0, 1'000'020, "h"));
  run.add("r.rank2.memrec", rank_run(3 * kMiB, 1'000'040, "h"));
  return run;
}

TEST(CliRanks, StatsByRankJson) {
  auto run = three_ranks();
  auto r = test::memrec("stats --by rank --json " + run.quoted());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["ranks"].size(), 3u);
  EXPECT_EQ(j["ranks"][1]["rank"], 1);
  EXPECT_EQ(j["ranks"][1]["peak_allocated"], 20 * kMiB);
  EXPECT_EQ(j["ranks"][2]["peak_allocated"], 23 * kMiB);
  EXPECT_EQ(j["ranks"][2]["peak_reserved"], 64 * kMiB);
  EXPECT_EQ(j["ranks"][2]["training_step"], "step 0");
  EXPECT_EQ(j["ranks"][2]["phase"], "forward");
  EXPECT_EQ(j["median_rank"], 1);
  EXPECT_EQ(j["furthest_rank"], 2);
  EXPECT_EQ(j["divergence"]["delta_peak_allocated"], 3 * kMiB);
  EXPECT_EQ(j["divergence"]["by"]["layer"]["groups_changed"], 1);
  EXPECT_EQ(j["divergence"]["by"]["layer"]["rows"][0]["key"], "layers.1");
  EXPECT_EQ(j["clock"]["aligned_on"], "shared clock");
  EXPECT_EQ(j["clock"]["note"], "the ranks ran on one host (h) and share its clock");
}

// The wording, whole: the facts are checked in JSON above and in tests/report/test_ranks_output.cpp.
TEST(CliRanks, StatsByRankText) {
  auto run = three_ranks();
  auto r = test::memrec("stats --by rank " + run.quoted());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string dir = run.dir / "";
  for (size_t at; (at = r.output.find(dir)) != std::string::npos;) r.output.replace(at, dir.size(), "DIR/");
  EXPECT_EQ(r.output,
            "3 ranks on one time axis: the ranks ran on one host (h) and share its clock\n"
            "3 of them read whole: their files hold no summary (written before memrec kept one, or cut short)\n"
            "\n"
            "  rank  peak allocated          at   peak reserved          at  step / phase            OOMs  file\n"
            "   0         20.00 MiB     +240 ns       64.00 MiB       +0 ns  step 0 / forward           0  DIR/r.rank0.memrec\n"
            "   1 m       20.00 MiB     +260 ns       64.00 MiB      +20 ns  step 0 / forward           0  DIR/r.rank1.memrec\n"
            "   2 *       23.00 MiB     +290 ns       64.00 MiB      +40 ns  step 0 / forward           0  DIR/r.rank2.memrec\n"
            "\n"
            "m: the median rank (1); *: the rank furthest from it (2, +3.00 MiB allocated at its peak)\n"
            "\n"
            "rank 2 against rank 1 at their peaks, by layer (1 groups changed):\n"
            "      +3.00 MiB     8.00 MiB -> 11.00 MiB    layers.1\n"
            "\n"
            "rank 2 against rank 1 at their peaks, by module (1 groups changed):\n"
            "      +3.00 MiB     8.00 MiB -> 11.00 MiB    layers.1.mlp\n"
            "\n"
            "rank 2 against rank 1 at their peaks, by category (1 groups changed):\n"
            "      +3.00 MiB    16.00 MiB -> 19.00 MiB    activation\n"
            "\n"
            "rank 2 against rank 1 at their peaks, by owner (1 groups changed):\n"
            "      +3.00 MiB    20.00 MiB -> 23.00 MiB    <none>\n"
            "\n"
            "rank 2 against rank 1 at their peaks, by stack (1 groups changed):\n"
            "      +3.00 MiB    20.00 MiB -> 23.00 MiB    <no stack>\n");
}

TEST(CliRanks, SeveralFilesOnlyByRank) {
  auto run = three_ranks();
  auto r = test::memrec("stats " + run.quoted());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("memrec: error: stats reads one file (3 given); several only with --by rank"), std::string::npos)
      << r.output;
  r = test::memrec("stats --by rank --at 1ms " + run.quoted());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--at and --kernels take one file"), std::string::npos) << r.output;
  r = test::memrec("diff --by rank " + run.quoted().substr(0, run.quoted().rfind(' ')));
  EXPECT_NE(r.exit_code, 0) << "diff compares two files: no --by rank";
}

TEST(CliRanks, DiffNamesTheRanks) {
  auto run = three_ranks();
  auto r = test::memrec("diff " + test::quote(run.paths[0]) + " " + test::quote(run.paths[2]));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("comparing rank 0 (a) with rank 2 (b)"), std::string::npos) << r.output;
  auto j = nlohmann::json::parse(
      test::memrec("diff --json " + test::quote(run.paths[0]) + " " + test::quote(run.paths[2])).output);
  EXPECT_EQ(j["ranks"]["a"], 0);
  EXPECT_EQ(j["ranks"]["b"], 2);
  EXPECT_EQ(j["delta_peak_allocated"], 3 * kMiB);
}

// One line naming the reason, a non-zero exit.
void expect_refused(const test::CommandResult& r, const std::string& file) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("memrec: error: ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find(file), std::string::npos) << r.output;
}

const std::string kDefault = test::data("alloc_default.memrec");

// Two ranks' files with summaries: diff by a grouping the summaries keep answers from them alone (the files'
// events damaged, as the same diff of the whole files), and a question they cannot answer reads the files.
TEST(CliRanks, DiffOfTwoRanksReadsTheirSummaries) {
  auto run = three_ranks();
  run.add("whole.rank0.memrec", rank_run(0, 1'000'000, "h"));  // as rank 0 and 2, without summaries
  run.add("whole.rank2.memrec", rank_run(3 * kMiB, 1'000'040, "h"));
  std::string pair = test::quote(run.paths[0]) + " " + test::quote(run.paths[2]);
  for (size_t i : {0, 2}) {
    write_summary(read_file(run.paths[i]), run.paths[i]);
    test::damage_first_chunk(run.paths[i]);
  }
  auto r = test::memrec("diff --json --by layer " + pair);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto whole = test::memrec("diff --json --by layer " + test::quote(run.paths[3]) + " " + test::quote(run.paths[4]));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_EQ(nlohmann::json::parse(r.output), nlohmann::json::parse(whole.output));
  expect_refused(test::memrec("diff --by op " + pair), run.paths[0]);
}

TEST(CliRanks, OneFileTwiceIsNoTwoRanks) {
  test::TempDir dir;
  std::filesystem::create_symlink(kDefault, dir / "link.memrec");
  for (const std::string& again : {kDefault, dir / "link.memrec"})
    expect_refused(test::memrec("stats --by rank " + test::quote(kDefault) + " " + test::quote(again)), kDefault);
}

// A copy is one process's recording twice (the same pid, and no host recorded: both empty).
TEST(CliRanks, ACopyOfARecordingIsNoSecondRank) {
  test::TempDir dir;
  std::filesystem::copy_file(kDefault, dir / "copy.memrec");
  expect_refused(test::memrec("stats --by rank " + test::quote(kDefault) + " " + test::quote(dir / "copy.memrec")),
                 dir / "copy.memrec");
}

// Two runs of the H100 workload, one after the other: the second began after the first ended.
TEST(CliRanks, RecordingsThatDidNotRunAtOnceAreNoRanksOfOneRun) {
  const std::string split = test::data("alloc_split64.memrec");
  expect_refused(test::memrec("stats --by rank " + test::quote(kDefault) + " " + test::quote(split)), split);
  // PyTorch's two snapshots of one process, 9 ms apart.
  const std::string all = test::data("torch_2layer_all.pickle");
  const std::string python = test::data("torch_2layer_python.pickle");
  expect_refused(test::memrec("stats --by rank " + test::quote(all) + " " + test::quote(python)), all);
}

}  // namespace
}  // namespace memrec
