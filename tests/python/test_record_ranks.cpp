// Two DDP ranks of the Python example on gloo, started the way torchrun starts them (Debian's torchrun 1.13 fails
// on Python 3.11), rank 1 given a larger batch, recorded by one `memrec record`: `stats --by rank` finds rank 1,
// each rank's peak is its own replay's, and the viewer opens both files side by side.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

const std::string kMemrec = MEMREC_BINARY;
const std::string kTrain = test::source("examples/train.py");

// Runs `ranks` ranks under `memrec record -o DIR/r.memrec`, rank `big` with `big_batch`.
test::CommandResult record_ranks(const test::TempDir& dir, int ranks, int big, int big_batch, int port_base) {
  std::string env = "WORLD_SIZE=" + std::to_string(ranks) + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                    std::to_string(port_base + getpid() % 20000);
  std::string rank = std::string(MEMREC_TEST_PYTHON) + " " + kTrain + " --steps 2 --layers 1 --device cpu --batch 2 " +
                     "--rank-batch " + std::to_string(big) + "=" + std::to_string(big_batch);
  std::string script, waits = "true";
  for (int r = 0; r < ranks; ++r) {
    script += "RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) + " " + env + " " + rank + " & p" +
              std::to_string(r) + "=$!; ";
    waits += " && wait $p" + std::to_string(r);
  }
  return run_command(kMemrec + " record -o " + dir / "r.memrec" + " -- /bin/bash -c " + quote(script + waits));
}

test::CommandResult record_two_ranks(const test::TempDir& dir, int rank1_batch) {
  return record_ranks(dir, 2, 1, rank1_batch, 21000);
}

TEST(RecordRanks, TheRankGivenMoreWorkIsFurthestFromTheMedian) {
  test::TempDir dir;
  auto rec = record_two_ranks(dir, 16);
  ASSERT_EQ(rec.exit_code, 0) << rec.output;
  std::string files = quote(dir / "r.rank0.memrec") + " " + quote(dir / "r.rank1.memrec");
  auto r = run_command(kMemrec + " stats --by rank --json " + files);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["furthest_rank"], 1);
  EXPECT_EQ(j["median_rank"], 0);
  EXPECT_GT(j["ranks"][1]["peak_allocated"].get<uint64_t>(), j["ranks"][0]["peak_allocated"].get<uint64_t>());
  EXPECT_EQ(j["clock"]["aligned_on"], "shared clock");
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& row = j["ranks"][i];
    EXPECT_EQ(row["rank"], i);
    EXPECT_EQ(row["rank_from"], "metadata") << "the recorder writes RANK";
    EXPECT_FALSE(row["host"].get<std::string>().empty());
    Snapshot s = load_snapshot(row["file"].get<std::string>());
    EXPECT_EQ(s.metadata["world_size"], "2");
    EXPECT_EQ(s.metadata["local_rank"], std::to_string(i));
    Replay replay(s, 0);
    EXPECT_EQ(row["peak_allocated"].get<uint64_t>(), replay.peak_allocated().bytes) << "rank " << i;
    EXPECT_NE(row["training_step"].get<std::string>(), "") << "the peak falls in a training step";
  }
  // The larger batch shows in the activations, not in the parameters both ranks hold alike.
  const nlohmann::json& category = j["divergence"]["by"]["category"]["rows"];
  ASSERT_FALSE(category.empty());
  EXPECT_EQ(category[0]["key"], "activation") << category.dump();
  EXPECT_GT(category[0]["delta"].get<int64_t>(), 0);

  // The viewer opens both side by side (its own test checks the pixels).
  if (std::system("command -v xvfb-run >/dev/null") != 0) GTEST_SKIP() << "xvfb-run is not installed";
  auto view = run_command("xvfb-run -a " + kMemrec + " view " + files + " --screenshot " + quote(dir / "ranks.png"));
  if (view.output.find("built without the viewer") != std::string::npos) GTEST_SKIP() << view.output;
  ASSERT_EQ(view.exit_code, 0) << view.output;
  nlohmann::json layout;
  std::istringstream lines(view.output);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("{")) layout = nlohmann::json::parse(line);
  ASSERT_TRUE(layout.contains("ranks")) << view.output;
  ASSERT_EQ(layout["ranks"]["lanes"].size(), 2u);
  EXPECT_EQ(layout["ranks"]["lanes"][1]["rank"], 1);
  EXPECT_GT(std::filesystem::file_size(dir / "ranks.png"), 0u);
}

