#include "memrec/replay.h"

#include "memrec/huge_pages.h"

#include <algorithm>
#include <bit>
#include <set>
#include <utility>

namespace memrec {
namespace {

bool is_segment_grow(Action a) { return a == Action::segment_alloc || a == Action::segment_map; }
bool is_segment_shrink(Action a) { return a == Action::segment_free || a == Action::segment_unmap; }

uint64_t reserved_in(const std::vector<Segment>& segments, uint8_t device) {
  uint64_t total = 0;
  for (const Segment& seg : segments)
    if (seg.device == device) total += seg.total_size;
  return total;
}

}  // namespace

// Marks ids into pre_existing_ (in the address map) during the pass.
constexpr uint32_t kPreExisting = uint32_t{1} << 31;

// Block address -> allocation id. Open addressing with linear probing and backward-shift deletion:
// the replay does one lookup per event, and std::unordered_map's node allocations dominated it.
class Replay::AddressMap {
 public:
  AddressMap() { rehash(1024); }

  uint32_t* find(uint64_t key) {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (!used_[i]) return nullptr;
      if (keys_[i] == key) return &values_[i];
    }
  }

  // Returns the previous value, or kNoEvent when the key was new.
  uint32_t put(uint64_t key, uint32_t value) {
    if (2 * (size_ + 1) > keys_.size()) rehash(keys_.size() * 2);
    size_t i = slot(key);
    for (; used_[i]; i = (i + 1) & mask_)
      if (keys_[i] == key) return std::exchange(values_[i], value);
    keys_[i] = key, values_[i] = value, used_[i] = 1, ++size_;
    return kNoEvent;
  }

  void erase(uint64_t key) {
    size_t i = slot(key);
    while (used_[i] && keys_[i] != key) i = (i + 1) & mask_;
    if (!used_[i]) return;
    // Shift later members of the probe run back so lookups never cross a hole.
    for (size_t j = (i + 1) & mask_; used_[j]; j = (j + 1) & mask_) {
      size_t home = slot(keys_[j]);
      bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) keys_[i] = keys_[j], values_[i] = values_[j], i = j;
    }
    used_[i] = 0;
    --size_;
  }

  template <class F>
  void for_each(F f) const {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (used_[i]) f(keys_[i], values_[i]);
  }

 private:
  size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }

  void rehash(size_t capacity) {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<uint32_t> values = std::move(values_);
    std::vector<uint8_t> used = std::move(used_);
    keys_.assign(capacity, 0), values_.assign(capacity, 0), used_.assign(capacity, 0);
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (used[i]) put(keys[i], values[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> values_;
  std::vector<uint8_t> used_;
  size_t mask_ = 0, size_ = 0;
  int shift_ = 0;
};

// One forward pass. Totals are kept relative to the start; a block that is freed without having been
// allocated in the trace (or that is still live at the end without an alloc) was live before recording,
// so it adds its size to the start state. Every such block is in the start state and leaves it at its free,
// which makes the true totals the relative ones plus a constant: the start state's totals.
Replay::Replay(const Snapshot& s, uint8_t device) : s_(s), device_(device) {
  reserve_huge(events_, s.events.size());
  for (uint32_t i = 0; i < s.events.size(); ++i)
    if (s.events[i].device == device) events_.push_back(i);

  reserve_huge(allocations_, events_.size() / 2 + 1024);  // about one alloc per three events: no regrowth
  reserve_huge(after_, events_.size());
  AddressMap live;
  if (s.has_segments_start) adopt_segments(live);
  int64_t allocated = 0, active = 0, reserved = 0, lowest_reserved = 0;
  for (uint32_t step = 0; step < events_.size(); ++step) {
    uint32_t ev = events_[step];
    const Event& e = s.events[ev];
    if (e.action == Action::alloc) {
      if (live.put(e.addr, static_cast<uint32_t>(allocations_.size())) != kNoEvent) ++unmatched_frees_;
      allocations_.push_back(Allocation{.addr = e.addr, .size = e.size, .alloc_step = step, .stack = e.stack,
                                        .scope = e.scope, .event = ev, .stream = e.stream});
      allocated += static_cast<int64_t>(e.size), active += static_cast<int64_t>(e.size);
    } else if (e.action == Action::free_requested || e.action == Action::free_completed) {
      uint32_t* id = live.find(e.addr);
      if (!id) id = adopt_pre_existing(live, e);
      if (!id) continue;
      Allocation& a = *id & kPreExisting ? pre_existing_[*id & ~kPreExisting] : allocations_[*id];
      if (a.free_step == kNoEvent) a.free_step = step, allocated -= static_cast<int64_t>(a.size);
      if (e.action == Action::free_completed) {
        a.completed_step = step, active -= static_cast<int64_t>(a.size);
        live.erase(e.addr);
      }
    } else if (is_segment_grow(e.action)) {
      reserved += static_cast<int64_t>(e.size);
    } else if (is_segment_shrink(e.action)) {
      reserved -= static_cast<int64_t>(e.size);
      lowest_reserved = std::min(lowest_reserved, reserved);
    }
    after_.push_back(Totals{static_cast<uint64_t>(allocated), static_cast<uint64_t>(active),
                            static_cast<uint64_t>(reserved)});
  }
  if (!s.has_segments_start) adopt_segments(live);
  finish(reserved, lowest_reserved);
}

// A free of a block the trace never allocated: the block was live before recording began.
uint32_t* Replay::adopt_pre_existing(AddressMap& live, const Event& e) {
  if (s_.has_segments_start) {  // the start state is known, so this free is an inconsistency
    ++unmatched_frees_;
    return nullptr;
  }
  Allocation a{.addr = e.addr, .size = e.size, .stack = e.stack, .stream = e.stream};
  if (e.action == Action::free_completed) a.free_step = kBeforeStart;  // freed earlier, pending on streams
  initial_.allocated += a.free_step == kNoEvent ? a.size : 0;
  initial_.active += a.size;
  live.put(e.addr, static_cast<uint32_t>(pre_existing_.size()) | kPreExisting);
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
      if (start) live.put(b.addr, static_cast<uint32_t>(pre_existing_.size()) | kPreExisting);
      pre_existing_.push_back(a);
    }
  }
}

