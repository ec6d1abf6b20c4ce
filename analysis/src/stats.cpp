#include "memrec/stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <map>

#include <fmt/format.h>

#include "memrec/attribution.h"
#include "memrec/devices.h"
#include "memrec/file_info.h"
#include "memrec/range.h"
#include "memrec/ranks.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

int64_t event_index(uint32_t step) { return step == kNoEvent ? -1 : static_cast<int64_t>(step); }

// The site, the op and every frame of a stack group's first stack.
GroupRow::Stack stack_of(const Snapshot& s, const Group& g) {
  GroupRow::Stack out{site_label(s, g.stack), op_label(s, g.stack), g.stacks, {}};
  for (const MarkedFrame& f : marked_frames(s, g.stack)) out.frames.push_back({frame_label(s, f.frame), f.user, f.site});
  return out;
}

double share_of(uint64_t bytes, uint64_t total) { return total ? double(bytes) / double(total) : 0.0; }

// The owners a group's row names: the largest few.
constexpr size_t kOwnersPerGroup = 5;

std::vector<std::pair<std::string, uint64_t>> owner_rows(const Snapshot& s, const Group& g) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < g.owners.size() && i < kOwnersPerGroup; ++i)
    out.emplace_back(s.strings[g.owners[i].first], g.owners[i].second);
  return out;
}

// The first `top` groups, then one row for the rest.
std::vector<GroupRow> group_rows(const Snapshot& s, const std::vector<Group>& groups, size_t top, uint64_t total) {
  std::vector<GroupRow> rows;
  uint64_t shown = 0, shown_count = 0, shown_owned = 0;
  for (size_t i = 0; i < groups.size() && i < top; ++i) {
    const Group& g = groups[i];
    rows.push_back({g.key, g.bytes, g.count, share_of(g.bytes, total), g.by_category, std::nullopt, g.owned, {}});
    if (g.stacks) rows.back().stack = stack_of(s, g);
    rows.back().owners = owner_rows(s, g);
    shown += g.bytes;
    shown_count += g.count;
    shown_owned += g.owned;
  }
  if (groups.size() > top) {
    uint64_t count = 0, owned = 0;
    for (const Group& g : groups) count += g.count, owned += g.owned;
    rows.push_back({fmt::format("<{} more>", groups.size() - top), total - shown, count - shown_count,
                    share_of(total - shown, total), {}, std::nullopt, owned - shown_owned, {}});
  }
  return rows;
}

std::vector<uint32_t> recorded_allocations(const Replay& r) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < r.alloc_steps().size(); ++i)
    if (r.alloc_steps()[i] != kNoEvent) ids.push_back(i);
  return ids;
}

std::vector<SiteRow> site_rows(const Snapshot& s, const std::vector<Group>& sites, size_t top) {
  std::vector<SiteRow> out;
  for (size_t i = 0; i < sites.size() && i < top; ++i)
    out.push_back({sites[i].key, site_label(s, sites[i].stack), sites[i].bytes, sites[i].count});
  return out;
}

void add_top_sites(StatsResult& out, const Snapshot& s, const Replay& r, size_t top) {
  auto sites = group_allocations(s, r, recorded_allocations(r), GroupBy::stack);
  out.top_by_bytes = site_rows(s, sites, top);
  std::stable_sort(sites.begin(), sites.end(), [](const Group& a, const Group& b) { return a.count > b.count; });
  out.top_by_count = site_rows(s, sites, top);
}

// Power-of-two buckets of recorded allocation sizes.
std::vector<SizeBucket> size_histogram(const Replay& r) {
  std::array<std::pair<uint64_t, uint64_t>, 65> buckets{};  // bit width -> count, bytes
  for (uint32_t id = 0; id < r.alloc_steps().size(); ++id) {
    if (r.alloc_steps()[id] == kNoEvent) continue;
    uint64_t size = r.size_of(id);
    auto& [count, bytes] = buckets[std::bit_width(size)];
    ++count;
    bytes += size;
  }
  std::vector<SizeBucket> out;
  for (int width = 0; width <= 64; ++width) {
    const auto& [count, bytes] = buckets[width];
    if (count == 0) continue;
    uint64_t lo = width == 0 ? 0 : uint64_t{1} << (width - 1);
    uint64_t hi = width == 0 ? 0 : (width >= 64 ? UINT64_MAX : (uint64_t{1} << width) - 1);
    out.push_back({lo, hi, count, bytes});
  }
  return out;
}

std::vector<OomShown> ooms(const Snapshot& s, const Replay& r, size_t top) {
  std::vector<OomShown> out;
  for (const OomReport& o : explain_ooms(s, r)) {
    const Fragmentation& f = o.fragmentation;
    out.push_back({o.time_ns - r.time_of(kNoEvent), o.step, o.requested, o.device_free, o.totals.allocated,
                   o.totals.reserved, f.reserved - std::min(f.reserved, f.allocated), f, o.caused_by_fragmentation,
                   group_rows(s, o.top_sites, top, o.totals.allocated)});
  }
  return out;
}

std::vector<KernelStats> top_kernels(const Snapshot& s, uint8_t device, size_t top) {
  std::vector<KernelStats> all = kernel_stats(s, device);
  if (all.size() > top) all.resize(top);
  return all;
}

LiveAt live_at(const Replay& r, const StatsOptions& o) {
  LiveAt at{.requested_ns = o.at_ns, .instant = find_instant(r, o.at_ns)};
  uint32_t step = at.instant.step;
  at.time_ns = r.time_of(step) - r.time_of(kNoEvent);
  at.event = event_index(step);
  at.allocated = r.after(step).allocated;
  at.reserved = r.after(step).reserved;
  return at;
}

}  // namespace

