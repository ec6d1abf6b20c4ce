// `memrec growth` on real Python training loops recorded with `memrec record` (growth_programs.py): the ones that
// grow are named by the line that allocates what they keep, at the bytes a step they keep; the ones that only warm up
// are steady.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/units.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kProgram = test::source("tests/python/growth_programs.py");
constexpr uint64_t kSteps = 16, kBatch = 256, kWidth = 512;
// What each growing pattern keeps a step: one float32 tensor of batch x width.
constexpr double kKept = kBatch * kWidth * 4;

uint32_t line_of(const std::string& marker) { return test::line_holding(kProgram, marker); }

// The program recorded into `file`.
void record(const std::string& pattern, const std::string& file) {
  auto rec = run_command(quote(MEMREC_BINARY) + " record -o " + quote(file) + " -- " + MEMREC_TEST_PYTHON + " " +
                         quote(kProgram) + " " + pattern + " --steps " + std::to_string(kSteps) + " --batch " +
                         std::to_string(kBatch) + " --width " + std::to_string(kWidth));
  EXPECT_EQ(rec.exit_code, 0) << rec.output;
}

// The program recorded, then `memrec growth --json` on it (with `flags`).
json growth_of(const std::string& pattern, const std::string& flags = "") {
  TempDir dir;
  std::string file = dir / (pattern + ".memrec");
  record(pattern, file);
  auto r = test::memrec("growth --json " + quote(file) + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output, nullptr, false);
}

// The bytes a step of the growing groups whose site is the program's line `line`.
double bytes_per_step_at(const json& g, uint32_t line) {
  double sum = 0;
  std::string at = "growth_programs.py:" + std::to_string(line) + ")";
  for (const json& group : g["growing"])
    if (group["site"].get<std::string>().find(at) != std::string::npos) sum += group["bytes_per_step"].get<double>();
  return sum;
}

void expect_grows_at(const std::string& pattern) {
  json g = growth_of(pattern);
  ASSERT_FALSE(g.is_discarded());
  EXPECT_EQ(g["verdict"], "grows") << g.dump(1);
  EXPECT_EQ(g["steps"].size(), kSteps + 1) << "a step per optimizer step, and the one after the last";
  uint32_t line = line_of("# grows: " + pattern);
  EXPECT_NEAR(bytes_per_step_at(g, line), kKept, kKept * 0.05) << g.dump(1);
  ASSERT_FALSE(g["growing"].empty());
  const json& top = g["growing"][0];
  EXPECT_FALSE(top["stack"].empty()) << top.dump(1);
  EXPECT_NEAR(top["blocks_per_step"].get<double>(), 1.0, 0.05) << "one tensor kept a step: " << top.dump(1);
  EXPECT_GE(g["per_step"]["allocated"].get<double>(), kKept * 0.95) << g.dump(1);
}

TEST(Growth, AListOfTensorsIsNamedByTheLineThatAppends) {
  expect_grows_at("list");
}

TEST(Growth, AMetricKeptWithItsGraphIsNamedByTheLineWhoseOutputTheGraphSaves) {
  expect_grows_at("loss");
}

TEST(Growth, ADictCacheWithoutEvictionIsNamedByItsLine) {
  expect_grows_at("dict");
}

TEST(Growth, AConcatenatedBufferGrowsByWhatEachStepAdds) {
  json g = growth_of("cat");
  EXPECT_EQ(g["verdict"], "grows") << g.dump(1);
  EXPECT_NEAR(bytes_per_step_at(g, line_of("# grows: cat")), kKept, kKept * 0.05) << g.dump(1);
  // one buffer live at a time: at the last step's start it holds every step's rows but the last step's own (each
  // step opens at the optimizer step, before the loop adds its rows)
  for (const json& group : g["growing"])
    if (group["site"].get<std::string>().find(":" + std::to_string(line_of("# grows: cat")) + ")") != std::string::npos)
      EXPECT_NEAR(group["live_at_end"].get<double>(), kKept * (kSteps - 1), kKept * 0.05) << group.dump(1);
}

