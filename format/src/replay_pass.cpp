// Replay's pass over a device's steps, on several threads. The steps are cut into ranges, replayed side by side:
// the first against the pass's address map, each other one against a map of its own, which tells most of its frees
// which block they free. What a range cannot tell alone (a free or an owner row at an address where it allocated no
// block, an alloc where a block from before it may still be live) it keeps in order; those are then settled range
// after range against the pass's map, as the serial pass would at their step. Last, each range adds to the totals it
// stored what the ranges before it and its open frees changed.
#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <span>
#include <utility>

#include "address_map.h"
#include "memrec/huge_pages.h"
#include "memrec/replay.h"
#include "memrec/threads.h"

namespace memrec {
namespace {

uint64_t reserved_in(const std::vector<Segment>& segments, uint8_t device) {
  uint64_t total = 0;
  for (const Segment& seg : segments)
    if (seg.device == device) total += seg.total_size;
  return total;
}

// Marks ids into pre_existing_ (in the pass's map).
constexpr uint32_t kPreExisting = uint32_t{1} << 31;
// LiveBlock::id in a range's own map where what is live depends on the ranges before: the range freed (not for good)
// or named a block it did not allocate, which may have been one older than the recording, now live.
constexpr uint32_t kUnknown = kNoEvent;
constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();

}  // namespace

// Block address -> allocation id and size; the size rides along so that a free need not look up its alloc event.
class Replay::AddressMap : public format_detail::AddressMap<LiveBlock> {};

// A step or an owner row that its range could not replay alone.
struct Replay::Open {
  uint64_t addr, size;
  uint32_t step;
  uint32_t owned;  // an owner row's entry in Range::owned; kNoOwner for a step
  Action action;
};

// Steps [begin, end) and what replaying them found.
struct Replay::Range {
  uint32_t begin = 0, end = 0;
  uint32_t first_id = 0;  // the id of its first alloc, counting allocs only (finish() puts pre-existing blocks first)
  std::span<const OwnerRow> rows;  // attached before one of its steps (the last range: or after them all)
  AddressMap map;                  // its own: the live blocks it allocated, and kUnknown
  std::vector<Open> open;          // in order
  std::vector<Open> checks;        // allocs at addresses the ranges before may have left a block at, in order
  std::vector<Correction> corrections;
  std::vector<Owned> owned;  // an entry per row, in order; id kNoOwner where no block
  std::vector<uint32_t> segment_steps;
  int64_t allocated = 0, active = 0, reserved = 0;  // the change over the range (an open free's: once stitched)
  int64_t lowest_reserved = 0, highest_reserved = kLowest;  // relative to its start
  uint32_t at_reserved = kNoEvent;                            // the first step reaching the highest
  // Steps from an open free to the next, which the range replays as if the free's change were what its event says:
  // the highest allocated among them as replayed (relative to the range's start), the first step reaching it, and
  // what the open frees up to the stretch's first step changed otherwise (stitch() finds out).
  struct Stretch {
    uint32_t first = 0, at = kNoEvent;
    int64_t highest = kLowest;
    int64_t allocated_fix = 0, active_fix = 0;
  };
  std::vector<Stretch> stretches;
  uint64_t unmatched = 0;
  Totals start;  // relative totals before its first step

