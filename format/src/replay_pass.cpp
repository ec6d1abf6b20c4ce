// Replay's pass over a device's steps, on several threads. The steps are cut into ranges, replayed side by side:
// the first against the pass's address map, each other one against a map of its own, which tells most of its frees
// which block they free. What a range cannot tell alone (a free or an owner row at an address whose block came
// before the range, an alloc where such a block may still be live) it keeps in order; those are then settled range
// after range against the pass's map, as the serial pass would at their step. Last, each range walks its steps
// again from the totals the ranges before it reach, to store the totals and find its peaks.
#include <algorithm>
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
// LiveBlock::id in a range's own map: nothing is live at the address (the range freed what was there)...
constexpr uint32_t kGone = kNoEvent;
// ...what is live there depends on the ranges before (the range freed or named a block it did not allocate).
constexpr uint32_t kUnknown = kNoEvent - 1;
// Fewer steps per range than this and another thread does not pay.
constexpr size_t kStepsPerRange = size_t{1} << 19;

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
  AddressMap map;                  // its own: the blocks it allocated, kGone and kUnknown
  std::vector<Open> open;          // in order
  std::vector<Correction> corrections;
  std::vector<Owned> owned;  // an entry per row, in order; id kNoOwner where no block
  std::vector<uint32_t> segment_steps;
  int64_t allocated = 0, active = 0, reserved = 0;  // the change over the range
  int64_t lowest_reserved = 0;                      // relative to its start
  uint64_t unmatched = 0;
  Totals start;    // relative totals before its first step
  Totals highest;  // of the relative totals after its steps, from zero, and the first step reaching it
  uint32_t at_allocated = kNoEvent, at_reserved = kNoEvent;

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
  std::vector<Range> ranges = cut(std::min(parts_for(steps_, threads, kStepsPerRange), std::max(steps_, 1u)), rows);
  AddressMap live;
  if (s_.has_segments_start) adopt_segments(live);
  on_threads(ranges.size(), [&](unsigned k) { replay_range(ranges[k], k == 0 ? live : ranges[k].map); });
  for (size_t k = 1; k < ranges.size(); ++k) stitch(ranges[k], live);
  if (!s_.has_segments_start) adopt_segments(live);
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
  settle_initial(static_cast<int64_t>(at.reserved), lowest_reserved);
  reserve_huge(stored_, steps_ / kStride + 1);
  stored_.resize((steps_ + kStride - 1) / kStride);
  on_threads(ranges.size(), [&](unsigned k) { total_range(ranges[k]); });
  Totals highest;  // relative, as int64 bits; the earliest range reaching the highest holds the peak
  for (const Range& r : ranges) {
    if (static_cast<int64_t>(r.highest.allocated) > static_cast<int64_t>(highest.allocated))
      highest.allocated = r.highest.allocated, peak_allocated_.step = r.at_allocated;
    if (static_cast<int64_t>(r.highest.reserved) > static_cast<int64_t>(highest.reserved))
      highest.reserved = r.highest.reserved, peak_reserved_.step = r.at_reserved;
  }
  finish(highest);
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
  return ranges;
}

void Replay::replay_range(Range& r, AddressMap& map) {
  uint32_t id = r.first_id;
  // Inlined, so that of the packed columns only those read below are decoded.
  auto replay_step = [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
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
  };
  // Owner rows are attached between the steps they came between; without them the loop is one run.
  uint32_t from = r.begin;
  for (const OwnerRow& o : r.rows) {
    for_each_step(from, o.at, replay_step);
    from = o.at;
    attach(r, map, o);
  }
  for_each_step(from, r.end, replay_step);
}

// A block live at the address is replaced; in its own map, a range cannot tell whether one is there unless it
// allocated or freed the last block there.
void Replay::alloc(Range& r, AddressMap& map, uint32_t step, uint64_t addr, uint64_t size, uint32_t id) {
  LiveBlock* there = map.find(addr);
  if (there && there->id < kUnknown) ++r.unmatched;
  else if (r.owns(map) && (!there || there->id == kUnknown)) r.open.push_back(Open{addr, size, step, kNoOwner, Action::alloc});
  if (there) *there = LiveBlock{id, size};
  else map.put(addr, {id, size});
  alloc_step_[id] = step, free_step_[id] = kNoEvent, completed_step_[id] = kNoEvent;
  r.allocated += static_cast<int64_t>(size), r.active += static_cast<int64_t>(size);
}