PeakShown peak_shown(const Snapshot& s, const Replay& r, const Peak& p) {
  int64_t t = r.time_of(p.step);
  uint32_t step_scope = scope_at(s, ScopeKind::step, r.device(), t);
  std::string step = step_scope ? s.strings[s.scopes[step_scope].name] : "";
  return {p.bytes, t - r.time_of(kNoEvent), event_index(p.step), step};
}

std::optional<int64_t> parse_at(const std::string& text) {
  if (text == "peak") return std::nullopt;
  return parse_duration(text, "--at", "'peak' or a time after the start like 12ms, 1.5s, 300us");
}

InstantShown find_instant(const Replay& r, std::optional<int64_t> at_ns) {
  if (!at_ns) return {.step = r.peak_allocated().step};
  if (r.steps() == 0) return {.step = kNoEvent, .moved = InstantShown::Moved::no_events};
  int64_t start = r.time_of(kNoEvent), duration = r.time_of(r.steps() - 1) - start;
  if (*at_ns > duration)  // compared as offsets: start + a huge offset would overflow
    return {.step = r.steps() - 1, .moved = InstantShown::Moved::past_end, .asked_ns = *at_ns, .duration_ns = duration};
  uint32_t lo = 0, hi = r.steps();  // the first step after the time; step 0 is at the start, so not it
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    (r.time_of(mid) - start <= *at_ns ? lo : hi) = mid;
  }
  return {.step = lo};
}

StatsResult stats(const Snapshot& s, const StatsOptions& o) {
  StatsResult out;
  out.device = choose_device(s, o.device);
  Replay r(s, out.device);
  out.events = r.steps();
  out.complete = s.complete;
  out.warnings = s.warnings;
  out.dropped_events = s.dropped_events;
  out.duration_ns = r.steps() == 0 ? 0 : r.time_of(r.steps() - 1) - r.time_of(kNoEvent);
  out.peak_allocated = peak_shown(s, r, r.peak_allocated());
  out.peak_reserved = peak_shown(s, r, r.peak_reserved());
  out.at = live_at(r, o);
  uint32_t step = out.at.instant.step;
  out.by = o.by;
  out.live = group_rows(s, group_live(s, r, step, o.by), o.top, out.at.allocated);
  out.full_stack = o.full_stack;
  add_top_sites(out, s, r, o.top);
  out.size_histogram = size_histogram(r);
  out.fragmentation = fragmentation_after(s, r, step);
  out.fragmentation_culprits = stats_fragmentation_culprits(s, r, o.top);
  out.ooms = ooms(s, r, o.top);
  if (o.kernels) out.kernels = top_kernels(s, out.device, o.top), out.kernel_steps = kernel_steps_note(s);
  out.device_memory = device_memory_stats(s, r, step, o.top);
  return out;
}

GroupChanges group_changes(std::span<const Group> a, std::span<const Group> b, size_t top) {
  std::map<std::string, std::pair<const Group*, const Group*>> by_key;
  for (const Group& g : a) by_key[g.key].first = &g;
  for (const Group& g : b) by_key[g.key].second = &g;
  GroupChanges out;
  for (const auto& [key, pair] : by_key) {
    const auto& [ga, gb] = pair;
    uint64_t ab = ga ? ga->bytes : 0, bb = gb ? gb->bytes : 0;
    out.rows.push_back({key, ab, bb, static_cast<int64_t>(bb) - static_cast<int64_t>(ab), ga ? ga->count : 0,
                        gb ? gb->count : 0});
  }
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const GroupChange& x, const GroupChange& y) { return std::llabs(x.delta) > std::llabs(y.delta); });
  out.changed = std::count_if(out.rows.begin(), out.rows.end(), [](const GroupChange& c) { return c.delta != 0; });
  if (out.rows.size() > top) out.rows.resize(top);
  return out;
}

DiffResult diff(const Snapshot& a, const Snapshot& b, const StatsOptions& o) {
  Replay ra(a, choose_device(a, o.device)), rb(b, choose_device(b, o.device));
  auto side = [](const Replay& r) {
    return DiffSide{r.device(), r.peak_allocated().bytes, r.peak_reserved().bytes, r.steps()};
  };
  DiffResult out{.by = o.by,
                 .warnings = a.warnings,
                 .a = side(ra),
                 .b = side(rb),
                 .delta_peak_allocated = int64_t(rb.peak_allocated().bytes) - int64_t(ra.peak_allocated().bytes),
                 .delta_peak_reserved = int64_t(rb.peak_reserved().bytes) - int64_t(ra.peak_reserved().bytes),
                 .changes = group_changes(group_live(a, ra, ra.peak_allocated().step, o.by),
                                          group_live(b, rb, rb.peak_allocated().step, o.by), o.top),
                 .ranks = std::nullopt};
  out.warnings.insert(out.warnings.end(), b.warnings.begin(), b.warnings.end());
  return out;
}

std::optional<std::pair<int, int>> different_ranks(const Snapshot& a, const std::string& path_a, const Snapshot& b,
                                                   const std::string& path_b) {
  auto ra = recording_rank(a, path_a), rb = recording_rank(b, path_b);
  if (!ra || !rb || ra->first == rb->first) return std::nullopt;
  return std::pair{ra->first, rb->first};
}

}  // namespace memrec