  // Whether `m` is the range's own map, or the pass's.
  bool owns(const AddressMap& m) const { return &m == &map; }
  // Notes a correction where a step changed allocated or active otherwise than its event says.
  void note(uint32_t step, const Totals& said, int64_t allocated_by, int64_t active_by) {
    if (static_cast<uint64_t>(allocated_by) != said.allocated || static_cast<uint64_t>(active_by) != said.active)
      corrections.push_back(Correction{step, allocated_by, active_by});
  }
};

// Totals are kept relative to the start; a block that is freed without having been allocated in the trace (or that is
// still live at the end without an alloc) was live before recording, so it adds its size to the start state. Every
// such block is in the start state and leaves it at its free, which makes the true totals the relative ones plus a
// constant: the start state's totals.
void Replay::pass(unsigned threads) {
  std::vector<OwnerRow> rows = owner_rows();
  std::vector<Range> ranges = cut(parts_for(steps_, threads, kStepsPerThread), rows);
  AddressMap live;
  if (s_.has_segments_start) adopt_segments(live);
  on_threads(ranges.size(), [&](unsigned k) { replay_range(ranges[k], k == 0 ? live : ranges[k].map); });
  on_threads(ranges.size(), [&](unsigned k) {
    if (k > 0) find_checks(ranges[k], live, std::span(ranges).subspan(1, k - 1));
  });
  for (size_t k = 1; k < ranges.size(); ++k) stitch(ranges[k], live);
  if (!s_.has_segments_start) adopt_segments(live);
  settle_initial(sum_ranges(ranges));
  on_threads(ranges.size(), [&](unsigned k) { settle_totals(ranges[k]); });
  finish(ranges);
}

// Each range's start from the ranges before it; the pass's lists from theirs. The lowest reserved and the change
// over all the steps.
std::pair<int64_t, int64_t> Replay::sum_ranges(std::vector<Range>& ranges) {
  Totals at;
  int64_t lowest_reserved = 0;
  for (Range& r : ranges) {
    r.start = at;
    lowest_reserved = std::min(lowest_reserved, static_cast<int64_t>(at.reserved) + r.lowest_reserved);
    at.allocated += r.allocated, at.active += r.active, at.reserved += r.reserved;
    corrections_.insert(corrections_.end(), r.corrections.begin(), r.corrections.end());
    segment_steps_.insert(segment_steps_.end(), r.segment_steps.begin(), r.segment_steps.end());
    std::copy_if(r.owned.begin(), r.owned.end(), std::back_inserter(owned_),
                 [](const Owned& o) { return o.id != kNoOwner; });
    unmatched_frees_ += r.unmatched;
  }
  return {lowest_reserved, static_cast<int64_t>(at.reserved)};
}

// `parts` ranges of even length, with their owner rows and the ids of their allocs.
std::vector<Replay::Range> Replay::cut(unsigned parts, const std::vector<OwnerRow>& rows) {
  std::vector<Range> ranges(parts);
  std::vector<uint32_t> allocs(parts);
  on_threads(parts, [&](unsigned k) {
    Range& r = ranges[k];
    std::tie(r.begin, r.end) = slice(steps_, k, parts);
    auto at_or_after = [&](uint32_t step) {
      return std::partition_point(rows.begin(), rows.end(), [&](const OwnerRow& o) { return o.at < step; });
    };
    r.rows = {at_or_after(r.begin), k + 1 == parts ? rows.end() : at_or_after(r.end)};
    uint32_t n = 0;
    for_each_step(r.begin, r.end, [&](uint32_t, const Event& e) __attribute__((always_inline)) {
      n += e.action == Action::alloc;
    });
    allocs[k] = n;
  });
  uint32_t ids = 0;
  for (unsigned k = 0; k < parts; ++k) ranges[k].first_id = ids, ids += allocs[k];
  for (auto* v : {&alloc_step_, &free_step_, &completed_step_}) reserve_huge(*v, ids + 1024), v->resize(ids);
  reserve_huge(stored_, steps_ / kStride + 1);
  stored_.resize((steps_ + kStride - 1) / kStride);
  return ranges;
}

// Calls step(step, event) for the range's steps and row(row) for its owner rows, in order.
template <class Step, class Row> void Replay::walk(const Range& r, Step step, Row row) const {
  uint32_t from = r.begin;
  for (const OwnerRow& o : r.rows) {
    for_each_step(from, o.at, step);
    from = o.at;
    row(o);
  }
  for_each_step(from, r.end, step);
}

// Stores the totals every kStride steps, relative to the range's start (settle_totals() adds the rest).
void Replay::replay_range(Range& r, AddressMap& map) {
  uint32_t id = r.first_id;
  r.stretches.push_back({r.begin});
  // Inlined, so that of the packed columns only those read below are decoded.
  auto replay_step = [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    if (step % kStride == 0)
      stored_[step / kStride] = Totals{static_cast<uint64_t>(r.allocated), static_cast<uint64_t>(r.active),
                                       static_cast<uint64_t>(r.reserved)};
    int64_t was_allocated = r.allocated, was_active = r.active;
    bool known = true;
    if (e.action == Action::alloc) {
      alloc(r, map, step, e.addr, e.size, id++);
    } else if (e.action == Action::free_requested || e.action == Action::free_completed) {
      known = free(r, map, step, e.action, e.addr, e.size);
    } else if (is_segment_grow(e.action)) {
      r.reserved += static_cast<int64_t>(e.size);
      r.segment_steps.push_back(step);
    } else if (is_segment_shrink(e.action)) {
      r.reserved -= static_cast<int64_t>(e.size);
      r.lowest_reserved = std::min(r.lowest_reserved, r.reserved);
      r.segment_steps.push_back(step);
    }
    if (known) r.note(step, default_delta(e), r.allocated - was_allocated, r.active - was_active);
    Range::Stretch& now = r.stretches.back();
    if (r.allocated > now.highest) now.highest = r.allocated, now.at = step;
    if (r.reserved > r.highest_reserved) r.highest_reserved = r.reserved, r.at_reserved = step;
  };
  walk(r, replay_step, [&](const OwnerRow& o) { attach(r, map, o); });
}

// The first alloc or free at an address is the step that a block which the ranges before left there (or a block
// older than the recording that one of their frees or rows found) may meet. Where it is an alloc, the range's own map
// had nothing there, so it is kept in `checks`; later allocs there find kUnknown where they need checking.
void Replay::find_checks(Range& r, const AddressMap& live, std::span<const Range> before) const {
  format_detail::AddressMap<uint8_t> touched;  // the addresses the ranges before left something at; 1 once touched
  auto carry = [&](uint64_t addr, const LiveBlock&) { touched.put(addr, 0); };
  live.for_each(carry);
  for (const Range& b : before) b.map.for_each(carry);
  auto first_touch = [&](uint64_t addr) {
    uint8_t* t = touched.find(addr);
    return t && !*t && (*t = 1);
  };
  auto step = [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    bool block_event = e.action == Action::alloc || e.action == Action::free_requested ||
                       e.action == Action::free_completed;
    if (block_event && first_touch(e.addr) && e.action == Action::alloc)
      r.checks.push_back(Open{e.addr, 0, step, kNoOwner, Action::alloc});
  };
  if (touched.size() > 0) walk(r, step, [&](const OwnerRow& o) { first_touch(s_.owners[o.row].addr); });
}

// A block live at the address is replaced; where its own map has kUnknown, the range cannot tell whether one is.
void Replay::alloc(Range& r, AddressMap& map, uint32_t step, uint64_t addr, uint64_t size, uint32_t id) {
  LiveBlock* there = map.find(addr);
  if (there && there->id != kUnknown) ++r.unmatched;
  else if (there) r.open.push_back(Open{addr, size, step, kNoOwner, Action::alloc});
  if (there) *there = LiveBlock{id, size};
  else map.put(addr, {id, size});
  alloc_step_[id] = step, free_step_[id] = kNoEvent, completed_step_[id] = kNoEvent;
  r.allocated += static_cast<int64_t>(size), r.active += static_cast<int64_t>(size);
}

// False where the range's own map has no block at the address: the free is settled by stitch(), and replayed till
// then as its event says.
bool Replay::free(Range& r, AddressMap& map, uint32_t step, Action action, uint64_t addr, uint64_t size) {
  LiveBlock* block = map.find(addr);
  if (r.owns(map) && (!block || block->id == kUnknown)) {
    r.open.push_back(Open{addr, size, step, kNoOwner, action});
    r.stretches.push_back({step});
    Totals said = default_delta(Event{.size = size, .action = action});
    r.allocated += static_cast<int64_t>(said.allocated), r.active += static_cast<int64_t>(said.active);
    if (action == Action::free_completed) map.erase(addr);  // nothing is live there after it
    else if (!block) map.put(addr, {kUnknown, 0});
    return false;
  }
  if (!block) block = adopt_pre_existing(map, step);
  if (block) release(r, map, *block, step, action, addr);
  return true;
}

void Replay::release(Range& r, AddressMap& map, LiveBlock& block, uint32_t step, Action action, uint64_t addr) {
  bool pre = block.id & kPreExisting;
  uint32_t i = block.id & ~kPreExisting;
  uint32_t& free_step = pre ? pre_existing_[i].free_step : free_step_[i];
  auto size = static_cast<int64_t>(block.size);
  if (free_step == kNoEvent) free_step = step, r.allocated -= size;
  if (action != Action::free_completed) return;
  (pre ? pre_existing_[i].completed_step : completed_step_[i]) = step;
  r.active -= size;
  map.erase(addr);
}

void Replay::attach(Range& r, AddressMap& map, const OwnerRow& o) {
  uint64_t addr = s_.owners[o.row].addr;
  LiveBlock* block = map.find(addr);
  r.owned.push_back(Owned{kNoOwner, o.row, 1});
  if (!r.owns(map) || (block && block->id != kUnknown)) return attach_owner(map, block, r.owned.back());
  r.open.push_back(Open{addr, 0, o.at, static_cast<uint32_t>(r.owned.size() - 1), Action::alloc});
  if (block) block->id = kUnknown;
  else map.put(addr, {kUnknown, 0});
}

// Replays a range's open steps and rows against the pass's map as it stands at the range's start, in order, then
// hands the map the blocks the range leaves live. The pass's map has no block at an address from an alloc the range
// checks until the next open step there.
void Replay::stitch(Range& r, AddressMap& live) {
  std::vector<Correction> known = std::exchange(r.corrections, {});
  std::vector<Open> open(r.open.size() + r.checks.size());
  auto order = [](const Open& o) { return uint64_t{o.step} * 2 + (o.owned == kNoOwner); };  // rows before steps
  std::merge(r.open.begin(), r.open.end(), r.checks.begin(), r.checks.end(), open.begin(),
             [&](const Open& a, const Open& b) { return order(a) < order(b); });
  auto stretch = r.stretches.begin();
  for (const Open& o : open) {
    if (o.owned != kNoOwner) {
      attach_owner(live, live.find(o.addr), r.owned[o.owned]);
    } else if (o.action == Action::alloc) {
      if (live.find(o.addr)) ++r.unmatched, live.erase(o.addr);
    } else {
      Totals said = default_delta(Event{.size = o.size, .action = o.action});  // what the range replayed
      int64_t was_allocated = r.allocated -= static_cast<int64_t>(said.allocated);
      int64_t was_active = r.active -= static_cast<int64_t>(said.active);
      free(r, live, o.step, o.action, o.addr, o.size);
      int64_t allocated_by = r.allocated - was_allocated, active_by = r.active - was_active;
      r.note(o.step, said, allocated_by, active_by);
      int64_t allocated_fix = stretch->allocated_fix + allocated_by - static_cast<int64_t>(said.allocated);
      int64_t active_fix = stretch->active_fix + active_by - static_cast<int64_t>(said.active);
      ++stretch, stretch->allocated_fix = allocated_fix, stretch->active_fix = active_fix;
    }
  }
  std::vector<Correction> settled = std::exchange(r.corrections, {});
  r.corrections.resize(known.size() + settled.size());
  std::merge(known.begin(), known.end(), settled.begin(), settled.end(), r.corrections.begin(),
             [](const Correction& a, const Correction& b) { return a.step < b.step; });
  r.map.for_each([&](uint64_t addr, const LiveBlock& b) {
    if (b.id != kUnknown) live.put(addr, b);
  });
  r.map = AddressMap(), r.open = {}, r.checks = {};
}

// Adds to the range's stored totals its start, the start state and what its open frees changed otherwise.
void Replay::settle_totals(Range& r) {
  auto stretch = r.stretches.begin();
  for (uint32_t j = (r.begin + kStride - 1) / kStride; j * kStride < r.end; ++j) {
    while (stretch + 1 != r.stretches.end() && stretch[1].first < j * kStride) ++stretch;
    Totals& t = stored_[j];
    t.allocated += r.start.allocated + initial_.allocated + static_cast<uint64_t>(stretch->allocated_fix);
    t.active += r.start.active + initial_.active + static_cast<uint64_t>(stretch->active_fix);
    t.reserved += r.start.reserved + initial_.reserved;
  }
}

// The device's owner rows, in order, each with the step it is attached before.
std::vector<Replay::OwnerRow> Replay::owner_rows() const {
  std::vector<OwnerRow> rows;
  uint32_t at = 0;
  for (uint32_t i = 0; i < s_.owners.size(); ++i)
    if (s_.owners[i].device == device_) rows.push_back({i, at = std::max(at, step_at_event(s_.owners[i].event))});
  return rows;
}

uint32_t Replay::step_at_event(uint64_t event) const {
  if (event_index_.empty()) return static_cast<uint32_t>(std::min<uint64_t>(event, steps_));
  auto at = std::lower_bound(event_index_.begin(), event_index_.end(), event);
  return static_cast<uint32_t>(at - event_index_.begin());
}

// The block live at the row's address now is the one it names. Where the start state is unknown (CPU), an
// address no event allocated is a block made before the recording began, live since the start.
void Replay::attach_owner(AddressMap& live, LiveBlock* block, Owned& owned) {
  Owner o = s_.owners[owned.row];
  if (!block && s_.has_segments_start) {
    ++unresolved_owners_;
    return;
  }
  if (!block) {
    initial_.allocated += o.size, initial_.active += o.size;
    live.put(o.addr, {static_cast<uint32_t>(pre_existing_.size()) | kPreExisting, o.size});
    pre_existing_.push_back(Allocation{.addr = o.addr, .size = o.size});
    block = live.find(o.addr);
  }
  owned.id = block->id;
}

// After finish() ordered the blocks: final ids, sorted, one entry per block (its first row; its distinct names).
void Replay::settle_owners(const std::vector<uint32_t>& pre_existing_rank) {
  uint32_t pre = static_cast<uint32_t>(pre_existing_rank.size());
  for (Owned& o : owned_) o.id = o.id & kPreExisting ? pre_existing_rank[o.id & ~kPreExisting] : pre + o.id;
  std::stable_sort(owned_.begin(), owned_.end(), [](const Owned& a, const Owned& b) { return a.id < b.id; });
  std::vector<Owned> one;
  std::set<uint32_t> names;
  for (const Owned& o : owned_) {
    if (one.empty() || one.back().id != o.id) one.push_back(o), names.clear();
    names.insert(s_.owners[o.row].name);
    one.back().names = static_cast<uint32_t>(names.size());
  }
  owned_ = std::move(one);
}

// A free of a block the trace never allocated: the block was live before recording began.
Replay::LiveBlock* Replay::adopt_pre_existing(AddressMap& live, uint32_t step) {
  if (s_.has_segments_start) {  // the start state is known, so this free is an inconsistency
    ++unmatched_frees_;
    return nullptr;
  }
  Event e = event(step);
  Allocation a{.addr = e.addr, .size = e.size, .stack = e.stack, .stream = e.stream};
  if (e.action == Action::free_completed) a.free_step = kBeforeStart;  // freed earlier, pending on streams
  initial_.allocated += a.free_step == kNoEvent ? a.size : 0;
  initial_.active += a.size;
  live.put(e.addr, {static_cast<uint32_t>(pre_existing_.size()) | kPreExisting, a.size});
  pre_existing_.push_back(a);
  return live.find(e.addr);
}

// Before the pass: the blocks of the known start state. After it: blocks live at the end that the trace
// never allocated, which were live all along.
void Replay::adopt_segments(AddressMap& live) {
  bool start = s_.has_segments_start;
  for (const Segment& seg : start ? s_.segments_start : s_.segments_end) {
    if (seg.device != device_) continue;
    for (const Block& b : seg.blocks) {
      if (b.state == BlockState::inactive || (!start && live.find(b.addr))) continue;
      Allocation a{.addr = b.addr, .size = b.requested_size, .stack = b.stack, .stream = seg.stream};
      bool allocated = b.state == BlockState::active_allocated;
      if (!allocated) a.free_step = kBeforeStart;
      initial_.allocated += allocated ? a.size : 0;
      initial_.active += a.size;
      if (start) live.put(b.addr, {static_cast<uint32_t>(pre_existing_.size()) | kPreExisting, a.size});
      pre_existing_.push_back(a);
    }
  }
}

// The start state's reserved bytes: the segments at the start, or those at the end less what the steps changed.
void Replay::settle_initial(std::pair<int64_t, int64_t> lowest_reserved_and_change) {
  auto [lowest_reserved, reserved_delta] = lowest_reserved_and_change;
  if (s_.has_segments_start) {
    initial_.reserved = reserved_in(s_.segments_start, device_);
  } else {
    int64_t from_end = static_cast<int64_t>(reserved_in(s_.segments_end, device_)) - reserved_delta;
    initial_.reserved = static_cast<uint64_t>(std::max(from_end, -lowest_reserved));
  }
}

// The first steps reaching the highest totals after a step (relative, as int64 bits), from zero.
Totals Replay::find_peaks(const std::vector<Range>& ranges) {
  Totals highest;
  auto higher = [](uint64_t relative, uint64_t& than) {
    return static_cast<int64_t>(relative) > static_cast<int64_t>(than) && (than = relative, true);
  };
  for (const Range& r : ranges) {
    for (const Range::Stretch& s : r.stretches) {
      uint64_t at = r.start.allocated + static_cast<uint64_t>(s.highest) + static_cast<uint64_t>(s.allocated_fix);
      if (s.at != kNoEvent && higher(at, highest.allocated)) peak_allocated_.step = s.at;
    }
    uint64_t at = r.start.reserved + static_cast<uint64_t>(r.highest_reserved);
    if (r.at_reserved != kNoEvent && higher(at, highest.reserved)) peak_reserved_.step = r.at_reserved;
  }
  return highest;
}

// Puts pre-existing blocks first (by address), adds the start state to the peaks.
void Replay::finish(const std::vector<Range>& ranges) {
  Totals highest = find_peaks(ranges);
  std::vector<uint32_t> order(pre_existing_.size()), rank(pre_existing_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return pre_existing_[a].addr < pre_existing_[b].addr; });
  std::vector<Allocation> sorted;
  sorted.reserve(order.size());
  for (uint32_t k = 0; k < order.size(); ++k) sorted.push_back(pre_existing_[order[k]]), rank[order[k]] = k;
  pre_existing_ = std::move(sorted);
  if (!owned_.empty()) settle_owners(rank);
  auto prepend = [&](std::vector<uint32_t>& v, auto field) {
    std::vector<uint32_t> front;
    for (const Allocation& a : pre_existing_) front.push_back(a.*field);
    v.insert(v.begin(), front.begin(), front.end());
  };
  prepend(alloc_step_, &Allocation::alloc_step);
  prepend(free_step_, &Allocation::free_step);
  prepend(completed_step_, &Allocation::completed_step);
  uint32_t at_allocated = peak_allocated_.step, at_reserved = peak_reserved_.step;
  peak_allocated_ = Peak{initial_.allocated + highest.allocated, at_allocated, time_of(at_allocated)};
  peak_reserved_ = Peak{initial_.reserved + highest.reserved, at_reserved, time_of(at_reserved)};
}

}  // namespace memrec
