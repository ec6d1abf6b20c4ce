#include "memrec/run_summary.h"

#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/peaks.h"
#include "memrec/units.h"

namespace memrec {
namespace {

// The largest groups the summary lists at the allocated peak, by each of kPeakGroupings.
constexpr size_t kTop = 5;
constexpr const char* kGroupTitles[] = {"top allocation sites at the peak", "top modules at the peak",
                                        "top ops at the peak"};
static_assert(std::size(kGroupTitles) == kPeakGroupings.size());

// "at 12.5 ms (step 3 / forward / layers.1)", or "at start".
std::string when(const PlacedPeak& p) {
  if (p.peak.step == kNoEvent) return "at start";
  std::string where = p.scopes.empty() ? "" : fmt::format(" ({})", fmt::join(p.scopes, " / "));
  return fmt::format("at {:.1f} ms{}", p.since_start_ns / 1e6, where);
}

std::string peaks_text(const PeakSummary& p) {
  std::string out = fmt::format("peak allocated: {} {}\n", format_bytes(p.allocated.peak.bytes), when(p.allocated));
  if (p.caching) return out + fmt::format("peak reserved:  {} {}\n", format_bytes(p.reserved.peak.bytes), when(p.reserved));
  return out + "peak reserved:  n/a (the CPU allocator keeps no cache)\n";
}

std::string groups_text(const PeakSummary& p) {
  std::string out;
  if (p.allocated.peak.step == kNoEvent) return out;
  for (size_t g = 0; g < kPeakGroupings.size(); ++g) {
    out += fmt::format("{}:\n", kGroupTitles[g]);
    for (const Group& group : p.at_peak[g])
      out += fmt::format("  {:>10}  {:>6} blocks  {}\n", format_bytes(group.bytes), group.count,
                         group.key.empty() ? "<none>" : group.key);
  }
  return out;
}

std::string drops_text(const RecorderCounts& c) {
  if (c.all_dropped() == 0) return "";
  return fmt::format("WARNING: the recording is incomplete: {} allocator events dropped ({} with the buffer full, {} "
                     "over --max-events, {} CPU blocks not wrappable), {} scope records and {} kernels dropped\n",
                     c.dropped, c.dropped_buffer_full, c.dropped_over_cap, c.cpu_unwrapped, c.scopes_dropped,
                     c.kernels_dropped);
}

std::string counts_text(const Snapshot& s, const RecorderCounts& c) {
  std::string out = fmt::format("events: {}  kernels: {}  scopes: {}  unique frames: {}  dropped: {}\n",
                                s.events.size(), s.kernels.size(), s.scopes.size() - 1, s.frames.size(), c.all_dropped());
  out += drops_text(c);
  out += fmt::format("symbolized {} unique addresses in {:.1f} ms (on the drain thread, as they first appeared)\n",
                     c.unique_frames, c.symbolize_ms);
  if (c.cpu_zero_allocs) out += fmt::format("zero-byte CPU allocations (no memory, not events): {}\n", c.cpu_zero_allocs);
  return out;
}

std::string mean_step_text(const std::vector<double>& step_ms) {
  if (step_ms.empty()) return "";
  double mean = 0;
  for (double t : step_ms) mean += t / step_ms.size();
  return fmt::format("mean step: {:.1f} ms over {} steps\n", mean, step_ms.size());
}

}  // namespace

std::string run_summary_text(const Snapshot& recording, const RunFacts& run) {
  PeakSummary peaks = summarize_peaks(recording, 0, kTop);
  return mean_step_text(run.step_ms) + peaks_text(peaks) + groups_text(peaks) + counts_text(recording, run.recorder) +
         fmt::format("wrote {} ({})\n", run.output, format_bytes(run.output_bytes));
}

std::string pickle_written_text(const std::string& path) {
  return fmt::format("wrote {} (open in pytorch.org/memory_viz)\n", path);
}

}  // namespace memrec
