// `memrec whatif scale`: the peaks at another batch size or sequence length, and the largest size that fits, from
// recordings of one program at two or three sizes.
//
// Allocations are matched across the runs by where and when they happen: the scope path (the step scope is part of
// it, so order counts within a step), the site, and their rank among the allocations with that path and site; never
// by address. Each matched allocation's bytes are fitted as the polynomial through its runs' points (linear from two,
// up to quadratic from three). A prediction writes the largest run's history again with every allocation at its
// fitted size, in the same order, and replays it: the replay gives the allocated peak, the allocator model the
// reserved one, so a prediction is computed as a recorded run is.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memrec/allocator_whatif.h"
#include "memrec/replay.h"
#include "memrec/snapshot.h"

namespace memrec {

inline constexpr size_t kMaxScaleRuns = 3;
// --fit stops doubling here: a peak that has not run out of memory by then does not grow with the size.
inline constexpr uint64_t kLargestFitted = uint64_t{1} << 24;

// One recording and the size it ran at (--sizes).
struct ScaleRun {
  std::string name;  // the file as the user gave it, for messages
  const Snapshot* snapshot = nullptr;
  uint8_t device = 0;
  uint64_t size = 0;
};

// Allocations of the runs that the prediction cannot fit, grouped by run, site and reason.
struct UnmatchedAllocations {
  enum class Reason : uint8_t {
    base_only,     // only in the base run (the largest): predicted at its recorded size
    not_in_base,   // in this run but not in the base run: left out of the prediction
    below_zero,    // the fit falls below zero at a predicted size: predicted as 0 bytes
  };
  size_t run = 0;             // index into the runs
  Reason reason = Reason::base_only;
  uint64_t at_size = 0;       // below_zero: the first size where it does
  std::string site;           // allocation_site
  uint64_t count = 0, bytes = 0;  // bytes as recorded in `run`
};

// The runs' allocations matched and fitted: what each allocation of the base run (the largest size) weighs at
// another size. Throws Error when the runs are not recordings of one program.
class ScaleFit {
 public:
  explicit ScaleFit(std::span<const ScaleRun> runs);
  ScaleFit(const ScaleFit&) = delete;
  ~ScaleFit();

  size_t base() const { return base_; }
  const Replay& base_replay() const { return *replays_[base_]; }
  // Allocations of each run that have a match in the base run (the base's own: those matched in another run).
  uint64_t matched(size_t run) const { return matched_[run]; }
  uint64_t allocations(size_t run) const { return replays_[run]->allocations().size(); }
  uint64_t peak_allocated(size_t run) const { return replays_[run]->peak_allocated().bytes; }
  const Replay& replay(size_t run) const { return *replays_[run]; }
  // The allocation of `run` matched to base allocation `id` (kNoEvent: none); the base run's is `id` itself.
  uint32_t counterpart(size_t run, uint32_t id) const { return run == base_ ? id : counterparts_[run][id]; }
  // Bytes of every base allocation (by id) at `size`; ids whose fit falls below zero are 0 and listed in `below`.
  std::vector<uint64_t> bytes_at(uint64_t size, std::vector<uint32_t>* below = nullptr) const;
  // The allocations that appear in one run only, largest first.
  const std::vector<UnmatchedAllocations>& unmatched() const { return unmatched_; }

 private:
  struct Points {
    uint8_t runs = 0;  // bit per run holding the allocation
    std::array<uint64_t, kMaxScaleRuns> bytes{};
  };
  void match();

