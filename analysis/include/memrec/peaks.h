// A recording's peaks, where they fell and what held the allocated one: what `memrec run` says of the file it wrote.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memrec/analysis.h"

namespace memrec {

// A peak and the step, phase and module scopes holding it (outermost first, those open at that time).
struct PlacedPeak {
  Peak peak;                        // step kNoEvent: the state before the first event
  int64_t since_start_ns = 0;       // after the recording's first event
  std::vector<std::string> scopes;  // scope names
};

// The groupings PeakSummary::at_peak holds, in its order.
inline constexpr std::array<GroupBy, 3> kPeakGroupings = {GroupBy::stack, GroupBy::module, GroupBy::op};

struct PeakSummary {
  PlacedPeak allocated, reserved;
  bool caching = false;  // a CUDA device: its allocator caches blocks, so reserved bytes say something
  std::array<std::vector<Group>, kPeakGroupings.size()> at_peak;  // live at the allocated peak, `top` groups each
};

// The peaks of `device`; at_peak stays empty when the allocated peak is the state before the first event.
PeakSummary summarize_peaks(const Snapshot& s, uint8_t device, size_t top);

}  // namespace memrec
