// memrec's analysis of real CPU transformer runs (Debian's libtorch) checked against the model's arithmetic:
// 2 vs 4 layers, d_model 256, ff 1024, fp32, Adam.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "common/process.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

constexpr uint64_t kDModel = 256, kFf = 1024;
// TransformerEncoderLayer: in_proj (3d^2+3d), out_proj (d^2+d), linear1 (d*ff+ff), linear2 (ff*d+d), 2 LayerNorms (4d).
constexpr uint64_t kParamsPerLayer =
    3 * kDModel * kDModel + 3 * kDModel + kDModel * kDModel + kDModel + 2 * kDModel * kFf + kFf + kDModel + 4 * kDModel;

class RecordedRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    for (int layers : {2, 4}) {
      std::string file = (*dir_) / ("l" + std::to_string(layers) + ".memrec");
      auto r = run_command(quote(MEMREC_BINARY) + " run transformer --device cpu --steps 2 --d-model 256 --ff 1024 " +
                           "--layers " + std::to_string(layers) + " -o " + quote(file));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      files_[layers] = file;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static nlohmann::json json(const std::string& args) {
    auto r = run_command(quote(MEMREC_BINARY) + " " + args + " --json --top 1000");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  }
  static std::map<std::string, nlohmann::json> rows(const nlohmann::json& stats) {
    std::map<std::string, nlohmann::json> out;
    for (const auto& row : stats["live"]) out[row["key"]] = row;
    return out;
  }
  static uint64_t category(const nlohmann::json& row, const char* name) {
    return row["categories"].value(name, uint64_t{0});
  }

  static inline test::TempDir* dir_ = nullptr;
  static inline std::map<int, std::string> files_;
};

TEST_F(RecordedRuns, ActivationsAreTheLargestCategoryAtThePeak) {
  for (int layers : {2, 4}) {
    auto by_category = rows(json("stats " + quote(files_[layers]) + " --by category"));
    uint64_t activations = by_category.at("activation")["bytes"];
    for (const auto& [name, row] : by_category)
      if (name != "activation") EXPECT_GT(activations, row["bytes"].get<uint64_t>()) << name << " with " << layers;
  }
}

TEST_F(RecordedRuns, ParametersGradientsAndAdamStateMatchTheModelSize) {
  for (int layers : {2, 4}) {
    auto by_category = rows(json("stats " + quote(files_[layers]) + " --by category"));
    uint64_t weights = kParamsPerLayer * layers * sizeof(float);
    EXPECT_EQ(by_category.at("optimizer_state")["bytes"], 2 * weights) << layers;  // exp_avg, exp_avg_sq
    // libtorch 1.13's zero_grad zeroes gradients in place, so all of them are live at the backward peak; 2.x sets
    // them to None, so only those the running backward has made so far are.
    uint64_t gradients = by_category.at("gradient")["bytes"];
    EXPECT_GT(gradients, 0u) << layers;
    EXPECT_LE(gradients, weights) << layers;
#if TORCH_VERSION_MAJOR < 2
    EXPECT_EQ(gradients, weights) << layers;
#endif
    EXPECT_GE(by_category.at("parameter")["bytes"].get<uint64_t>(), weights) << layers;  // plus the input batch
  }
}

TEST_F(RecordedRuns, ActivationsGrowLinearlyWithLayers) {
  auto two = rows(json("stats " + quote(files_[2]) + " --by layer"));
  auto four = rows(json("stats " + quote(files_[4]) + " --by layer"));
  uint64_t per_layer = category(two.at("layers.0"), "activation");
  ASSERT_GT(per_layer, 0u);
  // Every layer whose backward has not begun at the peak holds the same activations, in both runs.
  for (const char* layer : {"layers.0", "layers.1", "layers.2"}) EXPECT_EQ(category(four.at(layer), "activation"), per_layer);
  // The last layer is the one being differentiated at the peak: the same in both runs.
  EXPECT_EQ(category(four.at("layers.3"), "activation"), category(two.at("layers.1"), "activation"));
  auto total = [](const auto& by_layer) {
    uint64_t sum = 0;
    for (const auto& [key, row] : by_layer) sum += category(row, "activation");
    return sum;
  };
  EXPECT_EQ(total(four) - total(two), 2 * per_layer);
}

TEST_F(RecordedRuns, DiffMatchesLayersAcrossDepths) {
  auto d = json("diff " + quote(files_[2]) + " " + quote(files_[4]) + " --by layer");
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : d["rows"]) rows[row["key"]] = row;
  EXPECT_EQ(rows.at("layers.0")["delta"], 0);
  EXPECT_EQ(rows.at("layers.2")["a_bytes"], 0);
  EXPECT_GT(rows.at("layers.2")["b_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(d["delta_peak_allocated"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace memrec