// PyTorch's own snapshots have no step scopes: the same run exported to a pickle without its step and phase
// annotations has its steps inferred from the frames' phases, one a forward after an optimizer step.
TEST(Growth, APickleWithoutStepsHasThemInferredFromItsPhases) {
  TempDir dir;
  record("list", dir / "list.memrec");
  auto exported = test::memrec("export " + quote(dir / "list.memrec") + " -o " + quote(dir / "list.pickle"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  auto strip = run_command(std::string(MEMREC_TEST_PYTHON) + " -c " + quote(
      "import pickle, sys; d = pickle.load(open(sys.argv[1], \"rb\")); "
      "d[\"external_annotations\"] = [a for a in d[\"external_annotations\"] "
      "if a.get(\"memrec_kind\") not in (\"step\", \"phase\")]; "
      "pickle.dump(d, open(sys.argv[2], \"wb\"), protocol=4)") + " " + quote(dir / "list.pickle") + " " + quote(dir / "bare.pickle"));
  ASSERT_EQ(strip.exit_code, 0) << strip.output;
  auto r = test::memrec("growth --json " + quote(dir / "bare.pickle"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json g = json::parse(r.output);
  EXPECT_TRUE(g["inferred_steps"].get<bool>()) << g.dump(1);
  EXPECT_EQ(g["steps"].size(), kSteps) << "one forward after each optimizer step, the first after none";
  EXPECT_EQ(g["verdict"], "grows") << g.dump(1);
  EXPECT_NEAR(bytes_per_step_at(g, line_of("# grows: list")), kKept, kKept * 0.05) << g.dump(1);
}

TEST(Growth, TheProjectionFillsTheGivenMemoryAtTheSlope) {
  constexpr uint64_t kMemory = 64ull << 20;
  json g = growth_of("list", "--device-memory " + std::to_string(kMemory));
  ASSERT_EQ(g["verdict"], "grows") << g.dump(1);
  ASSERT_TRUE(g["projected_full_step"].is_number()) << g.dump(1);
  // From the last step's start, the memory left over what the program keeps a step, less the step's own temporaries
  // (the model's few activations and gradients, each at most a batch x width tensor): full no later than that, and
  // not more than 8 such tensors earlier.
  const json& last = g["steps"].back();
  double left = double(kMemory - last["allocated"].get<uint64_t>()) / kKept;
  double latest = last["step"].get<double>() + left + 1;
  EXPECT_LE(g["projected_full_step"].get<double>(), latest) << g.dump(1);
  EXPECT_GE(g["projected_full_step"].get<double>(), latest - 8) << g.dump(1);
  EXPECT_GT(g["projected_full_in_s"].get<double>(), 0);
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Growth, TheReportAndTheNotebookSummaryNameTheGrowingLine) {
  TempDir dir;
  record("dict", dir / "dict.memrec");
  std::string line = "growth_programs.py:" + std::to_string(line_of("# grows: dict")) + ")";
  auto page = test::memrec("report " + quote(dir / "dict.memrec") + " -o " + quote(dir / "r.html") + " --no-screenshot");
  ASSERT_EQ(page.exit_code, 0) << page.output;
  std::string html = read(dir / "r.html");
  size_t section = html.find("<h2>Growth across steps</h2>");
  ASSERT_NE(section, std::string::npos);
  EXPECT_NE(html.find(line, section), std::string::npos) << html.substr(section, 3000);
  EXPECT_NE(html.find("<polyline", section), std::string::npos);
  auto summary = test::memrec("report " + quote(dir / "dict.memrec") + " -o " + quote(dir / "s.html") + " --format summary");
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  std::string fragment = read(dir / "s.html");
  EXPECT_NE(fragment.find("Grows <b>+" + format_bytes(uint64_t(kKept)) + " a step"), std::string::npos) << fragment.substr(0, 2000);
  EXPECT_NE(fragment.find(line), std::string::npos) << fragment.substr(0, 2000);
}

void expect_steady(const std::string& pattern) {
  json g = growth_of(pattern);
  ASSERT_FALSE(g.is_discarded());
  EXPECT_EQ(g["verdict"], "steady") << g.dump(1);
  EXPECT_TRUE(g["growing"].empty()) << g.dump(1);
  EXPECT_TRUE(g["projected_full_step"].is_null());
}

TEST(Growth, AdamsStateIsAWarmUp) {
  json g = growth_of("adam");
  EXPECT_EQ(g["verdict"], "steady") << g.dump(1);
  EXPECT_TRUE(g["growing"].empty()) << g.dump(1);
  // Adam's two state tensors per parameter appear in the first optimizer step, not after
  EXPECT_GE(g["settled_from"].get<int>(), 1) << g.dump(1);
  const json& steps = g["steps"];
  double params = 2.0 * (kWidth * kWidth + kWidth) * 4;
  EXPECT_NEAR(steps.back()["allocated"].get<double>() - steps[1]["allocated"].get<double>(), 0, kKept * 0.05);
  EXPECT_GE(steps[1]["allocated"].get<double>() - steps[0]["allocated"].get<double>(), 2 * params);
}

TEST(Growth, ABoundedCacheIsAWarmUp) {
  json g = growth_of("bounded");
  EXPECT_EQ(g["verdict"], "steady") << g.dump(1);
  EXPECT_TRUE(g["growing"].empty()) << g.dump(1);
  EXPECT_GE(g["settled_from"].get<int>(), 4) << "the cache fills over the first steps: " << g.dump(1);
}

TEST(Growth, GradientAccumulationIsSteady) { expect_steady("accum"); }

TEST(Growth, AnEvaluationEveryFourStepsIsSteady) { expect_steady("eval"); }

}  // namespace
}  // namespace memrec
