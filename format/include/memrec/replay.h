// Replays one device's events to reproduce the allocator state at every instant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

inline constexpr uint32_t kNoEvent = std::numeric_limits<uint32_t>::max();
// Replay::owner_of a block nothing names.
inline constexpr uint32_t kNoOwner = std::numeric_limits<uint32_t>::max();
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
  uint32_t step = kNoEvent;  // the step after which the peak holds; kNoEvent = at start
  int64_t time_ns = 0;
};

inline bool is_segment_grow(Action a) { return a == Action::segment_alloc || a == Action::segment_map; }
inline bool is_segment_shrink(Action a) { return a == Action::segment_free || a == Action::segment_unmap; }

// What an event does to the totals when its block is the one it names, with the size it gives.
[[gnu::always_inline]] inline Totals default_delta(const Event& e) {
  switch (e.action) {
    case Action::alloc: return {e.size, e.size, 0};
    case Action::free_requested: return {-e.size, 0, 0};
    case Action::free_completed: return {0, -e.size, 0};
    default:
      if (is_segment_grow(e.action)) return {0, 0, e.size};
      if (is_segment_shrink(e.action)) return {0, 0, -e.size};
      return {};
  }
}

// Whether a block allocated at alloc_step and freed at free_step (as in Allocation) is live right after step k
// (kNoEvent = before the first event).
inline bool live_after_step(uint32_t alloc_step, uint32_t free_step, uint32_t k) {
  if (free_step == kBeforeStart) return false;
  bool born = alloc_step == kNoEvent || (k != kNoEvent && alloc_step <= k);
  bool dead = free_step != kNoEvent && k != kNoEvent && free_step <= k;
  return born && !dead;
}

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
  bool live_after(uint32_t k) const { return live_after_step(alloc_step, free_step, k); }
};

class Replay;

// Replay::allocations(): indexable like a vector; each Allocation is assembled on access from the replay's
// per-block steps and the alloc event, so the replay keeps 12 bytes per block instead of a whole Allocation.
class Allocations {
 public:
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Allocation;
    using reference = Allocation;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const Replay* r, uint32_t id) : r_(r), id_(id) {}
    Allocation operator*() const;
    iterator& operator++() { return ++id_, *this; }
    iterator operator++(int) { return {r_, id_++}; }
    bool operator==(const iterator&) const = default;

   private:
    const Replay* r_ = nullptr;
    uint32_t id_ = 0;
  };

  explicit Allocations(const Replay& r) : r_(&r) {}
  uint32_t size() const;
  bool empty() const { return size() == 0; }
  Allocation operator[](uint32_t id) const;
  iterator begin() const { return {r_, 0}; }
  iterator end() const { return {r_, size()}; }

 private:
  const Replay* r_;
};

class Replay {
 public:
  // Inconsistencies (a free of an unknown block) do not throw: they are counted in unmatched_frees().
  // Keeps a reference to the snapshot, which must outlive the replay. Replayed on `threads` threads (0: one per core,
  // when the device has enough events; 1: none besides the caller's); the result is the same whatever the number.
  Replay(const Snapshot& s, uint8_t device, unsigned threads = 0);

