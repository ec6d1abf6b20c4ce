// Growth across steps (memrec/growth.h): the state at each step's start, the warm-up, the slope after it, the sites
// that grow and the projection.
#include "memrec/growth.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <unordered_map>

#include <fmt/format.h>

#include "memrec/allocator_whatif.h"
#include "memrec/analysis.h"
#include "memrec/attribution.h"
#include "memrec/devices.h"
#include "memrec/replay.h"
#include "memrec/sites.h"
#include "memrec/steps.h"

namespace memrec {
namespace {

struct StepMark {
  uint64_t number = 0;
  int64_t start_ns = 0, end_ns = -1;
};

// The device's "step N" scopes by start; a step scope inside another one (opened again on another thread) is left out.
std::vector<StepMark> recorded_steps(const Snapshot& s, uint8_t device) {
  std::vector<StepMark> out;
  for (uint32_t id = 1; id < s.scopes.size(); ++id) {
    Scope sc = s.scopes[id];
    if (sc.kind != ScopeKind::step || sc.device != device) continue;
    if (auto n = step_scope_number(s.strings[sc.name])) out.push_back({*n, sc.start_ns, sc.end_ns});
  }
  std::stable_sort(out.begin(), out.end(), [](const StepMark& a, const StepMark& b) { return a.start_ns < b.start_ns; });
  std::vector<StepMark> outer;
  for (const StepMark& m : out)
    if (outer.empty() || (outer.back().end_ns != -1 && m.start_ns >= outer.back().end_ns)) outer.push_back(m);
  return outer;
}

// Steps from the phases: each begins with the first forward after an optimizer phase (after a backward where the run
// has no optimizer phases), the first with the run's first forward.
std::vector<StepMark> inferred_steps(const Snapshot& s, uint8_t device) {
  PhaseIndex phases(s, device);
  std::vector<std::pair<int64_t, PhaseKind>> starts;  // each phase's start and kind, in order
  for (int64_t t = phases.next_start(INT64_MIN); t != INT64_MAX; t = phases.next_start(t))
    if (uint32_t p = phases.at(t)) starts.emplace_back(t, phases.kind(p));
  bool optimizer = std::any_of(starts.begin(), starts.end(), [](const auto& p) { return p.second == PhaseKind::optimizer; });
  PhaseKind ends_step = optimizer ? PhaseKind::optimizer : PhaseKind::backward;
  std::vector<StepMark> out;
  bool open = true;  // the next forward starts a step
  for (const auto& [start, kind] : starts) {
    if (kind == PhaseKind::forward && open) {
      if (!out.empty()) out.back().end_ns = start;
      out.push_back({out.size(), start, -1});
      open = false;
    }
    open |= kind == ends_step;
  }
  return out;
}

Totals before(const Replay& r, uint32_t step) { return r.after(step == 0 ? kNoEvent : step - 1); }

// Growth per step of a series that may carry noise, a warm-up tail or a cycle (gradient accumulation, an evaluation
// every N steps): the lowest value of its second half less the lowest of its first half, over the distance between
// the halves. Exact for a straight line; 0 for a cycle shorter than half the series.
double slope(std::span<const double> v) {
  size_t h = v.size() / 2;
  if (h == 0) return 0;
  double low_a = *std::min_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(h));
  double low_b = *std::min_element(v.end() - static_cast<ptrdiff_t>(h), v.end());
  return (low_b - low_a) / static_cast<double>(v.size() - h);
}

// The first settled index: after the last step of the first half whose start lies below the second half's lowest
// start by more than the second half's slope explains (optimizer state, a cache filling, the allocator's first
// segments). Against the lowest, not a mean, so that a cycle (gradient accumulation) or a later jump is no warm-up.
size_t settled_index(std::span<const double> v) {
  size_t n = v.size(), half = n / 2;
  if (n < 2) return 0;
  double m = slope(v.subspan(half));
  double floor = INFINITY, lowest = INFINITY;
  for (size_t j = half; j < n; ++j) floor = std::min(floor, v[j] - m * double(j)), lowest = std::min(lowest, v[j]);
  double tolerance = std::max(4096.0, lowest / 100);
  size_t settled = 0;
  for (size_t k = 0; k < half; ++k)
    if (v[k] - m * double(k) < floor - tolerance) settled = k + 1;
  return settled;
}

double median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return static_cast<double>(*mid);
}

