// `memrec whatif scale`'s JSON and text, rendered from results written by hand.
#include <gtest/gtest.h>

#include "memrec/scale_output.h"

namespace memrec {
namespace {

constexpr uint64_t MiB = 1 << 20, GiB = uint64_t{1} << 30;

ScalePrediction predicted(uint64_t size, uint64_t allocated, uint64_t reserved, bool oom) {
  return {.size = size, .peak_allocated = allocated, .peak_reserved = reserved, .oom = oom, .ooms = oom ? 1u : 0u,
          .peak_ns = 1'500'000, .step = "step 1", .phase = "backward",
          .growth = {{.key = "Attention.forward (train.py:34) via aten::bmm", .bytes = size * 2 * GiB, .recorded = 4 * GiB},
                     {.key = "h.0.attn.c_attn.weight", .bytes = 1 * MiB, .recorded = 1 * MiB}}};
}

// Two CUDA runs at batch 2 and 4, predicted at 8 and fitted in 76 GiB.
ScaleWhatif gpu() {
  ScaleWhatif w;
  w.device = 0;
  w.runs = {{"b2.memrec", 2, 10 * GiB, 5000, 4990}, {"b4.memrec", 4, 18 * GiB, 5000, 4990}};
  w.base = 1;
  w.settings = "expandable_segments:True";
  w.source = SettingsSource::recorded;
  w.memory = {.bytes = 76 * GiB, .given = false, .total = 80 * GiB, .outside = 4 * GiB};
  w.predictions = {predicted(8, 34 * GiB, 36 * GiB, false), predicted(17, 70 * GiB, 75 * GiB, false),
                   predicted(18, 74 * GiB, 77 * GiB, true)};
  w.fit = ScaleWhatif::Fit{.largest = 17, .device_memory = 76 * GiB, .margin = static_cast<int64_t>(1 * GiB)};
  w.unmatched = {{.run = 0, .reason = UnmatchedAllocations::Reason::not_in_base, .site = "train (train.py:12) via aten::empty",
                  .count = 10, .bytes = 3 * MiB},
                 {.run = 1, .reason = UnmatchedAllocations::Reason::below_zero, .at_size = 17, .site = "aten::mm",
                  .count = 2, .bytes = 1 * MiB}};
  return w;
}

TEST(ScaleOutput, JsonHasTheIssuesFieldsForEachPredictionAndTheFit) {
  nlohmann::json j = scale_whatif_json(gpu());
  ASSERT_EQ(j["predictions"].size(), 3u);
  nlohmann::json p = j["predictions"][0];
  EXPECT_EQ(p["size"], 8);
  EXPECT_EQ(p["peak_allocated"], 34 * GiB);
  EXPECT_EQ(p["peak_reserved"], 36 * GiB);
  EXPECT_EQ(p["oom"], false);
  EXPECT_EQ(p["step"], "step 1");
  EXPECT_EQ(p["phase"], "backward");
  EXPECT_EQ(p["peak_ns"], 1'500'000);
  EXPECT_EQ(p["growth"][0], (nlohmann::json{{"key", "Attention.forward (train.py:34) via aten::bmm"},
                                            {"bytes", 16 * GiB}, {"recorded", 4 * GiB}, {"growth", 12 * GiB}}));
  EXPECT_EQ(j["predictions"][2]["oom"], true);
  EXPECT_EQ(j["fit"], (nlohmann::json{{"largest", 17}, {"device_memory", 76 * GiB}, {"margin", 1 * GiB}}));
  EXPECT_EQ(j["device_memory"]["bytes"], 76 * GiB);
  EXPECT_EQ(j["device_memory"]["total"], 80 * GiB);
  EXPECT_EQ(j["device_memory"]["outside_allocator"], 4 * GiB);
  EXPECT_EQ(j["settings"], "expandable_segments:True");
  EXPECT_EQ(j["settings_source"], "recorded");
  EXPECT_EQ(j["runs"][1], (nlohmann::json{{"file", "b4.memrec"}, {"size", 4}, {"peak_allocated", 18 * GiB},
                                          {"allocations", 5000}, {"matched", 4990}, {"base", true}}));
  EXPECT_EQ(j["unmatched"][0], (nlohmann::json{{"run", "b2.memrec"}, {"size", 2}, {"reason", "not_in_base"},
                                               {"site", "train (train.py:12) via aten::empty"}, {"count", 10},
                                               {"bytes", 3 * MiB}}));
  EXPECT_EQ(j["unmatched"][1]["reason"], "below_zero");
  EXPECT_EQ(j["unmatched"][1]["at_size"], 17);
}

TEST(ScaleOutput, UnknownsAreNullInJson) {
  ScaleWhatif w = gpu();
  w.memory = {};
  w.fit.reset();
  w.predictions[0].peak_reserved.reset();
  w.predictions[0].oom.reset();
  w.settings.reset();
  w.notes = {ScaleNote::cpu, ScaleNote::memory_unknown};
  nlohmann::json j = scale_whatif_json(w);
  EXPECT_TRUE(j["settings"].is_null());
  EXPECT_TRUE(j["settings_source"].is_null());
  EXPECT_TRUE(j["fit"].is_null());
  EXPECT_TRUE(j["predictions"][0]["peak_reserved"].is_null());
  EXPECT_TRUE(j["predictions"][0]["oom"].is_null());
  EXPECT_TRUE(j["device_memory"]["bytes"].is_null());
  EXPECT_TRUE(j["device_memory"]["total"].is_null());
  ASSERT_EQ(j["notes"].size(), 2u);
  EXPECT_NE(j["notes"][1].get<std::string>().find("--device-memory"), std::string::npos);
}

TEST(ScaleOutput, TextShowsTheRunsThePredictionsTheFitWhatGrowsAndTheUnmatched) {
  EXPECT_EQ(scale_whatif_text(gpu()),
            "device 0: 2 runs matched by scope, site and order; predictions rewrite b4.memrec (size 4)\n"
            "      size  peak allocated  allocations   matched  run\n"
            "         2       10.00 GiB         5000     99.8%  b2.memrec\n"
            "         4       18.00 GiB         5000     99.8%  b4.memrec\n"
            "\n"
            "predicted (allocator settings expandable_segments:True); device memory 76.00 GiB (the recording's device "
            "total less 4.00 GiB outside the allocator):\n"
            "      size  peak allocated  peak reserved  fits  allocated peak in\n"
            "         8       34.00 GiB      36.00 GiB   yes  step 1, backward at +1.5 ms\n"
            "        17       70.00 GiB      75.00 GiB   yes  step 1, backward at +1.5 ms\n"
            "        18       74.00 GiB      77.00 GiB   OOM  step 1, backward at +1.5 ms\n"
            "\n"
            "largest size that fits: 17 (1.00 GiB to spare of 76.00 GiB)\n"
            "\n"
            "what grows most, live at each predicted peak (bytes, and change from b4.memrec):\n"
            "  size 8:\n"
            "     16.00 GiB   +12.00 GiB  Attention.forward (train.py:34) via aten::bmm\n"
            "      1.00 MiB         +0 B  h.0.attn.c_attn.weight\n"
            "  size 17:\n"
            "     34.00 GiB   +30.00 GiB  Attention.forward (train.py:34) via aten::bmm\n"
            "      1.00 MiB         +0 B  h.0.attn.c_attn.weight\n"
            "  size 18:\n"
            "     36.00 GiB   +32.00 GiB  Attention.forward (train.py:34) via aten::bmm\n"
            "      1.00 MiB         +0 B  h.0.attn.c_attn.weight\n"
            "\n"
            "allocations not matched across the runs (2 groups):\n"
            "     count        bytes  run        site\n"
            "        10     3.00 MiB  b2.memrec  train (train.py:12) via aten::empty (not in b4.memrec: left out)\n"
            "         2     1.00 MiB  b4.memrec  aten::mm (fit below zero from size 17: taken as 0)\n");
}

TEST(ScaleOutput, TextOfACpuRunSaysWhatIsNotKnown) {
  ScaleWhatif w = gpu();
  w.memory = {};
  w.fit.reset();
  w.unmatched.clear();
  w.predictions.resize(1);
  w.predictions[0].peak_reserved.reset();
  w.predictions[0].oom.reset();
  w.settings.reset();
  w.notes = {ScaleNote::cpu, ScaleNote::memory_unknown};
  std::string text = scale_whatif_text(w);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "note: a CPU run: libtorch's CPU allocator keeps no cache, so there is no reserved peak to predict");
  EXPECT_NE(text.find("\npredicted; device memory unknown:\n"), std::string::npos) << text;
  EXPECT_NE(text.find("         8       34.00 GiB              -     ?  step 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("largest size that fits"), std::string::npos) << text;
}

}  // namespace
}  // namespace memrec