  // A "step" is a position in this device's events, in order.
  uint32_t steps() const { return steps_; }
  // The index into Snapshot::events of a step's event.
  uint32_t event_of(uint32_t step) const { return event_index_.empty() ? step : event_index_[step]; }
  [[gnu::always_inline]] Event event(uint32_t step) const { return s_.events[event_of(step)]; }
  // The first step whose event comes at or after Snapshot::events[event] (steps() when none does).
  uint32_t step_at_event(uint64_t event) const;
  uint8_t device() const { return device_; }
  const Totals& initial() const { return initial_; }
  // Totals right after `step` (kNoEvent: the initial state), replayed from the nearest stored totals.
  Totals after(uint32_t step) const;
  // Calls f(step, event) for this device's steps [first, end), reading the events in order. Give it an
  // always_inline lambda, so that only the event's fields it reads are decoded.
  template <class F> void for_each_step(uint32_t first, uint32_t end, F f) const {
    if (first >= end) return;
    uint32_t step = first;
    auto mine = [&](size_t, const Event& e) __attribute__((always_inline)) {
      if (e.device == device_) f(step++, e);
    };
    s_.events.for_each(event_of(first), event_of(end - 1) + 1, mine);
  }
  // Calls f(step, totals) for every step in [first, end), walking forward once.
  template <class F>
  void for_each_after(uint32_t first, uint32_t end, F f) const;
  const Peak& peak_allocated() const { return peak_allocated_; }
  const Peak& peak_reserved() const { return peak_reserved_; }
  // Every block, pre-existing ones first (by address), then in allocation order.
  Allocations allocations() const { return Allocations(*this); }
  Allocation allocation(uint32_t id) const;
  // Following a recording as it is written: replays the events the snapshot gained since the replay was made or last
  // extended, to the state a replay of the whole snapshot would have. False, with the replay as it was, where the new
  // part changes what came before: a free of a block the replay never saw allocated (a block older than the
  // recording, whose id goes before the others), reserved memory below the initial state, an owner row of this
  // device, or the end state (which brings the start state); a new Replay is needed then.
  bool extend();
  // Single fields of allocation(id), for loops over many blocks: they decode one column of the alloc event.
  template <auto AllocationField, auto EventField> [[gnu::always_inline]] auto field_of(uint32_t id) const {
    return id < pre_existing_.size() ? pre_existing_[id].*AllocationField : event(alloc_step_[id]).*EventField;
  }
  [[gnu::always_inline]] uint64_t size_of(uint32_t id) const { return field_of<&Allocation::size, &Event::size>(id); }
  [[gnu::always_inline]] uint32_t stack_of(uint32_t id) const { return field_of<&Allocation::stack, &Event::stack>(id); }
  // Ids (into allocations()) of the blocks allocated right after `step`.
  std::vector<uint32_t> live_after(uint32_t step) const;
  uint64_t unmatched_frees() const { return unmatched_frees_; }
  // The Snapshot::owners row that names block `id` (the first of them), or kNoOwner. An owner names its block for
  // the block's whole life; a CPU block (no start state) that no event allocated is live from the start.
  uint32_t owner_of(uint32_t id) const;
  // How many distinct names the rows on block `id` give (a flat buffer holds many tensors' views): 0 when none.
  uint32_t owner_names(uint32_t id) const;
  // Owner rows of this device whose address was no live block although the start state is known.
  uint64_t unresolved_owners() const { return unresolved_owners_; }
  bool has_owners() const { return !owned_.empty(); }
  [[gnu::always_inline]] int64_t time_of(uint32_t step) const { return steps_ == 0 ? 0 : event(step == kNoEvent ? 0 : step).time_ns; }
  // The first step at or after time `t` (steps() where none is): events are in time order.
  uint32_t first_step_at(int64_t t) const;

  // Per allocation id, as in Allocation (for loops that read only these).
  const std::vector<uint32_t>& alloc_steps() const { return alloc_step_; }
  const std::vector<uint32_t>& free_steps() const { return free_step_; }
  const std::vector<uint32_t>& completed_steps() const { return completed_step_; }
  // The steps whose event allocates, maps, frees or unmaps reserved memory, in order (few).
  const std::vector<uint32_t>& segment_steps() const { return segment_steps_; }

 private:
  // A block live during the pass: its allocation id (pre-existing ones marked) and size.
  struct LiveBlock {
    uint32_t id;
    uint64_t size;
  };
  class AddressMap;
  // How a step changed allocated and active when that was not what its event says (see apply()).
  struct Correction {
    uint32_t step;
    int64_t allocated, active;
  };
  // Totals are stored before every kStride-th step.
  static constexpr uint32_t kStride = 16;
  // Fewer events or steps per thread than this and another thread does not pay.
  static constexpr size_t kStepsPerThread = size_t{1} << 19;

  // A block with an owner: its allocation id, the first row naming it, and how many distinct names rows give it.
  struct Owned {
    uint32_t id, row, names;
  };

  // The pass cuts the steps into ranges replayed side by side (replay_pass.cpp).
  struct Range;
  struct Open;
  struct OwnerRow {
    uint32_t row, at;  // attached before step `at`
  };

