#include "memrec/replay.h"

#include "memrec/huge_pages.h"

#include "address_map.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <set>

namespace memrec {
namespace {

uint64_t reserved_in(const std::vector<Segment>& segments, uint8_t device) {
  uint64_t total = 0;
  for (const Segment& seg : segments)
    if (seg.device == device) total += seg.total_size;
  return total;
}

}  // namespace

// Marks ids into pre_existing_ (in the address map) during the pass.
constexpr uint32_t kPreExisting = uint32_t{1} << 31;

// Block address -> allocation id and size; the size rides along so that a free need not look up its alloc event.
class Replay::AddressMap : public format_detail::AddressMap<LiveBlock> {};

uint32_t Allocations::size() const { return static_cast<uint32_t>(r_->alloc_steps().size()); }
Allocation Allocations::operator[](uint32_t id) const { return r_->allocation(id); }
Allocation Allocations::iterator::operator*() const { return r_->allocation(id_); }

// One forward pass. Totals are kept relative to the start; a block that is freed without having been
// allocated in the trace (or that is still live at the end without an alloc) was live before recording,
// so it adds its size to the start state. Every such block is in the start state and leaves it at its free,
// which makes the true totals the relative ones plus a constant: the start state's totals.
Replay::Replay(const Snapshot& s, uint8_t device) : s_(s), device_(device) {
  index_events();
  pass();
}

void Replay::index_events() {
  size_t mine = 0;  // for_each decodes the device column alone
  s_.events.for_each(0, s_.events.size(), [&](size_t, const Event& e) __attribute__((always_inline)) {
    mine += e.device == device_;
  });
  steps_ = static_cast<uint32_t>(mine);
  if (mine == s_.events.size()) return;  // steps are event indices
  reserve_huge(event_index_, mine);
  for (uint32_t i = 0; i < s_.events.size(); ++i)
    if (s_.events[i].device == device_) event_index_.push_back(i);
}

void Replay::pass() {
  for (auto* v : {&alloc_step_, &free_step_, &completed_step_}) reserve_huge(*v, steps_ / 2 + 1024);
  reserve_huge(stored_, steps_ / kStride + 1);
  AddressMap live;
  if (s_.has_segments_start) adopt_segments(live);
  int64_t allocated = 0, active = 0, reserved = 0, lowest_reserved = 0;
  Totals highest;  // relative, as int64 bits
  // Inlined, so that of the packed columns only those read below are decoded.
  auto replay_step = [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    if (step % kStride == 0)
      stored_.push_back(Totals{static_cast<uint64_t>(allocated), static_cast<uint64_t>(active),
                               static_cast<uint64_t>(reserved)});
    int64_t was_allocated = allocated, was_active = active;
    if (e.action == Action::alloc) {
      if (live.put(e.addr, {static_cast<uint32_t>(alloc_step_.size()), e.size})) ++unmatched_frees_;
      alloc_step_.push_back(step), free_step_.push_back(kNoEvent), completed_step_.push_back(kNoEvent);
      allocated += static_cast<int64_t>(e.size), active += static_cast<int64_t>(e.size);
    } else if (e.action == Action::free_requested || e.action == Action::free_completed) {
      LiveBlock* block = live.find(e.addr);
      if (!block) block = adopt_pre_existing(live, step);
      if (block) {
        bool pre = block->id & kPreExisting;
        uint32_t i = block->id & ~kPreExisting;
        uint32_t& free_step = pre ? pre_existing_[i].free_step : free_step_[i];
        uint64_t size = block->size;
        if (free_step == kNoEvent) free_step = step, allocated -= static_cast<int64_t>(size);
        if (e.action == Action::free_completed) {
          (pre ? pre_existing_[i].completed_step : completed_step_[i]) = step;
          active -= static_cast<int64_t>(size);
          live.erase(e.addr);
        }
      }
    } else if (is_segment_grow(e.action)) {
      reserved += static_cast<int64_t>(e.size);
      segment_steps_.push_back(step);
    } else if (is_segment_shrink(e.action)) {
      reserved -= static_cast<int64_t>(e.size);
      lowest_reserved = std::min(lowest_reserved, reserved);
      segment_steps_.push_back(step);
    }
    Totals d = default_delta(e);
    auto moved = [](int64_t now, int64_t was) { return static_cast<uint64_t>(now) - static_cast<uint64_t>(was); };
    if (moved(allocated, was_allocated) != d.allocated || moved(active, was_active) != d.active)
      corrections_.push_back(Correction{step, allocated - was_allocated, active - was_active});
    note_peaks(step, Totals{static_cast<uint64_t>(allocated), 0, static_cast<uint64_t>(reserved)}, highest);
  };
  // Owner rows are attached between the steps they came between; without them the loop is one run.
  uint32_t from = 0;
  for (uint32_t row : owner_rows()) {
    uint32_t at = std::max(from, step_at_event(s_.owners[row].event));
    for_each_step(from, at, replay_step);
    from = at;
    attach_owner(live, row);
  }
  for_each_step(from, steps_, replay_step);
  if (!s_.has_segments_start) adopt_segments(live);
  finish(reserved, lowest_reserved, highest);
}

std::vector<uint32_t> Replay::owner_rows() const {
  std::vector<uint32_t> rows;
  for (uint32_t i = 0; i < s_.owners.size(); ++i)
    if (s_.owners[i].device == device_) rows.push_back(i);
  return rows;
}

// The first step whose event comes at or after Snapshot::events[event].
uint32_t Replay::step_at_event(uint64_t event) const {
  if (event_index_.empty()) return static_cast<uint32_t>(std::min<uint64_t>(event, steps_));
  return static_cast<uint32_t>(std::lower_bound(event_index_.begin(), event_index_.end(), event) - event_index_.begin());
}

// The block live at the row's address now is the one it names. Where the start state is unknown (CPU), an
// address no event allocated is a block made before the recording began, live since the start.
void Replay::attach_owner(AddressMap& live, uint32_t row) {
  Owner o = s_.owners[row];
  LiveBlock* block = live.find(o.addr);
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
  owned_.push_back({block->id, row, 1});
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

uint32_t Replay::owner_of(uint32_t id) const {
  auto it = std::lower_bound(owned_.begin(), owned_.end(), id, [](const Owned& o, uint32_t v) { return o.id < v; });
  return it != owned_.end() && it->id == id ? it->row : kNoOwner;
}

uint32_t Replay::owner_names(uint32_t id) const {
  auto it = std::lower_bound(owned_.begin(), owned_.end(), id, [](const Owned& o, uint32_t v) { return o.id < v; });
  return it != owned_.end() && it->id == id ? it->names : 0;
}

// Peaks of the relative totals (int64 bits): the start state's constant does not move where they are.
void Replay::note_peaks(uint32_t step, const Totals& relative, Totals& highest) {
  if (static_cast<int64_t>(relative.allocated) > static_cast<int64_t>(highest.allocated))
    highest.allocated = relative.allocated, peak_allocated_.step = step;
  if (static_cast<int64_t>(relative.reserved) > static_cast<int64_t>(highest.reserved))
    highest.reserved = relative.reserved, peak_reserved_.step = step;
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

// Puts pre-existing blocks first (by address), adds the start state to the stored totals and peaks.
void Replay::finish(int64_t reserved_delta, int64_t lowest_reserved, const Totals& highest) {
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

  if (s_.has_segments_start) {
    initial_.reserved = reserved_in(s_.segments_start, device_);
  } else {
    int64_t from_end = static_cast<int64_t>(reserved_in(s_.segments_end, device_)) - reserved_delta;
    initial_.reserved = static_cast<uint64_t>(std::max(from_end, -lowest_reserved));
  }
  for (Totals& t : stored_)
    t.allocated += initial_.allocated, t.active += initial_.active, t.reserved += initial_.reserved;
  uint32_t at_allocated = peak_allocated_.step, at_reserved = peak_reserved_.step;
  peak_allocated_ = Peak{initial_.allocated + highest.allocated, at_allocated, time_of(at_allocated)};
  peak_reserved_ = Peak{initial_.reserved + highest.reserved, at_reserved, time_of(at_reserved)};
}

const Replay::Correction* Replay::first_correction(uint32_t step) const {
  auto it = std::lower_bound(corrections_.begin(), corrections_.end(), step,
                             [](const Correction& c, uint32_t s) { return c.step < s; });
  return corrections_.data() + (it - corrections_.begin());
}

Totals Replay::after(uint32_t step) const {
  if (step == kNoEvent) return initial_;
  if (step >= steps_) throw std::out_of_range("Replay::after: no such step");
  Totals t;
  for_each_after(step, step + 1, [&](uint32_t, const Totals& at) { t = at; });
  return t;
}

Allocation Replay::allocation(uint32_t id) const {
  if (id < pre_existing_.size()) {
    Allocation a = pre_existing_[id];
    a.free_step = free_step_[id], a.completed_step = completed_step_[id];
    return a;
  }
  uint32_t ev = event_of(alloc_step_[id]);
  const Event& e = s_.events[ev];
  return Allocation{.addr = e.addr, .size = e.size, .alloc_step = alloc_step_[id], .free_step = free_step_[id],
                    .completed_step = completed_step_[id], .stack = e.stack, .scope = e.scope, .event = ev,
                    .stream = e.stream};
}

std::vector<uint32_t> Replay::live_after(uint32_t step) const {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < alloc_step_.size(); ++i)
    if (live_after_step(alloc_step_[i], free_step_[i], step)) ids.push_back(i);
  return ids;
}

namespace {

std::vector<uint8_t> seen_devices(const std::array<bool, 256>& seen) {
  std::vector<uint8_t> devices;
  for (int d = 0; d < 256; ++d)
    if (seen[d]) devices.push_back(static_cast<uint8_t>(d));
  return devices;
}

}  // namespace

std::vector<uint8_t> devices_with_events(const Snapshot& s) {
  std::array<bool, 256> seen{};
  for (const Event& e : s.events) seen[e.device] = true;
  return seen_devices(seen);
}

std::vector<uint8_t> devices_of(const Snapshot& s, const std::vector<uint8_t>& with_events) {
  std::array<bool, 256> seen{};
  for (uint8_t d : with_events) seen[d] = true;
  for (const Segment& seg : s.segments_end) seen[seg.device] = true;
  for (const Segment& seg : s.segments_start) seen[seg.device] = true;
  return seen_devices(seen);
}

std::vector<uint8_t> devices_of(const Snapshot& s) { return devices_of(s, devices_with_events(s)); }

}  // namespace memrec
