// `memrec whatif checkpoint`: the prediction as JSON for scripts and as text for people.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memrec/whatif.h"

namespace memrec {

// {"device", "warnings", "recorded_peak", "predicted_peak", "predicted_peak_ns", "layers", "blocks_dropped"};
// `warnings` are the input's notes (Snapshot::warnings), which a script must see beside the answer.
nlohmann::json checkpoint_json(const CheckpointPrediction& p, const std::vector<std::string>& warnings);

// The layers checkpointed, then the recorded and predicted peaks and the saving, one a line.
std::string checkpoint_text(const CheckpointPrediction& p);

}  // namespace memrec
