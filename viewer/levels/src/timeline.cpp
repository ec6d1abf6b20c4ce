#include "memrec/timeline.h"

#include "memrec/devices.h"
#include "memrec/huge_pages.h"
#include "memrec/threads.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>

namespace memrec {
namespace {

// Steps per finest pyramid bucket, and between sampled times. Ranges shorter than this are scanned directly.
constexpr uint32_t kBucket = 32;
constexpr uint32_t kTimeStride = 64;

// Internally a "position" is step + 1, so the initial state (kNoEvent) is position 0 and ranges stay unsigned.
uint32_t pos_of(uint32_t step) { return step == kNoEvent ? 0 : step + 1; }
// The first position a block is no longer live at (Allocation::free_step as a position; kNone = never freed).
uint32_t free_pos(uint32_t free_step) {
  return free_step == kBeforeStart ? 0 : free_step == kNoEvent ? kNone : free_step + 1;
}

}  // namespace

void Envelope::include(const Totals& t, uint32_t step) {
  bool higher = t.allocated > allocated_max || (t.allocated == allocated_max && pos_of(step) < pos_of(peak_step));
  if (empty() || higher) {
    allocated_max = t.allocated;
    peak_step = step;
  }
  reserved_min = std::min(reserved_min, t.reserved);
  reserved_max = std::max(reserved_max, t.reserved);
}

void Envelope::include(const Envelope& e) {
  if (e.empty()) return;
  bool higher = e.allocated_max > allocated_max ||
                (e.allocated_max == allocated_max && pos_of(e.peak_step) < pos_of(peak_step));
  if (empty() || higher) {
    allocated_max = e.allocated_max;
    peak_step = e.peak_step;
  }
  reserved_min = std::min(reserved_min, e.reserved_min);
  reserved_max = std::max(reserved_max, e.reserved_max);
}

Timeline::Timeline(const Replay& r, unsigned threads)
    : r_(r), alloc_step_(r.alloc_steps()), free_step_(r.free_steps()) {
  uint32_t n = steps();
  begin_ns_ = r_.time_of(kNoEvent);
  end_ns_ = n ? r_.time_of(n - 1) : begin_ns_;
  unsigned parts = parts_for(n, threads, 1u << 16);
  sample_times(parts);
  build_pyramid(parts);
  build_checkpoints(parts);
}

// Every kTimeStride-th step's time.
void Timeline::sample_times(unsigned parts) {
  sampled_times_.resize((steps() + kTimeStride - 1) / kTimeStride);
  on_threads(parts, [&](unsigned part) {
    auto [begin, end] = slice(sampled_times_.size(), part, parts);
    for (uint32_t k = begin; k < end; ++k) sampled_times_[k] = r_.time_of(k * kTimeStride);
  });
}

// Includes the states at positions [a, b), replaying forward once.
void Timeline::include_positions(Envelope& e, uint32_t a, uint32_t b) const {
  if (a == 0 && b > 0) e.include(r_.initial(), kNoEvent), ++a;
  if (a < b) r_.for_each_after(a - 1, b - 1, [&](uint32_t step, const Totals& t) { e.include(t, step); });
}

// Level 0 buckets cover kBucket positions, each part of them replayed on a thread of its own; each level above
// merges pairs.
void Timeline::build_pyramid(unsigned parts) {
  uint32_t positions = steps() + 1;
  size_t buckets = (positions + kBucket - 1) / kBucket;
  std::vector<Envelope> level;
  reserve_huge(level, buckets);
  level.resize(buckets);
  on_threads(parts, [&](unsigned part) {
    auto [begin, end] = slice(buckets, part, parts);
    if (begin == end) return;
    uint32_t first = begin * kBucket, last = std::min(end * kBucket, positions);
    if (first == 0) level[0].include(r_.initial(), kNoEvent), first = 1;
    r_.for_each_after(first - 1, last - 1,
                      [&](uint32_t step, const Totals& t) { level[pos_of(step) / kBucket].include(t, step); });
  });
  levels_.push_back(std::move(level));
  while (levels_.back().size() > 1) {
    const auto& below = levels_.back();
    std::vector<Envelope> up((below.size() + 1) / 2);
    for (size_t k = 0; k < below.size(); ++k) up[k / 2].include(below[k]);
    levels_.push_back(std::move(up));
  }
}

// Checkpoint k holds the blocks live at position k * checkpoint_stride_, in id order. How many that is comes first,
// from where each block's life starts and ends, so that each part of the checkpoints is filled in place by a thread.
void Timeline::build_checkpoints(unsigned parts) {
  uint32_t n = r_.allocations().size();
  std::vector<uint64_t> lifetimes(parts);
  std::vector<uint32_t> first_recorded(parts);
  on_threads(parts, [&](unsigned part) {
    auto [begin, end] = slice(n, part, parts);
    for (uint32_t i = begin; i < end; ++i) {
      uint32_t alloc_step = alloc_step_[i], born = pos_of(alloc_step);
      if (alloc_step == kNoEvent) first_recorded[part] = i + 1;
      uint32_t free = std::min(free_pos(free_step_[i]), steps() + 1);
      if (free > born) lifetimes[part] += free - born;
    }
  });
  uint64_t lifetime = std::accumulate(lifetimes.begin(), lifetimes.end(), uint64_t{0});
  first_recorded_ = *std::max_element(first_recorded.begin(), first_recorded.end());
  // About as many steps between checkpoints as blocks live on average: a lookup then costs ~2x the live count,
  // and the checkpoints together hold about as many ids as there are steps.
  uint64_t mean_live = lifetime / (steps() + 1) + 1;
  uint32_t stride = std::bit_ceil(static_cast<uint32_t>(std::min<uint64_t>(mean_live, 1u << 16)));
  checkpoint_stride_ = std::clamp<uint32_t>(stride, 256, 1u << 16);
  count_checkpoints(parts);
  reserve_huge(checkpoint_ids_, checkpoint_ends_.back());
  checkpoint_ids_.resize(checkpoint_ends_.back());
  on_threads(parts, [&](unsigned part) {
    auto [begin, end] = slice(checkpoint_ends_.size(), part, parts);
    fill_checkpoints(begin, end);
  });
}

// checkpoint_ends_: a block is in checkpoints [ceil(born / stride), ceil(free / stride)); each part of the blocks
// adds +1 and -1 at those two checkpoints to a count of its own, and the running sum of them all is the ends.
void Timeline::count_checkpoints(unsigned parts) {
  uint32_t stride = checkpoint_stride_, checkpoints = steps() / stride + 1, n = r_.allocations().size();
  std::vector<std::vector<int64_t>> changes(parts);
  on_threads(parts, [&](unsigned part) {
    std::vector<int64_t>& change = changes[part];
    change.assign(checkpoints + 1, 0);
    auto [begin, end] = slice(n, part, parts);
    for (uint32_t i = begin; i < end; ++i) {
      uint64_t first = (uint64_t{pos_of(alloc_step_[i])} + stride - 1) / stride;
      uint64_t last = std::min<uint64_t>(checkpoints, (uint64_t{free_pos(free_step_[i])} + stride - 1) / stride);
      if (first < last) ++change[first], --change[last];
    }
  });
  checkpoint_ends_.resize(checkpoints);
  int64_t live = 0, total = 0;
  for (uint32_t k = 0; k < checkpoints; ++k) {
    for (const auto& change : changes) live += change[k];
    checkpoint_ends_[k] = static_cast<size_t>(total += live);
  }
}

// Checkpoints [begin, end): the live set at the first one from every block born by then, then carried forward.
void Timeline::fill_checkpoints(uint32_t begin, uint32_t end) {
  uint32_t n = r_.allocations().size();
  std::vector<uint32_t> live;
  uint32_t next = 0;
  for (uint32_t k = begin; k < end; ++k) {
    uint32_t pos = k * checkpoint_stride_;
    std::erase_if(live, [&](uint32_t id) { return free_pos(free_step_[id]) <= pos; });
    for (; next < n && pos_of(alloc_step_[next]) <= pos; ++next)
      if (free_pos(free_step_[next]) > pos) live.push_back(next);
    size_t at = k ? checkpoint_ends_[k - 1] : 0;
    std::copy(live.begin(), live.end(), checkpoint_ids_.begin() + static_cast<ptrdiff_t>(at));
  }
}

void Timeline::extend() {
  uint32_t old = built_steps_, n = steps();
  if (n == old) return;
  begin_ns_ = r_.time_of(kNoEvent);
  end_ns_ = r_.time_of(n - 1);
  for (uint32_t step = static_cast<uint32_t>(sampled_times_.size()) * kTimeStride; step < n; step += kTimeStride)
    sampled_times_.push_back(r_.time_of(step));
  extend_pyramid(old);
  built_steps_ = n;
  extend_checkpoints();
}

// Level 0 from the bucket that held the last position, and above it the buckets those are under.
void Timeline::extend_pyramid(uint32_t old_steps) {
  size_t first = old_steps / kBucket;
  std::vector<Envelope>& level = levels_[0];
  level.resize((steps() + 1 + kBucket - 1) / kBucket);
  std::fill(level.begin() + static_cast<std::ptrdiff_t>(first), level.end(), Envelope{});
  if (first == 0) level[0].include(r_.initial(), kNoEvent);
  uint32_t from = first == 0 ? 0 : static_cast<uint32_t>(first * kBucket - 1);
  r_.for_each_after(from, steps(),
                    [&](uint32_t step, const Totals& t) { level[pos_of(step) / kBucket].include(t, step); });
  for (size_t j = 1; levels_[j - 1].size() > 1; ++j) {
    if (j == levels_.size()) levels_.emplace_back();
    const std::vector<Envelope>& below = levels_[j - 1];
    std::vector<Envelope>& up = levels_[j];
    first /= 2;
    up.resize((below.size() + 1) / 2);
    for (size_t k = first; k < up.size(); ++k) {
      up[k] = Envelope{};
      for (size_t b = 2 * k; b < std::min(below.size(), 2 * k + 2); ++b) up[k].include(below[b]);
    }
  }
}

// Checkpoints at the positions the steps gained, each from the one before (the blocks live there, less those freed
// since, plus those allocated since and still live), at the stride of the first build unless the run outgrew it.
void Timeline::extend_checkpoints() {
  size_t k = checkpoint_ends_.size();
  uint32_t prev = static_cast<uint32_t>(k - 1) * checkpoint_stride_;
  std::vector<uint32_t> live(checkpoint_ids_.begin() + static_cast<std::ptrdiff_t>(k > 1 ? checkpoint_ends_[k - 2] : 0),
                             checkpoint_ids_.begin() + static_cast<std::ptrdiff_t>(checkpoint_ends_[k - 1]));
  uint32_t next = first_allocation_after(prev);
  for (uint32_t pos = prev + checkpoint_stride_; pos <= steps(); pos += checkpoint_stride_) {
    std::erase_if(live, [&](uint32_t id) { return free_pos(free_step_[id]) <= pos; });
    for (; next < alloc_step_.size() && pos_of(alloc_step_[next]) <= pos; ++next)
      if (free_pos(free_step_[next]) > pos) live.push_back(next);
    checkpoint_ids_.insert(checkpoint_ids_.end(), live.begin(), live.end());
    checkpoint_ends_.push_back(checkpoint_ids_.size());
  }
  coarsen_checkpoints();
}

// A stride chosen on a short start would keep many more ids than steps: while checkpoints hold more blocks than
// twice the steps between them, every other one goes (the positions of a double stride are among the present ones).
void Timeline::coarsen_checkpoints() {
  auto size_of = [&](size_t c) { return checkpoint_ends_[c] - (c ? checkpoint_ends_[c - 1] : 0); };
  while (checkpoint_stride_ < (1u << 16) && size_of(checkpoint_ends_.size() - 1) > 2 * size_t{checkpoint_stride_}) {
    std::vector<uint32_t> ids;
    std::vector<size_t> ends;
    for (size_t c = 0; c < checkpoint_ends_.size(); c += 2) {
      auto begin = checkpoint_ids_.begin() + static_cast<std::ptrdiff_t>(c ? checkpoint_ends_[c - 1] : 0);
      ids.insert(ids.end(), begin, begin + static_cast<std::ptrdiff_t>(size_of(c)));
      ends.push_back(ids.size());
    }
    checkpoint_ids_ = std::move(ids), checkpoint_ends_ = std::move(ends);
    checkpoint_stride_ *= 2;
  }
}

uint32_t Timeline::step_at(int64_t t) const {
  uint32_t n = steps();
  if (n == 0 || t < r_.time_of(0)) return kNoEvent;
  // Last sampled step at or before t, then the last step at or before t within its stride.
  auto it = std::upper_bound(sampled_times_.begin(), sampled_times_.end(), t);
  uint32_t lo = static_cast<uint32_t>(it - sampled_times_.begin() - 1) * kTimeStride;
  uint32_t hi = std::min(n, lo + kTimeStride);  // first candidate after t is in (lo, hi]
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (r_.time_of(mid) <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

Envelope Timeline::envelope_steps(uint32_t first, uint32_t last) const {
  Envelope e;
  uint32_t lo = pos_of(first), hi = pos_of(last);
  auto scan = [&](uint32_t a, uint32_t b) { include_positions(e, a, b); };
  uint32_t full_lo = (lo + kBucket - 1) / kBucket, full_end = (hi + 1) / kBucket;
  if (full_lo >= full_end) {
    scan(lo, hi + 1);
    return e;
  }
  scan(lo, full_lo * kBucket);
  scan(full_end * kBucket, hi + 1);
  // Whole buckets [full_lo, full_end) climbing the pyramid.
  int64_t a = full_lo, b = static_cast<int64_t>(full_end) - 1;
  for (size_t j = 0; a <= b; ++j) {
    if (a & 1) e.include(levels_[j][a++]);
    if (!(b & 1)) e.include(levels_[j][b--]);
    a >>= 1;
    b = (b - 1) >> 1;
  }
  return e;
}

Envelope Timeline::envelope(int64_t t0, int64_t t1) const {
  uint32_t first = step_at(t0), last = step_at(t1 - 1);
  return envelope_steps(first, pos_of(last) < pos_of(first) ? first : last);
}

// Recorded blocks are in allocation order: the first one allocated at a step at or after `pos` (= after step pos - 1).
uint32_t Timeline::first_allocation_after(uint32_t pos) const {
  auto begin = alloc_step_.begin() + first_recorded_;
  return static_cast<uint32_t>(std::lower_bound(begin, alloc_step_.end(), pos) - alloc_step_.begin());
}

void Timeline::live_at(uint32_t step, std::vector<uint32_t>& out) const {
  out.clear();
  uint32_t pos = pos_of(step);
  uint32_t cp = pos / checkpoint_stride_;
  uint32_t cp_pos = cp * checkpoint_stride_;
  for (size_t k = cp ? checkpoint_ends_[cp - 1] : 0; k < checkpoint_ends_[cp]; ++k)
    if (uint32_t id = checkpoint_ids_[k]; free_pos(free_step_[id]) > pos) out.push_back(id);
  for (uint32_t id = first_allocation_after(cp_pos); id < alloc_step_.size() && pos_of(alloc_step_[id]) <= pos; ++id)
    if (free_pos(free_step_[id]) > pos) out.push_back(id);
}

void Timeline::stack_rows(uint32_t step, double bytes_per_row, std::span<uint32_t> rows,
                          std::vector<uint32_t>& scratch) const {
  live_at(step, scratch);
  size_t row = 0;
  double top = 0;
  for (uint32_t id : scratch) {
    top += static_cast<double>(r_.size_of(id));
    for (; row < rows.size() && (row + 0.5) * bytes_per_row < top; ++row) rows[row] = id;
    if (row == rows.size()) return;
  }
  std::fill(rows.begin() + row, rows.end(), kNone);
}

uint32_t Timeline::allocation_at(uint32_t step, uint64_t offset) const {
  std::vector<uint32_t> live;
  live_at(step, live);
  uint64_t top = 0;
  for (uint32_t id : live) {
    top += r_.size_of(id);
    if (offset < top) return id;
  }
  return kNone;
}

int64_t Lane::end_of(uint32_t id) const {
  int64_t end = kernels ? s->kernels[id].end_ns : s->scopes[id].end_ns < 0 ? open_end : s->scopes[id].end_ns;
  return std::max(end, start_of(id) + 1);
}

void Lane::sample() {
  sampled_starts.clear();
  for (size_t k = 0; k < ids.size(); k += kSample) sampled_starts.push_back(start(k));
}

size_t Lane::first_starting_at(int64_t t, size_t from) const {
  if (from == ids.size() || start(from) >= t) return from;  // zoomed in, columns stay on one item
  // Gallop over the samples from `from`'s: the first sample q starting at or after t bounds the answer to
  // ((q - 1) * kSample, q * kSample].
  size_t q = from / kSample, step = 1, lo = q;
  while (q < sampled_starts.size() && sampled_starts[q] < t) {
    lo = q;
    q = std::min(sampled_starts.size(), q + step);
    step *= 2;
  }
  q = std::partition_point(sampled_starts.begin() + lo, sampled_starts.begin() + q, [&](int64_t v) { return v < t; }) -
      sampled_starts.begin();
  size_t first = std::max(from, q ? (q - 1) * kSample : 0), last = std::min(ids.size(), q * kSample);
  auto it = std::partition_point(ids.begin() + first, ids.begin() + std::max(first, last),
                                 [&](uint32_t id) { return start_of(id) < t; });
  return it - ids.begin();
}

size_t Lane::first_ending_after(int64_t t) const {
  auto it = std::partition_point(ids.begin(), ids.end(), [&](uint32_t id) { return end_of(id) <= t; });
  return it - ids.begin();
}

void Lane::columns(int64_t origin, int64_t first, double dt, std::span<uint32_t> out) const {
  auto edge = [&](int64_t column) { return origin + static_cast<int64_t>(std::floor(static_cast<double>(column) * dt)); };
  size_t k = 0;  // first item starting at or after the current column's end; columns only move right
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t column = first + static_cast<int64_t>(i);
    int64_t c0 = edge(column), c1 = std::max(edge(column + 1), c0 + 1);
    k = first_starting_at(c1, k);
    // An item starting inside the column reaches into it: its end need not be read.
    out[i] = k > 0 && (start(k - 1) >= c0 || end(k - 1) > c0) ? ids[k - 1] : kNone;
  }
}

namespace {

// Recorders append in start order, so this rarely sorts.
void sort_lane(Lane& lane) {
  auto by_start = [&](uint32_t a, uint32_t b) { return lane.start_of(a) < lane.start_of(b); };
  if (!std::is_sorted(lane.ids.begin(), lane.ids.end(), by_start)) std::sort(lane.ids.begin(), lane.ids.end(), by_start);
}

std::vector<Lane> sorted_lanes(auto& by_key) {
  std::vector<Lane> lanes;
  for (auto& [key, lane] : by_key) {
    sort_lane(lane);
    lane.sample();
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

}  // namespace

int64_t last_event_time(const Snapshot& s, uint8_t device) {
  for (size_t i = s.events.size(); i-- > 0;)
    if (s.events[i].device == device) return s.events[i].time_ns;
  return 0;
}

std::vector<Lane> kernel_lanes(const Snapshot& s, uint8_t device) {
  std::map<uint16_t, Lane> by_stream;
  for (uint32_t i = 0; i < s.kernels.size(); ++i) {
    const Kernel& k = s.kernels[i];
    if (k.device != device) continue;
    Lane& lane = by_stream[k.stream];
    if (lane.ids.empty()) lane = Lane{.title = stream_name(s, k.stream), .s = &s, .kernels = true, .ids = {}};
    lane.ids.push_back(i);
  }
  return sorted_lanes(by_stream);
}

namespace {

// Items appended to a lane in index order: sorted again (rarely) where they start before the items ahead of them,
// else sampled from where the samples stopped.
void settle_lane(Lane& lane) {
  size_t from = lane.sampled_starts.empty() ? 0 : (lane.sampled_starts.size() - 1) * Lane::kSample;
  auto by_start = [&](uint32_t a, uint32_t b) { return lane.start_of(a) < lane.start_of(b); };
  if (!std::is_sorted(lane.ids.begin() + static_cast<std::ptrdiff_t>(from), lane.ids.end(), by_start)) {
    sort_lane(lane);
    lane.sample();
    return;
  }
  for (size_t k = lane.sampled_starts.size() * Lane::kSample; k < lane.ids.size(); k += Lane::kSample)
    lane.sampled_starts.push_back(lane.start(k));
}

// Appends item `id` to the lane of `key` (lanes in key order, keys[i] lane i's), making the lane where there is none.
template <class Key, class Make>
void add_to_lane(std::vector<Lane>& lanes, std::vector<Key>& keys, const Key& key, uint32_t id, Make make) {
  auto at = std::lower_bound(keys.begin(), keys.end(), key) - keys.begin();
  if (at == static_cast<std::ptrdiff_t>(keys.size()) || keys[at] != key) {
    keys.insert(keys.begin() + at, key);
    lanes.insert(lanes.begin() + at, make());
  }
  lanes[at].ids.push_back(id);
}

// Depth within the same kind, as scope_lanes counts it.
int kind_depth(const Snapshot& s, uint32_t i) {
  ScopeKind kind = s.scopes[i].kind;
  uint32_t p = s.scopes[i].parent;
  while (p != 0 && p < i && s.scopes[p].kind != kind) p = s.scopes[p].parent;
  return p != 0 && p < i ? std::min(kind_depth(s, p) + 1, 255) : 0;
}

std::string scope_lane_title(ScopeKind kind, int depth) {
  return std::string(to_string(kind)) + (depth ? " " + std::to_string(depth + 1) : "");
}

}  // namespace

void extend_kernel_lanes(std::vector<Lane>& lanes, const Snapshot& s, uint8_t device, uint32_t from) {
  std::vector<uint16_t> keys;
  for (const Lane& lane : lanes) keys.push_back(s.kernels[lane.ids[0]].stream);
  for (uint32_t i = from; i < s.kernels.size(); ++i) {
    Kernel k = s.kernels[i];
    if (k.device != device) continue;
    add_to_lane(lanes, keys, k.stream, i,
                [&] { return Lane{.title = stream_name(s, k.stream), .s = &s, .kernels = true, .ids = {}}; });
  }
  for (Lane& lane : lanes) settle_lane(lane);
}

void extend_scope_lanes(std::vector<Lane>& lanes, const Snapshot& s, uint8_t device, int64_t end_ns, uint32_t from,
                        int max_depth) {
  std::vector<std::pair<ScopeKind, int>> keys;
  for (const Lane& lane : lanes) keys.emplace_back(s.scopes[lane.ids[0]].kind, kind_depth(s, lane.ids[0]));
  for (uint32_t i = std::max(from, 1u); i < s.scopes.size(); ++i) {
    Scope sc = s.scopes[i];
    int depth = kind_depth(s, i);
    if (sc.device != device || depth >= max_depth) continue;
    add_to_lane(lanes, keys, std::pair{sc.kind, depth}, i, [&] {
      return Lane{.title = scope_lane_title(sc.kind, depth), .s = &s, .kernels = false, .ids = {}, .open_end = end_ns};
    });
  }
  for (Lane& lane : lanes) lane.open_end = end_ns, settle_lane(lane);
}

std::vector<Lane> scope_lanes(const Snapshot& s, uint8_t device, int64_t end_ns, int max_depth) {
  // Depth within the same kind: how many enclosing scopes share it. Parents come before children.
  std::vector<uint8_t> depth(s.scopes.size(), 0);
  std::map<std::pair<ScopeKind, int>, Lane> lanes_by_key;
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    uint32_t p = sc.parent;
    while (p != 0 && p < i && s.scopes[p].kind != sc.kind) p = s.scopes[p].parent;
    depth[i] = p != 0 && p < i ? static_cast<uint8_t>(std::min(depth[p] + 1, 255)) : 0;
    if (sc.device != device || depth[i] >= max_depth) continue;
    Lane& lane = lanes_by_key[{sc.kind, depth[i]}];
    if (lane.ids.empty())
      lane = Lane{
          .title = scope_lane_title(sc.kind, depth[i]), .s = &s, .kernels = false, .ids = {}, .open_end = end_ns};
    lane.ids.push_back(i);
  }
  return sorted_lanes(lanes_by_key);
}

}  // namespace memrec
