#include "memrec/checkpoint_output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/units.h"

namespace memrec {

nlohmann::json checkpoint_json(const CheckpointPrediction& p, const std::vector<std::string>& warnings) {
  return {{"device", p.device}, {"warnings", warnings}, {"recorded_peak", p.recorded_peak},
          {"predicted_peak", p.predicted_peak}, {"predicted_peak_ns", p.predicted_peak_ns}, {"layers", p.layers},
          {"blocks_dropped", p.blocks_dropped}};
}

std::string checkpoint_text(const CheckpointPrediction& p) {
  std::string out = fmt::format("checkpointing {} {} ({}), {} activation blocks freed after forward and recomputed:\n",
                                p.layers.size(), p.layers.size() == 1 ? "layer" : "layers", fmt::join(p.layers, ", "),
                                p.blocks_dropped);
  out += fmt::format("  recorded peak allocated   {:>12}\n", format_bytes(p.recorded_peak));
  out += fmt::format("  predicted peak allocated  {:>12}  at +{}\n", format_bytes(p.predicted_peak),
                     format_duration(p.predicted_peak_ns));
  out += fmt::format("  saving                    {:>12}  ({:.1f}%)\n", format_bytes(p.saving), p.saving_percent);
  return out;
}

}  // namespace memrec
