// Small pieces the renderers (text, JSON, HTML) share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "memrec/allocator_whatif.h"
#include "memrec/analysis.h"
#include "memrec/scale.h"
#include "memrec/units.h"

namespace memrec {

// |v| without overflow at INT64_MIN.
inline uint64_t magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

// "-1.00 MiB" below zero, else `plus` and the bytes: "+1.00 MiB" with plus "+", "1.00 MiB" without.
inline std::string signed_bytes(int64_t v, const char* plus = "") {
  return (v < 0 ? "-" : plus) + format_bytes(magnitude(v));
}

// Where allocator settings came from, as the JSON says it: "--alloc-conf", "recorded", "assumed".
std::string_view to_string(SettingsSource s);

// The note of a what-if replayed under the defaults because the file does not name its settings.
inline constexpr const char* kAssumedDefaults =
    "the file does not say which allocator settings the run used: assuming PyTorch's defaults (give them with "
    "--alloc-conf)";

// `memrec whatif scale`'s words, shared by its text and the report's section (scale_output.cpp): a note, whether a
// prediction fits ("yes", "OOM", "?"), and where its allocated peak falls ("step 1, backward at +263 ms", the time
// given on the clock of the run it is shown with).
std::string scale_note_text(ScaleNote n, const ScaleWhatif& w);
std::string scale_fits_text(const ScalePrediction& p);
std::string scale_where_text(const ScalePrediction& p, int64_t peak_ns);
// The report's section on a prediction drawn over its timeline (scale_html.cpp).
std::string scale_section_html(const ScaleWhatif& w);

// The value, or null when unset.
template <class T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The parts of reserved - allocated the text and the HTML list, labelled alike.
struct FragmentationPart {
  const char* label;
  uint64_t Fragmentation::*bytes;
};
inline constexpr FragmentationPart kFragmentationParts[] = {
    {"block rounding (512-byte granularity)", &Fragmentation::rounding},
    {"freed, waiting for other streams", &Fragmentation::pending_free},
    {"free pieces of split segments", &Fragmentation::split_free},
    {"free pieces of other streams' segments", &Fragmentation::other_stream},
    {"cached, wholly free segments", &Fragmentation::cached_free},
    {"largest contiguous free range", &Fragmentation::largest_free},
};

}  // namespace memrec