// Puts pre-existing blocks first (by address), adds the start state to every total, finds the peaks.
void Replay::finish(int64_t reserved_delta, int64_t lowest_reserved) {
  std::sort(pre_existing_.begin(), pre_existing_.end(),
            [](const Allocation& a, const Allocation& b) { return a.addr < b.addr; });
  allocations_.insert(allocations_.begin(), pre_existing_.begin(), pre_existing_.end());
  pre_existing_ = {};

  if (s_.has_segments_start) {
    initial_.reserved = reserved_in(s_.segments_start, device_);
  } else {
    int64_t from_end = static_cast<int64_t>(reserved_in(s_.segments_end, device_)) - reserved_delta;
    initial_.reserved = static_cast<uint64_t>(std::max(from_end, -lowest_reserved));
  }
  peak_allocated_ = Peak{initial_.allocated, kNoEvent, time_of(kNoEvent)};
  peak_reserved_ = Peak{initial_.reserved, kNoEvent, time_of(kNoEvent)};
  for (uint32_t step = 0; step < after_.size(); ++step) {
    Totals& t = after_[step];
    t.allocated += initial_.allocated, t.active += initial_.active, t.reserved += initial_.reserved;
    if (t.allocated > peak_allocated_.bytes) peak_allocated_ = Peak{t.allocated, step, time_of(step)};
    if (t.reserved > peak_reserved_.bytes) peak_reserved_ = Peak{t.reserved, step, time_of(step)};
  }
}

std::vector<uint32_t> Replay::live_after(uint32_t step) const {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < allocations_.size(); ++i)
    if (allocations_[i].live_after(step)) ids.push_back(i);
  return ids;
}

int64_t Replay::time_of(uint32_t step) const {
  if (events_.empty()) return 0;
  return s_.events[events_[step == kNoEvent ? 0 : step]].time_ns;
}

std::vector<uint8_t> devices_of(const Snapshot& s) {
  std::set<uint8_t> devices;
  for (const Event& e : s.events) devices.insert(e.device);
  for (const Segment& seg : s.segments_end) devices.insert(seg.device);
  for (const Segment& seg : s.segments_start) devices.insert(seg.device);
  return {devices.begin(), devices.end()};
}

}  // namespace memrec