// One site's blocks that stay live across a step start.
struct SiteSpans {
  struct Change {
    uint32_t step;  // an index into the steps: live bytes and blocks change at its start
    int64_t bytes, blocks;
  };
  std::vector<Change> changes;
  uint32_t first = UINT32_MAX;  // the first step index one of its blocks outlived
  std::vector<uint32_t> ids;    // the blocks that outlived their step
  uint32_t example = kNoEvent;  // the largest such block
  uint64_t example_size = 0;
};

// Files each block that is live at some settled step start under its site, as `stats --by stack` names it.
class SiteTable {
 public:
  SiteTable(const Snapshot& s, const Replay& r) : s_(s), r_(r) {}

  SiteSpans& of(uint32_t id) {
    uint32_t stack = r_.stack_of(id);
    auto [it, fresh] = by_stack_.try_emplace(stack, 0);
    if (fresh) {
      auto [key, added] = by_key_.try_emplace(allocation_site(s_, stack), static_cast<uint32_t>(sites_.size()));
      if (added) keys_.push_back(key->first), sites_.emplace_back();
      it->second = key->second;
    }
    return sites_[it->second];
  }
  size_t size() const { return sites_.size(); }
  SiteSpans& at(size_t i) { return sites_[i]; }
  const std::string& key(size_t i) const { return keys_[i]; }

 private:
  const Snapshot& s_;
  const Replay& r_;
  std::unordered_map<uint32_t, uint32_t> by_stack_;
  std::unordered_map<std::string, uint32_t> by_key_;
  std::vector<std::string> keys_;
  std::vector<SiteSpans> sites_;
};

// The step starts as replay steps (starts[k]), the end of the last step (end), the first settled index.
struct Window {
  std::vector<uint32_t> starts;
  uint32_t end = 0;
  size_t settled = 0;
};

void file_blocks(const Replay& r, const Window& w, SiteTable& sites) {
  const auto& allocs = r.alloc_steps();
  const auto& frees = r.free_steps();
  auto n = static_cast<uint32_t>(w.starts.size());
  uint32_t next = 0;  // the first step starting after the block's allocation: blocks come in allocation order
  for (uint32_t id = 0; id < allocs.size(); ++id) {
    uint32_t a = allocs[id], f = frees[id];
    if (f == kBeforeStart) continue;
    // live at start k when a < starts[k] <= f (a block older than the recording is born before every step)
    if (a != kNoEvent)
      while (next < n && w.starts[next] <= a) ++next;
    uint32_t k0 = a == kNoEvent ? 0 : next;
    if (k0 < n && f != kNoEvent && f < w.starts[k0]) continue;  // freed within its step: most blocks
    auto k1 = f == kNoEvent ? n
                            : static_cast<uint32_t>(std::upper_bound(w.starts.begin(), w.starts.end(), f) - w.starts.begin());
    if (k1 <= std::max<uint32_t>(k0, static_cast<uint32_t>(w.settled))) continue;
    SiteSpans& site = sites.of(id);
    uint64_t size = r.size_of(id);
    site.changes.push_back({k0, static_cast<int64_t>(size), 1});
    if (k1 < n) site.changes.push_back({k1, -static_cast<int64_t>(size), -1});
    if (a == kNoEvent || k0 == 0) continue;  // allocated before the first step
    site.first = std::min(site.first, k0 - 1);
    site.ids.push_back(id);
    if (size > site.example_size) site.example = id, site.example_size = size;
  }
}

// The site's bytes and blocks live at each settled step start.
struct SiteSeries {
  std::vector<double> bytes, blocks;
};

