// memrec whatif scale on fresh recordings of examples/train.py (the CPU in CI; the GPU where torch has CUDA), so
// that the matching by scope, site and order holds for what the recorder writes today, not only for the files in
// tests/data: batch 2 and 4 predict batch 8's peak allocated within 5% of a recorded batch 8 run.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;
using test::run_command;

json memrec_json(const std::string& args) {
  auto r = run_command(quote(MEMREC_BINARY) + " " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output);
}

std::string record_batch(const test::TempDir& dir, int batch) {
  std::string file = dir / fmt::format("b{}.memrec", batch);
  auto r = run_command(quote(MEMREC_BINARY) + " record -o " + quote(file) + " -- " + MEMREC_TEST_PYTHON + " " +
                       quote(test::source("examples/train.py")) +
                       fmt::format(" --layers 1 --d-model 32 --heads 2 --vocab 256 --steps 2 --batch {}", batch));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return quote(file);
}

TEST(Scale, FreshRunsAtBatchTwoAndFourPredictBatchEightWithin5Percent) {
  test::TempDir dir;
  std::string b2 = record_batch(dir, 2), b4 = record_batch(dir, 4), b8 = record_batch(dir, 8);
  json j = memrec_json("whatif scale " + b2 + " " + b4 + " --sizes 2,4 --predict 8");
  json measured = memrec_json("stats " + b8)["peak_allocated"]["bytes"];
  double predicted = j["predictions"][0]["peak_allocated"];
  fmt::print("batch 8: predicted {} measured {}\n", predicted, measured.dump());
  EXPECT_LT(std::abs(predicted - measured.get<double>()) / measured.get<double>(), 0.05) << j.dump(2);
  for (const json& run : j["runs"])
    EXPECT_GE(run["matched"].get<double>(), 0.95 * run["allocations"].get<double>()) << run;
}

}  // namespace
}  // namespace memrec
