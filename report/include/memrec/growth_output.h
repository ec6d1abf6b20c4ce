// `memrec growth`: growth across steps as JSON for scripts and text for people.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memrec/growth.h"

namespace memrec {

// {"steps": [{"step", "start_ns", "allocated", "reserved"}], "settled_from", "per_step": {"allocated", "reserved"},
//  "verdict", "growing": [{"site", "module", "owner", "bytes_per_step", "blocks_per_step", "first_step",
//  "live_at_end", "stack"}], "projected_full_step", "projected_full_in_s"}, plus "device", "inferred_steps",
// "device_memory", "median_step_ns", "warnings" and, for a run without steps, "note" (growth_note).
nlohmann::json growth_json(const GrowthResult& g);

// The verdict and slope, the growing lines with their stacks, the projection, then the step starts.
std::string growth_text(const GrowthResult& g);

// Why a run without steps has no answer, in one sentence; "" when it has steps.
std::string growth_note(const GrowthResult& g);

// "+1.00 MiB a step, full at step 80,123" (", full at ..." only with a projection), or "steady across 40 steps":
// what `top --follow` shows.
std::string growth_summary(const GrowthResult& g);

// The report page's "Growth across steps" section: the step starts as a small chart, the growing lines and the
// projection.
std::string growth_html(const GrowthResult& g);

}  // namespace memrec
