// Activation checkpointing in the C++ workload on Debian's libtorch (CPU): it changes no gradient, and
// `memrec whatif checkpoint` on a plain run predicts the peaks measured with --checkpoint within 5%.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/workloads.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

workloads::Workload::Gradients gradients_with(std::vector<int> checkpoint) {
  workloads::Config c = workloads::cpu_defaults({});
  c.layers = 3;
  c.checkpoint = std::move(checkpoint);
  return workloads::Workload::create(c)->gradients();  // seeded: the same weights, input and dropout draws
}

TEST(Checkpoint, LossAndGradientsEqualAPlainRun) {
  auto plain = gradients_with({});
  double total = 0;
  for (double n : plain.norms) total += n;
  ASSERT_GT(total, 0);
  for (const auto& layers : {std::vector<int>{0, 1, 2}, std::vector<int>{1}}) {
    auto ckpt = gradients_with(layers);
    SCOPED_TRACE(fmt::format("--checkpoint {}", fmt::join(layers, ",")));
    EXPECT_NEAR(ckpt.loss, plain.loss, 1e-6 * std::abs(plain.loss));
    ASSERT_EQ(ckpt.norms.size(), plain.norms.size());
    for (size_t i = 0; i < plain.norms.size(); ++i)  // dropout recomputed with other masks would be far off
      EXPECT_NEAR(ckpt.norms[i], plain.norms[i], 1e-4 * plain.norms[i] + 1e-9) << "parameter " << i;
  }
}

nlohmann::json memrec_json(const std::string& args) {
  auto r = run_command(quote(MEMREC_BINARY) + " " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

// 4 layers with seq 256 x batch 8 tokens: activations (about 70 MiB a layer) dominate parameters and Adam's
// state (50 MiB), so checkpointing moves the peak a lot. Two steps: the second has Adam's state and gradients.
uint64_t measured_peak(const test::TempDir& dir, const std::string& checkpoint, std::string& file) {
  file = dir / ("ckpt-" + (checkpoint.empty() ? std::string("none") : checkpoint) + ".memrec");
  auto r = run_command(quote(MEMREC_BINARY) + " run transformer --device cpu --layers 4 --seq 256 --batch 8 " +
                       "--warmup 1 --steps 1 --stacks off -o " + quote(file) +
                       (checkpoint.empty() ? "" : " --checkpoint " + checkpoint));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return memrec_json("stats " + quote(file))["peak_allocated"]["bytes"];
}

TEST(Checkpoint, WhatIfPredictsTheMeasuredPeakWithin5Percent) {
  test::TempDir dir;
  std::string plain;
  uint64_t plain_peak = measured_peak(dir, "", plain);
  fmt::print("{:<12} {:>14} {:>14} {:>8}\n", "--checkpoint", "predicted MiB", "measured MiB", "error");
  fmt::print("{:<12} {:>14} {:>14.2f}\n", "(none)", "", plain_peak / 1048576.0);
  for (const char* layers : {"all", "0,1", "1,3", "2"}) {
    std::string file;
    uint64_t measured = measured_peak(dir, layers, file);
    uint64_t predicted = memrec_json("whatif checkpoint " + quote(plain) + " --layers " + layers)["predicted_peak"];
    double error = (static_cast<double>(predicted) - measured) / measured;
    fmt::print("{:<12} {:>14.2f} {:>14.2f} {:>7.1f}%\n", layers, predicted / 1048576.0, measured / 1048576.0,
               100 * error);
    EXPECT_LT(measured, plain_peak) << layers;
    EXPECT_LT(std::abs(error), 0.05) << layers << ": predicted " << predicted << ", measured " << measured;
  }
}

TEST(Checkpoint, BadLayerListsAreOneError) {
  for (const char* spec : {"4", "0,,1", "x", "-1", "1,"}) {
    auto r = run_command(quote(MEMREC_BINARY) + " run transformer --device cpu --layers 4 --checkpoint " + quote(spec));
    EXPECT_NE(r.exit_code, 0) << spec;
    EXPECT_NE(r.output.find(fmt::format("--checkpoint '{}'", spec)), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("parameters:"), std::string::npos) << "built the model anyway: " << r.output;
  }
}

}  // namespace
}  // namespace memrec
