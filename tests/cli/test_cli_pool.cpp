// memrec stats / diff --by pool on a real PyTorch 2.11 snapshot with a CUDA graph, checked against the pools of
// the pickle's own segments, read by Python (tests/scripts/pool_bytes.py).
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

const std::string kGraph = test::data("torch_compile_graph.pickle");

nlohmann::json memrec_json(const std::string& args) {
  auto r = run_command(quote(MEMREC_BINARY) + " " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

std::map<std::string, uint64_t> bytes_by_key(const nlohmann::json& rows) {
  std::map<std::string, uint64_t> out;
  for (const auto& row : rows) out[row["key"]] = row["bytes"];
  return out;
}

TEST(CliPool, StatsAtTheEndSplitsTheLiveBytesByTheSegmentsPools) {
  auto py = run_command("python3 " + quote(test::source("tests/scripts/pool_bytes.py")) + " " +
                        quote(kGraph));
  ASSERT_EQ(py.exit_code, 0) << py.output;
  auto want = nlohmann::json::parse(py.output).get<std::map<std::string, uint64_t>>();
  ASSERT_GT(want["pool (1, 0)"], 0u);
  // A time past the end shows the last event: the state the pickle's segments describe.
  auto j = memrec_json("stats " + quote(kGraph) + " --by pool --at 1000s --top 100");
  EXPECT_EQ(j["by"], "pool");
  EXPECT_EQ(bytes_by_key(j["live"]), want);
}

TEST(CliPool, DiffGroupsEachPeakByPoolAsStatsDoes) {
  auto stats = bytes_by_key(memrec_json("stats " + quote(kGraph) + " --by pool --top 100")["live"]);
  ASSERT_TRUE(stats.contains("pool (1, 0)")) << "the graph's pool holds memory at the peak";
  auto j = memrec_json("diff " + quote(kGraph) + " " + quote(kGraph) + " --by pool");
  EXPECT_EQ(j["by"], "pool");
  std::map<std::string, uint64_t> a;
  for (const auto& row : j["rows"]) a[row["key"]] = row["a_bytes"];
  EXPECT_EQ(a, stats);
}

}  // namespace
}  // namespace memrec
