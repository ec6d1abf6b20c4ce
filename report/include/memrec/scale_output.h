// `memrec whatif scale`: the predictions, the fit and the unmatched allocations as JSON for scripts and as text for
// people, from memrec/scale.h's result.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memrec/scale.h"

namespace memrec {

// {"device", "runs", "settings", "settings_source", "device_memory", "predictions", "fit", "unmatched", "notes",
// "warnings"}; each prediction {"size", "peak_allocated", "peak_reserved", "oom", ...}, null where not known;
// "fit" is null without --fit.
nlohmann::json scale_whatif_json(const ScaleWhatif& w);

// The notes, the runs, one row per predicted size with what grows most at its peak, the fit and the unmatched
// allocations.
std::string scale_whatif_text(const ScaleWhatif& w);

}  // namespace memrec
