// memrec whatif scale on the CPU recordings of examples/train.py at batch 2, 4, 8 and sequence 32, 64, 128, 256
// (tests/data/scale_*.memrec, tests/scripts/scale_fixtures.sh): the JSON, --fit, and one sentence for each
// bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::memrec;
using test::quote;

std::string file(const std::string& name) { return quote(test::data(name)); }

const std::string kBatches = file("scale_batch2.memrec") + " " + file("scale_batch4.memrec") + " --sizes 2,4";

json json_of(const std::string& args) {
  auto r = memrec(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output);
}

uint64_t measured_peak(const std::string& name) { return json_of("stats " + file(name))["peak_allocated"]["bytes"]; }

TEST(CliWhatifScale, PredictsBatchEightFromTwoAndFour) {
  json j = json_of("whatif scale " + kBatches + " --predict 8,16");
  ASSERT_EQ(j["predictions"].size(), 2u);
  json p = j["predictions"][0];
  EXPECT_EQ(p["size"], 8);
  double measured = static_cast<double>(measured_peak("scale_batch8.memrec"));
  EXPECT_LT(std::abs(p["peak_allocated"].get<double>() - measured) / measured, 0.05) << p;
  EXPECT_TRUE(p["peak_reserved"].is_null());  // a CPU run
  EXPECT_TRUE(p["oom"].is_null());            // no device memory known
  EXPECT_GT(j["predictions"][1]["peak_allocated"], p["peak_allocated"]);
  EXPECT_TRUE(j["fit"].is_null());
  EXPECT_TRUE(j["unmatched"].is_array());
  EXPECT_EQ(j["runs"][1]["base"], true);
}

TEST(CliWhatifScale, SequenceLengthFromThreeRuns) {
  json j = json_of("whatif scale " + file("scale_seq32.memrec") + " " + file("scale_batch2.memrec") + " " +
                   file("scale_seq128.memrec") + " --sizes 32,64,128 --predict 256");
  double measured = static_cast<double>(measured_peak("scale_seq256.memrec"));
  EXPECT_LT(std::abs(j["predictions"][0]["peak_allocated"].get<double>() - measured) / measured, 0.05) << j["predictions"];
}

TEST(CliWhatifScale, FitNamesTheLargestBatchThatFitsTheGivenMemory) {
  uint64_t memory = measured_peak("scale_batch8.memrec");
  json j = json_of("whatif scale " + kBatches + " --fit --device-memory " + std::to_string(memory));
  EXPECT_EQ(j["fit"]["largest"], 8);
  EXPECT_EQ(j["fit"]["device_memory"], memory);
  EXPECT_GE(j["fit"]["margin"], 0);
  ASSERT_EQ(j["predictions"].size(), 2u);  // the largest and the one after it
  EXPECT_EQ(j["predictions"][0]["oom"], false);
  EXPECT_EQ(j["predictions"][1]["size"], 9);
  EXPECT_EQ(j["predictions"][1]["oom"], true);

  auto text = memrec("whatif scale " + kBatches + " --fit --device-memory " + std::to_string(memory));
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("largest size that fits: 8 ("), std::string::npos) << text.output;
}

// Each bad input: exit status 1 and one line that says what is wrong.
TEST(CliWhatifScale, BadInputIsOneSentence) {
  const std::pair<std::string, std::string> cases[] = {
      {kBatches.substr(0, kBatches.find(" --sizes")) + " --sizes 2 --predict 8", "--sizes gives 1 size for 2 runs"},
      {file("scale_seq32.memrec") + " " + file("scale_seq128.memrec") + " " + file("scale_batch2.memrec") +
           " --sizes 32,128,64 --predict 256",
       "--sizes must be all different and in order"},
      {file("scale_batch2.memrec") + " " + file("mlp_sequential_cpu.memrec") + " --sizes 2,4 --predict 8",
       "are not runs of one program"},
      {kBatches + " --fit", "--fit needs the device's memory"},
      {kBatches, "give the sizes to predict with --predict"},
      {kBatches + " --predict 0", "--predict: expected sizes like 2,4,8"},
      {kBatches + " --predict 8,", "--predict: expected sizes like 2,4,8"},
      {kBatches.substr(0, kBatches.find(" --sizes")) + " --sizes 2,x --predict 8", "--sizes: expected sizes"},
  };
  for (const auto& [args, says] : cases) {
    auto r = memrec("whatif scale " + args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("memrec: error: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

}  // namespace
}  // namespace memrec
