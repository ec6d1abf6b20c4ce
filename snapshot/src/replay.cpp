#include "memrec/replay.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace memrec {
namespace {

// A block known to be live when recording began.
struct Initial {
  uint64_t size = 0;
  uint32_t stack = 0;
  uint16_t stream = 0;
  bool allocated = true;  // false: freed by the program, waiting on stream uses (active_pending_free)
};
using InitialMap = std::unordered_map<uint64_t, Initial>;

bool is_segment_grow(Action a) { return a == Action::segment_alloc || a == Action::segment_map; }
bool is_segment_shrink(Action a) { return a == Action::segment_free || a == Action::segment_unmap; }

void add_blocks(const std::vector<Segment>& segments, uint8_t device, InitialMap& live, uint64_t& reserved) {
  for (const Segment& seg : segments) {
    if (seg.device != device) continue;
    reserved += seg.total_size;
    for (const Block& b : seg.blocks) {
      if (b.state == BlockState::inactive) continue;
      live[b.addr] = Initial{b.requested_size, b.stack, seg.stream,
                             b.state == BlockState::active_allocated};
    }
  }
}

// Undo the trace, last event first, starting from the end state: what is left was live at the start.
void rewind(const Snapshot& s, std::span<const uint32_t> events, InitialMap& live) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const Event& e = s.events[*it];
    switch (e.action) {
      case Action::alloc:
        live.erase(e.addr);
        break;
      case Action::free_requested: {
        auto [pos, fresh] = live.try_emplace(e.addr, Initial{e.size, e.stack, e.stream, true});
        pos->second.allocated = true;
        break;
      }
      case Action::free_completed:
        live[e.addr] = Initial{e.size, e.stack, e.stream, false};
        break;
      default:
        break;
    }
  }
}

// Reserved bytes at the start: the end state minus the trace's net growth, and never so low that
// a segment_free would take the running total below zero.
uint64_t initial_reserved(const Snapshot& s, std::span<const uint32_t> events, uint64_t reserved_end,
                          bool from_end) {
  int64_t running = 0, lowest = 0;
  for (uint32_t i : events) {
    const Event& e = s.events[i];
    if (is_segment_grow(e.action)) running += static_cast<int64_t>(e.size);
    if (is_segment_shrink(e.action)) running -= static_cast<int64_t>(e.size);
    lowest = std::min(lowest, running);
  }
  int64_t start = from_end ? static_cast<int64_t>(reserved_end) - running : static_cast<int64_t>(reserved_end);
  return static_cast<uint64_t>(std::max(start, -lowest));
}

}  // namespace

Replay::Replay(const Snapshot& s, uint8_t device) : s_(s), device_(device) {
  for (uint32_t i = 0; i < s.events.size(); ++i)
    if (s.events[i].device == device) events_.push_back(i);

  InitialMap initial_live;
  uint64_t reserved = 0;
  if (s.has_segments_start) {
    add_blocks(s.segments_start, device, initial_live, reserved);
  } else {
    add_blocks(s.segments_end, device, initial_live, reserved);
    rewind(s, events_, initial_live);
  }
  initial_.reserved = initial_reserved(s, events_, reserved, !s.has_segments_start);

  // Pre-existing blocks first, by address, so ids are deterministic.
  std::vector<std::pair<uint64_t, Initial>> sorted(initial_live.begin(), initial_live.end());
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::unordered_map<uint64_t, uint32_t> live;  // addr -> allocation id
  live.reserve(sorted.size() * 2 + 1024);
  for (auto& [addr, b] : sorted) {
    Allocation a{.addr = addr, .size = b.size, .stack = b.stack, .stream = b.stream};
    if (b.allocated) initial_.allocated += b.size;
    else a.free_step = kBeforeStart;
    initial_.active += b.size;
    live[addr] = static_cast<uint32_t>(allocations_.size());
    allocations_.push_back(a);
  }

  Totals t = initial_;
  peak_allocated_ = Peak{t.allocated, kNoEvent, time_of(kNoEvent)};
  peak_reserved_ = Peak{t.reserved, kNoEvent, time_of(kNoEvent)};
  after_.reserve(events_.size());
  for (uint32_t step = 0; step < events_.size(); ++step) {
    uint32_t ev = events_[step];
    const Event& e = s.events[ev];
    switch (e.action) {
      case Action::alloc: {
        auto [pos, fresh] = live.try_emplace(e.addr, 0);
        if (!fresh) ++unmatched_frees_;  // the old block was never freed in the trace
        pos->second = static_cast<uint32_t>(allocations_.size());
        allocations_.push_back(Allocation{.addr = e.addr, .size = e.size, .alloc_step = step, .stack = e.stack,
                                          .scope = e.scope, .event = ev, .stream = e.stream});
        t.allocated += e.size;
        t.active += e.size;
        break;
      }
      case Action::free_requested:
      case Action::free_completed: {
        auto pos = live.find(e.addr);
        if (pos == live.end()) {
          ++unmatched_frees_;
          break;
        }
        Allocation& a = allocations_[pos->second];
        if (a.free_step == kNoEvent) {
          a.free_step = step;
          t.allocated -= a.size;
        }
        if (e.action == Action::free_completed) {
          a.completed_step = step;
          t.active -= a.size;
          live.erase(pos);
        }
        break;
      }
      default:
        if (is_segment_grow(e.action)) t.reserved += e.size;
        if (is_segment_shrink(e.action)) t.reserved -= std::min(t.reserved, e.size);
        break;
    }
    after_.push_back(t);
    if (t.allocated > peak_allocated_.bytes) peak_allocated_ = Peak{t.allocated, step, e.time_ns};
    if (t.reserved > peak_reserved_.bytes) peak_reserved_ = Peak{t.reserved, step, e.time_ns};
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
