// Level-of-detail structures over one device's replay, so a view of any time range at pixel resolution costs
// about one lookup per pixel column, whatever the number of events.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "memrec/replay.h"
#include "memrec/snapshot.h"

namespace memrec {

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// Highest allocated and min/max reserved over a range of states; peak_step is where allocated is highest (earliest on ties).
struct Envelope {
  uint64_t allocated_max = 0;
  uint64_t reserved_min = std::numeric_limits<uint64_t>::max();
  uint64_t reserved_max = 0;
  uint32_t peak_step = kNoEvent;

  bool empty() const { return reserved_min > reserved_max; }
  void include(const Totals& t, uint32_t step);
  void include(const Envelope& e);
};

class Timeline {
 public:
  // Keeps references to both; they must outlive the Timeline. Built on `threads` threads (0: one per core, when the
  // replay is long enough; 1: none besides the caller's); the result is the same whatever the number.
  explicit Timeline(const Replay& r, unsigned threads = 0);

  const Replay& replay() const { return r_; }
  uint32_t steps() const { return r_.steps(); }
  int64_t time_of(uint32_t step) const { return r_.time_of(step); }
  int64_t begin_ns() const { return begin_ns_; }
  int64_t end_ns() const { return end_ns_; }

  // The step whose state holds at time t: the last one at or before t; kNoEvent before the first event.
  uint32_t step_at(int64_t t) const;
  // Over the states after steps first..last (inclusive); kNoEvent as first stands for the initial state.
  Envelope envelope_steps(uint32_t first, uint32_t last) const;
  // Over the states in force during [t0, t1): the one at t0 and every step inside.
  Envelope envelope(int64_t t0, int64_t t1) const;

  // Ids (into Replay::allocations()) of the blocks allocated after `step`, in allocation order:
  // the stacking order of the memory timeline, oldest at the bottom.
  void live_at(uint32_t step, std::vector<uint32_t>& out) const;
  // Stacks the live blocks after `step` bottom-up and writes, for each row of `bytes_per_row` bytes from the bottom,
  // the allocation covering the middle of the row (kNone above the top). Every live block moves every block above it
  // by its exact size, so blocks smaller than a row still count.
  void stack_rows(uint32_t step, double bytes_per_row, std::span<uint32_t> rows,
                  std::vector<uint32_t>& scratch) const;
  // The allocation at byte `offset` of the stack after `step`, kNone above the top.
  uint32_t allocation_at(uint32_t step, uint64_t offset) const;
  // Following a recording: takes in the steps the replay gained (Replay::extend), extending the sampled times, the
  // pyramid and the checkpoints from where they stopped.
  void extend();

 private:
  void extend_pyramid(uint32_t old_steps);
  void extend_checkpoints();
  void coarsen_checkpoints();
  void include_positions(Envelope& e, uint32_t a, uint32_t b) const;
  void sample_times(unsigned parts);
  void build_pyramid(unsigned parts);
  void build_checkpoints(unsigned parts);
  void count_checkpoints(unsigned parts);
  void fill_checkpoints(uint32_t begin, uint32_t end);
  uint32_t first_allocation_after(uint32_t step) const;

  const Replay& r_;
  int64_t begin_ns_ = 0, end_ns_ = 0;
  // Times of every kTimeStride-th step, to find a step by time without touching the events.
  std::vector<int64_t> sampled_times_;
  // levels_[j][k] covers steps [k * kBucket << j, (k + 1) * kBucket << j).
  std::vector<std::vector<Envelope>> levels_;
  // The replay's per-block steps, which the stacking loops read.
  const std::vector<uint32_t>& alloc_step_;
  const std::vector<uint32_t>& free_step_;
  uint32_t first_recorded_ = 0;  // allocations before this id existed before the recording
  // Live blocks after step k * checkpoint_stride_: checkpoint_ids_[checkpoint_ends_[k - 1], checkpoint_ends_[k]).
  uint32_t checkpoint_stride_ = 1024;
  std::vector<uint32_t> checkpoint_ids_;
  std::vector<size_t> checkpoint_ends_;
  uint32_t built_steps_ = r_.steps();  // the replay's steps the structures above cover
};

// Items of one lane that never overlap each other (kernels of one stream, scopes of one kind at one depth),
// sorted by start, so their ends are in order too. Times are read from the snapshot, which must outlive the lane.
struct Lane {
  std::string title;
  const Snapshot* s = nullptr;
  bool kernels = true;        // ids index Snapshot::kernels, else Snapshot::scopes
  std::vector<uint32_t> ids;
  int64_t open_end = 0;       // where scopes still open end
  // The start of every kSample-th item: searches by time run over these and then read at most kSample items
  // from the snapshot, whose packed rows cost more to read one by one.
  static constexpr size_t kSample = 64;
  std::vector<int64_t> sampled_starts = {};

  int64_t start(size_t k) const { return start_of(ids[k]); }
  // At least start + 1, so every item covers some time.
  int64_t end(size_t k) const { return end_of(ids[k]); }
  // Fills sampled_starts; ids must be in start order.
  void sample();
  // The first item starting at or after t, given that it is not before item `from`.
  size_t first_starting_at(int64_t t, size_t from = 0) const;
  // The first item ending after t.
  size_t first_ending_after(int64_t t) const;
  // For each column first + i, covering [origin + floor((first + i) * dt), origin + floor((first + i + 1) * dt))
  // (at least 1 ns), the last item starting in or before it that reaches into it, else kNone. A column's answer
  // depends only on its index, so a view can compute the columns that scrolled in alone.
  void columns(int64_t origin, int64_t first, double dt, std::span<uint32_t> out) const;

  [[gnu::always_inline]] int64_t start_of(uint32_t id) const { return kernels ? s->kernels[id].start_ns : s->scopes[id].start_ns; }
  int64_t end_of(uint32_t id) const;
};

// The time of the device's last event (0 when it has none): its Timeline's end_ns(), known without the replay, so
// the lanes can be built beside it.
int64_t last_event_time(const Snapshot& s, uint8_t device);
// One lane per stream with kernels on `device`.
std::vector<Lane> kernel_lanes(const Snapshot& s, uint8_t device);
// One lane per scope kind (phase, module, op, ...) and nesting depth within that kind, up to max_depth.
std::vector<Lane> scope_lanes(const Snapshot& s, uint8_t device, int64_t end_ns, int max_depth = 3);
// Following a recording: adds kernels [from, end) of `s` to the lanes kernel_lanes made, and scopes [from, end) to
// those scope_lanes made (their open scopes now ending at end_ns), as making them again would.
void extend_kernel_lanes(std::vector<Lane>& lanes, const Snapshot& s, uint8_t device, uint32_t from);
void extend_scope_lanes(std::vector<Lane>& lanes, const Snapshot& s, uint8_t device, int64_t end_ns, uint32_t from,
                        int max_depth = 3);

}  // namespace memrec
