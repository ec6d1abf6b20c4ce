// `memrec stats --by rank` and the ranks `memrec diff` compares: a RankSet as JSON for scripts and as text.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "memrec/ranks.h"

namespace memrec {

// How the ranks were put on one time axis, one sentence: "the ranks ran on one host (h) and share its clock".
std::string clock_note(const RankSet& set);

// The training step and phase of the rank's allocated peak: "step 3 / forward", or whichever is known.
std::string peak_step_and_phase(const RankRecording& r);

// A row per rank, the clock note and the divergence (the furthest rank against the median rank at their peaks, by
// layer, module, category and stack, `top` rows each).
nlohmann::json ranks_json(const RankSet& set, size_t top);

// The same as a table, a rank a row (m marks the median rank, * the furthest), then the groups that changed.
std::string ranks_text(const RankSet& set, size_t top);

}  // namespace memrec
