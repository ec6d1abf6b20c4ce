// `memrec whatif allocator` and the fragmentation culprits of `memrec stats` as text and JSON, from the results of
// memrec/allocator_whatif.h.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memrec/allocator_whatif.h"

namespace memrec {

nlohmann::json allocator_whatif_json(const AllocatorWhatif& w);
std::string allocator_whatif_text(const AllocatorWhatif& w);

// An empty object for a run without segments.
nlohmann::json fragmentation_culprits_json(const FragmentationCulprits& c);
std::string fragmentation_culprits_text(const FragmentationCulprits& c);

}  // namespace memrec