SiteSeries site_series(const SiteSpans& site, const Window& w) {
  size_t n = w.starts.size();
  std::vector<std::pair<int64_t, int64_t>> delta(n + 1, {0, 0});
  for (const SiteSpans::Change& c : site.changes) delta[c.step].first += c.bytes, delta[c.step].second += c.blocks;
  SiteSeries out;
  int64_t bytes = 0, blocks = 0;
  for (size_t k = 0; k < n; ++k) {
    bytes += delta[k].first, blocks += delta[k].second;
    if (k >= w.settled) out.bytes.push_back(static_cast<double>(bytes)), out.blocks.push_back(static_cast<double>(blocks));
  }
  return out;
}

GrowingGroup growing_group(const Snapshot& s, const Replay& r, const SiteSpans& site, const std::string& key,
                           const SiteSeries& series, const Window& w, const std::vector<GrowthStep>& steps) {
  GrowingGroup g;
  g.site = key;
  g.bytes_per_step = slope(series.bytes);
  g.blocks_per_step = slope(series.blocks);
  g.first_step = site.first == UINT32_MAX ? steps[w.settled].step : steps[site.first].step;
  g.live_at_end = static_cast<uint64_t>(series.bytes.back());
  g.blocks = site.ids;
  if (site.example == kNoEvent) return g;
  Allocation a = r.allocation(site.example);
  uint32_t row = r.has_owners() ? r.owner_of(site.example) : kNoOwner;
  g.module = row != kNoOwner && s.owners[row].module ? s.strings[s.owners[row].module]
                                                     : enclosing_scope(s, a.scope, ScopeKind::module);
  g.owner = owner_label(s, r, site.example);
  for (uint32_t f : user_frames(s, a.stack)) g.stack.push_back(frame_label(s, f));
  return g;
}

// Sites whose live bytes grow by at least 1% of the whole slope, fastest first.
std::vector<GrowingGroup> growing_groups(const Snapshot& s, const Replay& r, const Window& w,
                                         const std::vector<GrowthStep>& steps, double total) {
  SiteTable sites(s, r);
  file_blocks(r, w, sites);
  std::vector<GrowingGroup> out;
  for (size_t i = 0; i < sites.size(); ++i) {
    const SiteSpans& site = sites.at(i);
    if (site.changes.empty()) continue;
    SiteSeries series = site_series(site, w);
    double per_step = slope(series.bytes);
    if (per_step > 0 && per_step >= total / 100) out.push_back(growing_group(s, r, site, sites.key(i), series, w, steps));
  }
  std::sort(out.begin(), out.end(), [](const GrowingGroup& a, const GrowingGroup& b) {
    return a.bytes_per_step != b.bytes_per_step ? a.bytes_per_step > b.bytes_per_step : a.site < b.site;
  });
  return out;
}

// The highest allocated bytes during each settled step (from its start to the next one's, the last to the end).
std::vector<double> step_peaks(const Replay& r, const Window& w) {
  size_t n = w.starts.size();
  std::vector<double> peaks;
  for (size_t k = w.settled; k < n; ++k) peaks.push_back(static_cast<double>(before(r, w.starts[k]).allocated));
  uint32_t first = w.starts[w.settled], end = std::max(first, w.end);
  size_t k = w.settled;
  r.for_each_after(first, end, [&](uint32_t step, const Totals& t) {
    while (k + 1 < n && step >= w.starts[k + 1]) ++k;
    double& p = peaks[k - w.settled];
    p = std::max(p, static_cast<double>(t.allocated));
  });
  return peaks;
}

// The step whose allocated peak passes the device's memory at this slope: cached memory is given back before an
// allocation fails, so what must fit is what is allocated. Each settled step's peak is carried to the last step at
// the slope, and the highest of them goes on from there.
void project(GrowthResult& out, const Replay& r, const Window& w) {
  if (!out.device_memory || out.allocated_per_step <= 0) return;
  std::vector<double> peaks = step_peaks(r, w);
  size_t last = peaks.size() - 1;
  double capacity = static_cast<double>(*out.device_memory), top = 0;
  for (size_t k = 0; k < peaks.size(); ++k) {
    if (peaks[k] > capacity) {  // already past it
      out.projected_full_step = out.steps[w.settled + k].step;
      out.projected_full_in_s = 0;
      return;
    }
    top = std::max(top, peaks[k] + out.allocated_per_step * static_cast<double>(last - k));
  }
  double room = (capacity - top) / out.allocated_per_step;
  uint64_t ahead = room < 0 ? 1 : static_cast<uint64_t>(room) + 1;
  out.projected_full_step = out.steps.back().step + ahead;
  out.projected_full_in_s = static_cast<double>(ahead) * static_cast<double>(out.median_step_ns) / 1e9;
}