  void index_events(unsigned threads);
  void pass(unsigned threads);
  std::vector<Range> cut(unsigned parts, const std::vector<OwnerRow>& rows);
  template <class Step, class Row> void walk(const Range& r, Step step, Row row) const;
  void replay_range(Range& r, AddressMap& map);
  void find_checks(Range& r, const AddressMap& live, std::span<const Range> before) const;
  void alloc(Range& r, AddressMap& map, uint32_t step, uint64_t addr, uint64_t size, uint32_t id);
  bool free(Range& r, AddressMap& map, uint32_t step, Action action, uint64_t addr, uint64_t size);
  void release(Range& r, AddressMap& map, LiveBlock& block, uint32_t step, Action action, uint64_t addr);
  void attach(Range& r, AddressMap& map, const OwnerRow& o);
  void stitch(Range& r, AddressMap& live);
  std::pair<int64_t, int64_t> sum_ranges(std::vector<Range>& ranges);
  void settle_totals(Range& r);
  Totals find_peaks(const std::vector<Range>& ranges);
  std::vector<OwnerRow> owner_rows() const;
  void attach_owner(AddressMap& live, LiveBlock* block, Owned& owned);
  void settle_owners(const std::vector<uint32_t>& pre_existing_rank);
  LiveBlock* adopt_pre_existing(AddressMap& live, uint32_t step);
  void adopt_segments(AddressMap& live);
  void settle_initial(std::pair<int64_t, int64_t> lowest_reserved_and_change);
  void finish(const std::vector<Range>& ranges);
  // Steps change the totals as default_delta() says, except where a correction gives the change.
  [[gnu::always_inline]] void apply(uint32_t step, const Event& e, Totals& t, const Correction*& next) const {
    Totals d = default_delta(e);
    if (next != corrections_.data() + corrections_.size() && next->step == step) {
      d.allocated = static_cast<uint64_t>(next->allocated), d.active = static_cast<uint64_t>(next->active);
      ++next;
    }
    t.allocated += d.allocated, t.active += d.active, t.reserved += d.reserved;
  }
  const Correction* first_correction(uint32_t step) const;

  const Snapshot& s_;
  uint8_t device_;
  uint32_t steps_ = 0;
  std::vector<uint32_t> event_index_;  // step -> event; empty when every event is this device's (identity)
  Totals initial_;
  std::vector<Totals> stored_;  // stored_[j]: the totals before step j * kStride
  std::vector<Correction> corrections_;  // by step
  Peak peak_allocated_, peak_reserved_;
  std::vector<uint32_t> alloc_step_, free_step_, completed_step_;  // per allocation id
  std::vector<Allocation> pre_existing_;  // the blocks live before recording: ids [0, size)
  std::vector<uint32_t> segment_steps_;
  std::vector<Owned> owned_;  // by id once the pass is done (owners are sparse: the 12 bytes per block stay)
  uint64_t unmatched_frees_ = 0;
  uint64_t unresolved_owners_ = 0;
  // What extend() resumes from: the snapshot's rows replayed so far, and the pass's state at its end (made on the
  // first extend()).
  uint64_t events_replayed_ = s_.events.size(), owners_seen_ = s_.owners.size();
  bool complete_ = s_.complete;
  struct Resume;
  struct Undo;
  std::shared_ptr<Resume> resume_;
  std::shared_ptr<Resume> resume() const;
  bool extend_steps(uint32_t from, Resume& at, Undo& undo);
  void undo(const Undo& u);
};

template <class F>
void Replay::for_each_after(uint32_t first, uint32_t end, F f) const {
  if (first >= end) return;
  uint32_t from = first / kStride * kStride;
  Totals t = stored_[first / kStride];
  const Correction* next = first_correction(from);
  for_each_step(from, end, [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    apply(step, e, t, next);
    if (step >= first) f(step, static_cast<const Totals&>(t));
  });
}

// Devices that have events, ascending (one pass over the events).
std::vector<uint8_t> devices_with_events(const Snapshot& s);
// Devices that have events or segments, ascending; `with_events` is devices_with_events(s) when already known.
std::vector<uint8_t> devices_of(const Snapshot& s, const std::vector<uint8_t>& with_events);
std::vector<uint8_t> devices_of(const Snapshot& s);

}  // namespace memrec
