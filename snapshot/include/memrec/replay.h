// Replays one device's events to reproduce the allocator state at every instant.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

inline constexpr uint32_t kNoEvent = std::numeric_limits<uint32_t>::max();
// Allocation::free_step of a block the program had already freed (pending on streams) when recording began.
inline constexpr uint32_t kBeforeStart = kNoEvent - 1;

// Byte totals the way the caching allocator's DeviceStats count them:
// allocated drops at free_requested, active at free_completed, reserved follows segment events.
struct Totals {
  uint64_t allocated = 0;
  uint64_t active = 0;
  uint64_t reserved = 0;
  bool operator==(const Totals&) const = default;
};

struct Peak {
  uint64_t bytes = 0;
  uint32_t step = kNoEvent;  // position in Replay::events() after which the peak holds; kNoEvent = at start
  int64_t time_ns = 0;
};

// One block's life. Blocks live before recording began have alloc_step == kNoEvent.
struct Allocation {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t alloc_step = kNoEvent;
  uint32_t free_step = kNoEvent;       // free_requested; kNoEvent = still allocated at the end
  uint32_t completed_step = kNoEvent;  // free_completed
  uint32_t stack = 0;
  uint32_t scope = 0;
  uint32_t event = kNoEvent;  // index into Snapshot::events of the alloc
  uint16_t stream = 0;

  // Live (allocated) right after step k (kNoEvent = before the first event).
  bool live_after(uint32_t k) const {
    if (free_step == kBeforeStart) return false;
    bool born = alloc_step == kNoEvent || (k != kNoEvent && alloc_step <= k);
    bool dead = free_step != kNoEvent && k != kNoEvent && free_step <= k;
    return born && !dead;
  }
};

class Replay {
 public:
  // Inconsistencies (a free of an unknown block) do not throw: they are counted in unmatched_frees().
  Replay(const Snapshot& s, uint8_t device);

  // Indices into Snapshot::events of this device's events, in order; a "step" is a position in this list.
  std::span<const uint32_t> events() const { return events_; }
  uint8_t device() const { return device_; }
  const Totals& initial() const { return initial_; }
  const Totals& after(uint32_t step) const { return step == kNoEvent ? initial_ : after_.at(step); }
  const Peak& peak_allocated() const { return peak_allocated_; }
  const Peak& peak_reserved() const { return peak_reserved_; }
  // Every block, pre-existing ones first, then in allocation order.
  const std::vector<Allocation>& allocations() const { return allocations_; }
  // Ids (into allocations()) of the blocks allocated right after `step`.
  std::vector<uint32_t> live_after(uint32_t step) const;
  uint64_t unmatched_frees() const { return unmatched_frees_; }
  int64_t time_of(uint32_t step) const;

 private:
  class AddressMap;
  uint32_t* adopt_pre_existing(AddressMap& live, const Event& e);
  void adopt_segments(AddressMap& live);
  void finish(int64_t reserved_delta, int64_t lowest_reserved);

  const Snapshot& s_;
  uint8_t device_;
  std::vector<uint32_t> events_;
  Totals initial_;
  std::vector<Totals> after_;
  Peak peak_allocated_, peak_reserved_;
  std::vector<Allocation> allocations_;
  std::vector<Allocation> pre_existing_;  // live before recording; moved to the front of allocations_ at the end
  uint64_t unmatched_frees_ = 0;
};

// Devices that have events or segments, ascending.
std::vector<uint8_t> devices_of(const Snapshot& s);

}  // namespace memrec