  std::vector<ScaleRun> runs_;
  std::vector<std::unique_ptr<Replay>> replays_;
  size_t base_ = 0;
  std::vector<Points> points_;  // per base allocation id
  std::array<uint64_t, kMaxScaleRuns> matched_{};
  std::array<std::vector<uint32_t>, kMaxScaleRuns> counterparts_;  // per run other than the base, by base id
  std::vector<UnmatchedAllocations> unmatched_;
};

// What grows most at the predicted peak: the live blocks grouped by owner name, else by site. Sorted by the size of
// the change from the base run, so a size below the base run's shows what shrinks most.
struct ScaleGrowth {
  std::string key;
  uint64_t bytes = 0;     // predicted, live at the peak
  uint64_t recorded = 0;  // the same blocks' bytes in the base run
  int64_t growth() const { return static_cast<int64_t>(bytes) - static_cast<int64_t>(recorded); }
};

// A prediction over time, drawn over one of the runs (ScaleWhatifOptions::curve_run): the totals after each event
// of the rewritten history, each at the time its allocation's counterpart in that run had the same event (for the
// base run, its own time), so that the curve lines up with that run's steps and phases.
struct ScaleCurve {
  std::vector<int64_t> time_ns;     // since that run's first event; never decreasing
  std::vector<uint64_t> allocated;
  std::vector<uint64_t> reserved;   // the allocator model's; empty on a CPU
  size_t peak = 0;                  // the point of the allocated peak
  std::optional<size_t> oom;        // the first point where the prediction runs out of the device's memory
};

// A curve's highest bytes over one span of time: the values in force at its start and at every point inside it.
struct ScaleSpan {
  uint64_t allocated = 0, reserved = 0;
  bool shown = false;  // the span holds part of the curve (it is not all before its first point or after its last)
};
// Spans i = 0..n-1 of [floor((first + i) * dt), floor((first + i + 1) * dt)) nanoseconds on the curve's clock: the
// viewer's pixel columns, the report's points.
std::vector<ScaleSpan> curve_spans(const ScaleCurve& c, int64_t first, double dt, size_t n);

struct ScalePrediction {
  uint64_t size = 0;
  uint64_t peak_allocated = 0;
  std::optional<uint64_t> peak_reserved;  // unset for a CPU run: no caching allocator
  std::optional<bool> oom;                // unset when the device's memory is unknown
  uint64_t ooms = 0;                      // requests the allocator model could not serve
  int64_t peak_ns = 0;                    // of the allocated peak, since the base run's first event
  std::string step, phase;                // the step scope and the phase holding the allocated peak ("" if none)
  std::vector<ScaleGrowth> growth;        // largest change first
  std::optional<ScaleCurve> curve;        // with ScaleWhatifOptions::curve_run
};

// The device's memory a prediction must fit in, and where the number comes from.
struct ScaleMemory {
  std::optional<uint64_t> bytes;  // unset: unknown (a CPU run without --device-memory)
  bool given = false;             // --device-memory
  uint64_t total = 0;             // the recording's device.N.total_memory (0: none)
  std::optional<uint64_t> outside;  // used - reserved at most over the base run's NVML samples (unset: none)
};

enum class ScaleNote : uint8_t {
  cpu,                 // a CPU run: no caching allocator, so no reserved prediction
  memory_unknown,      // no device memory: no OOM prediction
  outside_unmeasured,  // a device total without NVML samples: the whole device assumed available
  assumed_defaults,    // the file does not say which allocator settings the run used
  no_limit_found,      // --fit found no size that runs out of memory
};

struct ScaleWhatifOptions {
  std::vector<uint64_t> predict;
  bool fit = false;
  std::optional<std::string> conf;  // --alloc-conf
  std::optional<uint64_t> device_memory;
  std::optional<size_t> curve_run;  // give each prediction's curve on this run's clock (index into the runs)
};

struct ScaleWhatif {
  uint8_t device = 0;
  struct Run {
    std::string name;
    uint64_t size = 0, peak_allocated = 0, allocations = 0, matched = 0;
  };
  std::vector<Run> runs;  // in the order given
  size_t base = 0;        // the run whose history predictions rewrite
  std::optional<std::string> settings;  // the allocator settings reserved peaks are predicted under; unset on a CPU
  SettingsSource source = SettingsSource::assumed;
  ScaleMemory memory;
  std::vector<ScalePrediction> predictions;  // --predict's sizes, then --fit's largest and the size after it
  struct Fit {
    uint64_t largest = 0;  // 0: not even size 1 fits
    uint64_t device_memory = 0;
    int64_t margin = 0;    // device_memory less the largest size's peak (reserved, or allocated on a CPU)
  };
  std::optional<Fit> fit;
  std::vector<UnmatchedAllocations> unmatched;
  std::vector<ScaleNote> notes;
  std::vector<std::string> warnings;  // the inputs' notes (Snapshot::warnings), prefixed by their file
};

// Throws Error, one sentence, when the runs or options do not make a prediction: fewer than two or more than three
// runs, sizes not all different and in order, runs of different programs, --fit without the device's memory.
ScaleWhatif scale_whatif(std::span<const ScaleRun> runs, const ScaleWhatifOptions& o);

}  // namespace memrec
