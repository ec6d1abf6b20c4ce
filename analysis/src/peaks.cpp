#include "memrec/peaks.h"

#include <fmt/format.h>

#include "memrec/replay.h"

namespace memrec {
namespace {

PlacedPeak place(const Snapshot& s, uint8_t device, const Peak& p) {
  PlacedPeak out;
  out.peak = p;
  out.since_start_ns = p.time_ns - (s.events.empty() ? 0 : s.events.front().time_ns);
  if (p.step == kNoEvent) return out;
  for (ScopeKind k : {ScopeKind::step, ScopeKind::phase, ScopeKind::module})
    if (uint32_t id = scope_at(s, k, device, p.time_ns)) out.scopes.push_back(s.strings[s.scopes[id].name]);
  return out;
}

}  // namespace

PeakSummary summarize_peaks(const Snapshot& s, uint8_t device, size_t top) {
  Replay r(s, device);
  PeakSummary out;
  out.allocated = place(s, device, r.peak_allocated());
  out.reserved = place(s, device, r.peak_reserved());
  auto type = s.metadata.find(fmt::format("device.{}.type", device));
  out.caching = type != s.metadata.end() && type->second == "cuda";
  if (r.peak_allocated().step == kNoEvent) return out;
  for (size_t g = 0; g < kPeakGroupings.size(); ++g) {
    out.at_peak[g] = group_live(s, r, r.peak_allocated().step, kPeakGroupings[g]);
    if (out.at_peak[g].size() > top) out.at_peak[g].resize(top);
  }
  return out;
}

}  // namespace memrec
