// memrec advise on the recorded fixtures: a CPU transformer (checkpointing), the variable-length CUDA run
// (allocator settings), the batch runs (--scale-with); each saving equal to the engine's own command's to the byte,
// and one sentence for each bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
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

json json_of(const std::string& args) {
  auto r = memrec(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json::object();
}

const json* first_of(const json& advice, const std::string& kind) {
  for (const json& a : advice)
    if (a["kind"] == kind) return &a;
  return nullptr;
}

// The contract's fields, on every piece of advice.
void expect_shape(const json& j) {
  for (const char* key : {"peak", "advice", "not_assessed"}) EXPECT_TRUE(j.contains(key)) << key;
  for (const json& a : j["advice"]) {
    for (const char* key : {"kind", "change", "method", "saves", "peak_after", "cost", "evidence"})
      EXPECT_TRUE(a.contains(key)) << key << " in " << a;
    EXPECT_TRUE(a["saves"].contains("allocated") && a["saves"].contains("reserved")) << a;
    EXPECT_TRUE(a["peak_after"].contains("allocated") && a["peak_after"].contains("reserved")) << a;
    EXPECT_FALSE(a["change"].get<std::string>().empty());
  }
}

TEST(CliAdvise, CheckpointingATransformerOnTheCpuSavesWhatWhatifCheckpointSays) {
  std::string run = file("transformer_2layer_cpu.memrec");
  json j = json_of("advise " + run);
  expect_shape(j);
  json whatif = json_of("whatif checkpoint " + run);
  EXPECT_EQ(j["peak"]["allocated"], whatif["recorded_peak"]);
  EXPECT_TRUE(j["peak"]["reserved"].is_null());  // a CPU run
  ASSERT_FALSE(j["advice"].empty());
  EXPECT_EQ(j["advice"][0]["kind"], "checkpoint") << j.dump(1);
  // Every checkpointing change saves what whatif checkpoint predicts for its layers; one of them is every layer but
  // those that save nothing checkpointed: here the last layer, whose activations its backward frees before the peak.
  std::vector<std::string> saving;
  for (const json& l : whatif["layers"]) {
    json alone = json_of("whatif checkpoint " + run + " --layers " + l.get<std::string>());
    if (alone["predicted_peak"] < alone["recorded_peak"]) saving.push_back(l);
  }
  ASSERT_EQ(saving, std::vector<std::string>{"layers.0"});
  bool every = false;
  for (const json& a : j["advice"]) {
    if (a["kind"] != "checkpoint") continue;
    EXPECT_EQ(a["method"], "replayed");
    EXPECT_TRUE(a["cost"].is_null());  // no kernels traced on a CPU
    std::string layers;
    for (const json& l : a["layers"]) layers += (layers.empty() ? "" : ",") + l.get<std::string>();
    json replayed = json_of("whatif checkpoint " + run + " --layers " + layers);
    EXPECT_EQ(a["saves"]["allocated"].get<int64_t>(),
              replayed["recorded_peak"].get<int64_t>() - replayed["predicted_peak"].get<int64_t>()) << layers;
    EXPECT_EQ(a["peak_after"]["allocated"], replayed["predicted_peak"]) << layers;
    if (a["layers"] == json(saving)) {
      every = true;
      EXPECT_EQ(a["change"].get<std::string>().find("checkpoint every layer (layers.0; not layers.1, which saves "
                                                    "nothing checkpointed)"), 0u) << a["change"];
    }
  }
  EXPECT_TRUE(every) << j.dump(1);
  // Ranked by allocated bytes on a CPU, nothing that saves none.
  for (size_t i = 0; i < j["advice"].size(); ++i) {
    EXPECT_GT(j["advice"][i]["saves"]["allocated"].get<int64_t>(), 0);
    if (i > 0) EXPECT_LE(j["advice"][i]["saves"]["allocated"], j["advice"][i - 1]["saves"]["allocated"]);
  }
  bool allocator_named = false;
  for (const json& line : j["not_assessed"])
    allocator_named |= line.get<std::string>().starts_with("allocator: a CPU run");
  EXPECT_TRUE(allocator_named) << j["not_assessed"];
  auto text = memrec("advise " + run);
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_EQ(text.output.find("recorded peak: "), 0u) << text.output;
  EXPECT_NE(text.output.find("1. [checkpoint] checkpoint "), std::string::npos) << text.output;
}

TEST(CliAdvise, AllocatorSettingsSaveWhatTheSweepSays) {
  std::string run = file("alloc_default.memrec");
  json j = json_of("advise " + run);
  expect_shape(j);
  const json* a = first_of(j["advice"], "allocator");
  ASSERT_NE(a, nullptr) << j.dump(1);
  json sweep = json_of("whatif allocator " + run + " --sweep");
  EXPECT_EQ(sweep["sweep"][0]["settings"], (*a)["settings"]);  // the best of the sweep
  EXPECT_EQ((*a)["saves"]["reserved"], sweep["sweep"][0]["saving"]);
  EXPECT_NE((*a)["change"].get<std::string>().find("PYTORCH_CUDA_ALLOC_CONF=" + (*a)["settings"].get<std::string>()),
            std::string::npos);
  // Settings move no tensor: the allocated peak stays the recorded one.
  EXPECT_EQ((*a)["saves"]["allocated"], 0);
  EXPECT_EQ((*a)["peak_after"]["allocated"], j["peak"]["allocated"]);
  // On CUDA the ranking is by reserved bytes.
  for (size_t i = 1; i < j["advice"].size(); ++i) {
    const json &x = j["advice"][i - 1], &y = j["advice"][i];
    if (x["kind"] == "combined" || y["kind"] == "combined" || y["kind"] == "batch") break;
    auto key = [](const json& v) { return v["saves"]["reserved"].is_null() ? v["saves"]["allocated"] : v["saves"]["reserved"]; };
    EXPECT_GE(key(x).get<int64_t>(), key(y).get<int64_t>());
  }
}

TEST(CliAdvise, ScaleWithNamesTheLargestBatchThatFits) {
  std::string memory =
      std::to_string(json_of("stats " + file("scale_batch8.memrec"))["peak_allocated"]["bytes"].get<uint64_t>());
  json j = json_of("advise " + file("scale_batch4.memrec") + " --scale-with " + file("scale_batch2.memrec") +
                   " --sizes 4,2 --device-memory " + memory);
  const json* batch = first_of(j["advice"], "batch");
  ASSERT_NE(batch, nullptr) << j.dump(1);
  EXPECT_EQ((*batch)["method"], "scaled");
  json fit = json_of("whatif scale " + file("scale_batch2.memrec") + " " + file("scale_batch4.memrec") +
                     " --sizes 2,4 --fit --device-memory " + memory);
  EXPECT_NE((*batch)["change"].get<std::string>().find("size " + std::to_string(fit["fit"]["largest"].get<int>()) +
                                                       " is the largest"),
            std::string::npos)
      << (*batch)["change"];
  EXPECT_EQ((*batch)["peak_after"]["allocated"], fit["predictions"][0]["peak_allocated"]);
}

TEST(CliAdvise, BadInputIsOneSentence) {
  test::TempDir dir;
  std::string junk = dir / "junk.memrec";
  std::ofstream(junk) << "not a recording";
  std::string run = file("transformer_2layer_cpu.memrec");
  for (const std::string& args : {"advise " + quote(junk), "advise " + run + " --sizes 4,2",
                                  "advise " + run + " --scale-with " + file("scale_batch2.memrec") + " --sizes 4",
                                  "advise " + run + " --device-memory lots"}) {
    auto r = memrec(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("memrec: error: "), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace memrec
