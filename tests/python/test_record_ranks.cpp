// Two DDP ranks of the Python example on gloo, started the way torchrun starts them (Debian's torchrun 1.13 fails
// on Python 3.11), rank 1 given a larger batch, recorded by one `memrec record`: `stats --by rank` finds rank 1,
// each rank's peak is its own replay's, and the viewer opens both files side by side.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
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

// Runs the two ranks under `memrec record -o DIR/r.memrec`, rank 1 with `rank1_batch`.
test::CommandResult record_two_ranks(const test::TempDir& dir, int rank1_batch) {
  std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(21000 + getpid() % 20000);
  std::string rank = std::string(MEMREC_TEST_PYTHON) + " " + kTrain + " --steps 2 --layers 1 --device cpu --batch 2 " +
                     "--rank-batch 1=" + std::to_string(rank1_batch);
  std::string script = "RANK=0 LOCAL_RANK=0 " + env + " " + rank + " & a=$!; RANK=1 LOCAL_RANK=1 " + env + " " +
                       rank + " & b=$!; wait $a && wait $b";
  return run_command(kMemrec + " record -o " + dir / "r.memrec" + " -- /bin/bash -c " + quote(script));
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

}  // namespace
}  // namespace memrec