// False where the range's own map has no block at the address: the free is settled by stitch().
bool Replay::free(Range& r, AddressMap& map, uint32_t step, Action action, uint64_t addr, uint64_t size) {
  LiveBlock* block = map.find(addr);
  if (r.owns(map) && (!block || block->id >= kUnknown)) {
    r.open.push_back(Open{addr, size, step, kNoOwner, action});
    LiveBlock after{action == Action::free_completed ? kGone : kUnknown, 0};
    if (block) *block = after;
    else map.put(addr, after);
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
  if (r.owns(map)) block.id = kGone;
  else map.erase(addr);
}

void Replay::attach(Range& r, AddressMap& map, const OwnerRow& o) {
  uint64_t addr = s_.owners[o.row].addr;
  LiveBlock* block = map.find(addr);
  r.owned.push_back(Owned{kNoOwner, o.row, 1});
  if (!r.owns(map) || (block && block->id < kUnknown)) return attach_owner(map, block, r.owned.back());
  r.open.push_back(Open{addr, 0, o.at, static_cast<uint32_t>(r.owned.size() - 1), Action::alloc});
  if (block) block->id = kUnknown;
  else map.put(addr, {kUnknown, 0});
}

// Replays a range's open steps and rows against the pass's map as it stands at the range's start, in order, then
// hands the map the blocks the range leaves live. Its own map has no block at an open step's address, and the pass's
// map has none there between an open alloc and the next open step.
void Replay::stitch(Range& r, AddressMap& live) {
  std::vector<Correction> known = std::exchange(r.corrections, {});
  for (const Open& o : r.open) {
    if (o.owned != kNoOwner) {
      attach_owner(live, live.find(o.addr), r.owned[o.owned]);
    } else if (o.action == Action::alloc) {
      if (live.find(o.addr)) ++r.unmatched, live.erase(o.addr);
    } else {
      int64_t was_allocated = r.allocated, was_active = r.active;
      free(r, live, o.step, o.action, o.addr, o.size);
      r.note(o.step, default_delta(Event{.size = o.size, .action = o.action}), r.allocated - was_allocated,
             r.active - was_active);
    }
  }
  std::vector<Correction> settled = std::exchange(r.corrections, {});
  r.corrections.resize(known.size() + settled.size());
  std::merge(known.begin(), known.end(), settled.begin(), settled.end(), r.corrections.begin(),
             [](const Correction& a, const Correction& b) { return a.step < b.step; });
  r.map.for_each([&](uint64_t addr, const LiveBlock& b) {
    if (b.id < kUnknown) live.put(addr, b);
  });
  r.map = AddressMap(), r.open = {};
}

// Stores the range's totals every kStride steps and finds its peaks.
void Replay::total_range(Range& r) {
  Totals t = r.start;
  const Correction* next = first_correction(r.begin);
  for_each_step(r.begin, r.end, [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    if (step % kStride == 0)
      stored_[step / kStride] = Totals{t.allocated + initial_.allocated, t.active + initial_.active,
                                       t.reserved + initial_.reserved};
    apply(step, e, t, next);
    if (static_cast<int64_t>(t.allocated) > static_cast<int64_t>(r.highest.allocated))
      r.highest.allocated = t.allocated, r.at_allocated = step;
    if (static_cast<int64_t>(t.reserved) > static_cast<int64_t>(r.highest.reserved))
      r.highest.reserved = t.reserved, r.at_reserved = step;
  });
}

// The device's owner rows, in order, each with the step it is attached before.
std::vector<Replay::OwnerRow> Replay::owner_rows() const {
  std::vector<OwnerRow> rows;
  uint32_t at = 0;
  for (uint32_t i = 0; i < s_.owners.size(); ++i)
    if (s_.owners[i].device == device_) rows.push_back({i, at = std::max(at, step_at_event(s_.owners[i].event))});
  return rows;
}

// The first step whose event comes at or after Snapshot::events[event].
uint32_t Replay::step_at_event(uint64_t event) const {
  if (event_index_.empty()) return static_cast<uint32_t>(std::min<uint64_t>(event, steps_));
  return static_cast<uint32_t>(std::lower_bound(event_index_.begin(), event_index_.end(), event) - event_index_.begin());
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
void Replay::settle_initial(int64_t reserved_delta, int64_t lowest_reserved) {
  if (s_.has_segments_start) {
    initial_.reserved = reserved_in(s_.segments_start, device_);
  } else {
    int64_t from_end = static_cast<int64_t>(reserved_in(s_.segments_end, device_)) - reserved_delta;
    initial_.reserved = static_cast<uint64_t>(std::max(from_end, -lowest_reserved));
  }
}

// Puts pre-existing blocks first (by address), adds the start state to the peaks.
void Replay::finish(const Totals& highest) {
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