// --steps A..B must name steps the run has (where it has any).
void check_steps(const std::vector<StepMark>& marks, const GrowthOptions& o) {
  if (marks.empty()) return;
  auto [low, high] = std::minmax_element(marks.begin(), marks.end(),
                                         [](const StepMark& a, const StepMark& b) { return a.number < b.number; });
  for (std::optional<uint64_t> n : {o.first_step, o.last_step})
    if (n && std::none_of(marks.begin(), marks.end(), [&](const StepMark& m) { return m.number == *n; }))
      throw Error(fmt::format("--steps asks for step {}, and the recording has steps {} to {}", *n, low->number,
                              high->number));
}

}  // namespace

std::string_view to_string(GrowthVerdict v) {
  static constexpr std::array<std::string_view, 3> names = {"grows", "steady", "too few steps"};
  return names.at(static_cast<size_t>(v));
}

GrowthResult growth(const Snapshot& s, const GrowthOptions& o) {
  GrowthResult out;
  out.device = choose_device(s, o.device);
  out.warnings = s.warnings;
  std::vector<StepMark> marks = recorded_steps(s, out.device);
  if (marks.empty()) marks = inferred_steps(s, out.device), out.inferred_steps = !marks.empty();
  check_steps(marks, o);
  std::erase_if(marks, [&](const StepMark& m) {
    return (o.first_step && m.number < *o.first_step) || (o.last_step && m.number > *o.last_step);
  });
  Replay r(s, out.device);
  if (marks.empty() || r.steps() == 0) return out;

  Window w;
  int64_t origin = r.time_of(kNoEvent);
  std::vector<double> allocated, reserved;
  for (const StepMark& m : marks) {
    w.starts.push_back(r.first_step_at(m.start_ns));
    Totals t = before(r, w.starts.back());
    out.steps.push_back({m.number, m.start_ns - origin, t.allocated, t.reserved});
    allocated.push_back(static_cast<double>(t.allocated));
    reserved.push_back(static_cast<double>(t.reserved));
  }
  w.end = marks.back().end_ns == -1 ? r.steps() : r.first_step_at(marks.back().end_ns + 1);
  w.settled = std::max(settled_index(allocated), settled_index(reserved));
  out.settled_from = out.steps[w.settled].step;
  std::span<const double> settled_allocated = std::span(allocated).subspan(w.settled);
  out.allocated_per_step = slope(settled_allocated);
  out.reserved_per_step = slope(std::span(reserved).subspan(w.settled));
  std::vector<int64_t> durations;
  for (size_t k = w.settled + 1; k < out.steps.size(); ++k)
    durations.push_back(out.steps[k].start_ns - out.steps[k - 1].start_ns);
  out.median_step_ns = static_cast<int64_t>(median(std::move(durations)));

  size_t settled_steps = settled_allocated.size();
  double baseline = *std::min_element(settled_allocated.begin(), settled_allocated.end());
  if (settled_steps < kGrowthMinSteps) out.verdict = GrowthVerdict::too_few_steps;
  else if (out.allocated_per_step > 0 && out.allocated_per_step * double(settled_steps - 1) > baseline / 100)
    out.verdict = GrowthVerdict::grows;
  else out.verdict = GrowthVerdict::steady;

  DeviceLimits limits = device_limits(s, r, o.device_memory);
  if (limits.limit != UINT64_MAX) out.device_memory = limits.limit;
  out.device_memory_given = limits.given;
  if (out.verdict != GrowthVerdict::grows) return out;
  out.growing = growing_groups(s, r, w, out.steps, out.allocated_per_step);
  project(out, r, w);
  return out;
}

}  // namespace memrec