// A summary moved to another host's clock: every absolute time `by` later, the host renamed.
nlohmann::json on_another_host(nlohmann::json j, int64_t by, const std::string& host) {
  j["host"] = host;
  for (const char* key : {"begin_ns", "end_ns"}) j[key] = j[key].get<int64_t>() + by;
  for (auto& step : j["steps"]) step["start_ns"] = step["start_ns"].get<int64_t>() + by;
  for (auto& c : j["collectives"])
    for (const char* key : {"start_ns", "end_ns"})
      if (c[key].get<int64_t>() >= 0) c[key] = c[key].get<int64_t>() + by;
  return j;
}

// Eight DDP ranks on gloo: `memrec record` leaves a summary in each file and beside it, `stats --by rank` reads
// those, names the rank given more work, and (their clocks moved seconds apart as on 8 hosts) aligns them again on
// the collectives they recorded, to within the uncertainty it prints.
TEST(RecordRanks, EightRanksCompareBySummariesAndAlignOnCollectives) {
  test::TempDir dir;
  auto rec = record_ranks(dir, 8, 5, 8, 41000);
  ASSERT_EQ(rec.exit_code, 0) << rec.output;
  std::string files, summaries;
  for (int r = 0; r < 8; ++r) {
    std::string f = dir / ("r.rank" + std::to_string(r) + ".memrec");
    files += " " + quote(f);
    std::ifstream in(f + ".summary.json");
    ASSERT_TRUE(in) << f << ".summary.json not written";
    nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j["rank"], r);
    ASSERT_FALSE(j["collectives"].empty()) << "DDP's all-reduces recorded as c10d:: op scopes";
    std::string moved = dir / ("moved.rank" + std::to_string(r) + ".summary.json");
    std::ofstream(moved) << on_another_host(j, r * 1'500'000'000ll, "node-" + std::to_string(r)).dump();
    summaries += " " + quote(moved);
  }
  auto r = run_command(kMemrec + " stats --by rank --json" + files);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["furthest_rank"], 5);
  EXPECT_EQ(j["read_whole"], 0);
  for (const auto& row : j["ranks"]) EXPECT_EQ(row["read_from"], "file summary");
  EXPECT_EQ(j["clock"]["aligned_on"], "shared clock");

  auto m = run_command(kMemrec + " stats --by rank --json" + summaries);
  ASSERT_EQ(m.exit_code, 0) << m.output;
  auto moved = nlohmann::json::parse(m.output);
  EXPECT_EQ(moved["furthest_rank"], 5);
  EXPECT_EQ(moved["clock"]["aligned_on"], "collectives") << moved["clock"].dump();
  ASSERT_TRUE(moved["clock"]["uncertainty_ns"].is_number()) << moved["clock"].dump();
  int64_t uncertainty = moved["clock"]["uncertainty_ns"], worst = 0;
  for (int i = 0; i < 8; ++i)
    worst = std::max(worst, std::abs(moved["ranks"][i]["peak_allocated_ns"].get<int64_t>() -
                                     j["ranks"][i]["peak_allocated_ns"].get<int64_t>()));
  EXPECT_LE(worst, uncertainty) << "aligned to within the uncertainty printed";
  // The c10d op scopes are when each rank issued the call (the collectives run asynchronously), which 8 CPU ranks
  // on 2 shared cores do hundreds of ms apart: the uncertainty says so, and stays under the 1.5 s between hosts.
  EXPECT_LT(uncertainty, 1'500'000'000) << "under the seconds the clocks were moved";
  std::printf("8 gloo ranks moved up to 10.5 s apart: aligned within %lld ns, uncertainty printed %lld ns\n",
              static_cast<long long>(worst), static_cast<long long>(uncertainty));
}

}  // namespace
}  // namespace memrec
