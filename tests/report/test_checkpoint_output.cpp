// `memrec whatif checkpoint`'s JSON and text, rendered from predictions written by hand.
#include <gtest/gtest.h>

#include "memrec/checkpoint_output.h"

namespace memrec {
namespace {

constexpr uint64_t MiB = 1 << 20;

CheckpointPrediction two_layers() {
  CheckpointPrediction p;
  p.device = 1;
  p.recorded_peak = 3 * MiB;
  p.predicted_peak = 2 * MiB;
  p.predicted_peak_ns = 1'500'000;
  p.layers = {"layers.2", "layers.0"};
  p.blocks_dropped = 7;
  p.saving = 1 * MiB;
  p.saving_percent = 100.0 / 3;
  return p;
}

TEST(CheckpointOutput, JsonHoldsEachFactUnderItsName) {
  nlohmann::json want = {{"device", 1}, {"warnings", {"run.memrec was cut short"}}, {"recorded_peak", 3 * MiB},
                         {"predicted_peak", 2 * MiB}, {"predicted_peak_ns", 1'500'000},
                         {"layers", {"layers.2", "layers.0"}}, {"blocks_dropped", 7}};
  EXPECT_EQ(checkpoint_json(two_layers(), {"run.memrec was cut short"}), want);
  EXPECT_EQ(checkpoint_json(two_layers(), {})["warnings"], nlohmann::json::array());
}

TEST(CheckpointOutput, TextNamesTheLayersInTheirOrderThenThePeaksAndTheSaving) {
  EXPECT_EQ(checkpoint_text(two_layers()),
            "checkpointing 2 layers (layers.2, layers.0), 7 activation blocks freed after forward and recomputed:\n"
            "  recorded peak allocated       3.00 MiB\n"
            "  predicted peak allocated      2.00 MiB  at +1.5 ms\n"
            "  saving                        1.00 MiB  (33.3%)\n");
}

TEST(CheckpointOutput, OneLayerIsALayer) {
  CheckpointPrediction p = two_layers();
  p.layers = {"layers.1"};
  std::string text = checkpoint_text(p);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "checkpointing 1 layer (layers.1), 7 activation blocks freed after forward and recomputed:");
}

}  // namespace
}  // namespace memrec
