// memrec advise on real programs recorded with `memrec record` (Debian's torch 1.13 on the CPU in CI), each built so
// that one lever dominates: deep activations (checkpointing), a list that keeps a tensor every step (growth), and
// zero_grad() without set_to_none (gradients held through forward). Each ranks its lever first, with the saving the
// engine's own command gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/advise_programs.h"
#include "common/process.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;
using test::run_command;
using test::TempDir;
using namespace test::advise_programs;

const std::string kMemrec = MEMREC_BINARY;
const std::string kPython = MEMREC_TEST_PYTHON;

std::string record(const TempDir& dir, const std::string& name, const std::string& program) {
  std::ofstream(dir / (name + ".py")) << program;
  std::string file = dir / (name + ".memrec");
  auto r = run_command(kMemrec + " record -o " + file + " -- " + kPython + " " + dir / (name + ".py"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return file;
}

json json_of(const std::string& args) {
  auto r = run_command(kMemrec + " " + args + " --json 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json::object();
}

TEST(Advise, DeepActivationsRankCheckpointingFirstWithWhatifCheckpointsSaving) {
  TempDir dir;
  std::string file = quote(record(dir, "deep", kDeep));
  json j = json_of("advise " + file);
  ASSERT_FALSE(j["advice"].empty()) << j.dump(1);
  const json& top = j["advice"][0];
  EXPECT_EQ(top["kind"], "checkpoint") << j.dump(1);
  // Every layer but the root, which holds them: wrapping it would recompute them all.
  json known = json_of("whatif checkpoint " + file)["layers"];
  EXPECT_NE(std::find(known.begin(), known.end(), "Net"), known.end()) << known;
  // Nor the last layer: its backward runs first, right after its forward, so checkpointing it saves nothing.
  json last = json_of("whatif checkpoint " + file + " --layers layers.11");
  EXPECT_EQ(last["predicted_peak"], last["recorded_peak"]);
  EXPECT_NE(top["change"].get<std::string>().find("; not layers.11, which saves nothing"), std::string::npos)
      << top["change"];
  json whatif = json_of("whatif checkpoint " + file + " --layers layers.0,layers.1,layers.2,layers.3,layers.4,"
                        "layers.5,layers.6,layers.7,layers.8,layers.9,layers.10");
  EXPECT_EQ(top["layers"], whatif["layers"]);
  EXPECT_EQ(top["layers"].size(), 11u);
  EXPECT_EQ(top["saves"]["allocated"].get<int64_t>(),
            whatif["recorded_peak"].get<int64_t>() - whatif["predicted_peak"].get<int64_t>());
  EXPECT_GT(top["saves"]["allocated"].get<int64_t>(), 16 << 20) << "most of 24 MiB of activations";
  EXPECT_EQ(j["peak"]["allocated"], whatif["recorded_peak"]);
}

TEST(Advise, AGrowingListRanksGrowthFirstWithGrowthsBytes) {
  TempDir dir;
  std::string file = quote(record(dir, "growing", kGrowing));
  json j = json_of("advise " + file);
  ASSERT_FALSE(j["advice"].empty()) << j.dump(1);
  const json& top = j["advice"][0];
  EXPECT_EQ(top["kind"], "growth") << j.dump(1);
  EXPECT_EQ(top["method"], "counted");
  json growth = json_of("growth " + file);
  ASSERT_EQ(growth["verdict"], "grows") << growth.dump(1);
  const json& group = growth["growing"][0];
  EXPECT_NE(top["change"].get<std::string>().find(group["site"].get<std::string>()), std::string::npos)
      << top["change"] << " names " << group["site"];
  auto per_step = static_cast<int64_t>(std::llround(group["bytes_per_step"].get<double>()));
  EXPECT_EQ(per_step, 2048 * 256 * 4);
  EXPECT_EQ(top["evidence"][0]["bytes"], per_step);
  EXPECT_EQ(top["evidence"][1]["bytes"], group["live_at_end"]);
  // At the peak (the last step's backward) the list holds every copy but the one that step keeps after it.
  EXPECT_EQ(top["saves"]["allocated"].get<int64_t>(), group["live_at_end"].get<int64_t>() - per_step);
}

TEST(Advise, ZeroGradWithoutSetToNoneRanksTheHeldGradientsFirst) {
  TempDir dir;
  std::string file = quote(record(dir, "zero_grad", kZeroGrad));
  json j = json_of("advise " + file);
  ASSERT_FALSE(j["advice"].empty()) << j.dump(1);
  const json& top = j["advice"][0];
  EXPECT_EQ(top["kind"], "grads_outside_backward") << j.dump(1);
  EXPECT_EQ(top["method"], "counted");
  EXPECT_NE(top["change"].get<std::string>().find("torch.optim.SGD.zero_grad(set_to_none=True) (torch 1."),
            std::string::npos)
      << top["change"];
  // The three weights' and biases' gradients, as their owners name them.
  int64_t grads = 3 * (1024 * 1024 + 1024) * 4;
  EXPECT_EQ(top["saves"]["allocated"].get<int64_t>(), grads);
  ASSERT_GE(top["evidence"].size(), 3u);
  for (int i = 0; i < 3; ++i) {  // the weights' first, largest first
    EXPECT_TRUE(top["evidence"][i]["what"].get<std::string>().ends_with(".weight.grad")) << top["evidence"][i];
    EXPECT_EQ(top["evidence"][i]["bytes"], 1024 * 1024 * 4);
  }
  EXPECT_EQ(top["peak_after"]["allocated"].get<int64_t>(), j["peak"]["allocated"].get<int64_t>() - grads);
}

TEST(Advise, GradientsMadeInThePeaksOwnBackwardAreNotHeldOutsideIt) {
  TempDir dir;
  std::string file = quote(record(dir, "nested_backward", kNestedBackward));
  json j = json_of("advise " + file);
  for (const json& a : j["advice"]) EXPECT_NE(a["kind"], "grads_outside_backward") << a.dump(1);
}

}  // namespace
}  // namespace memrec
