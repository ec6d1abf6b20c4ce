// `memrec whatif allocator`: replay a run's requests through AllocatorModel under other settings, and find who
// fragmented the reserved memory at the peak.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memrec/allocator_model.h"
#include "memrec/replay.h"

namespace memrec {

// The device's memory as the model sees it. Unknown values are UINT64_MAX (no limit).
struct DeviceLimits {
  uint64_t total = UINT64_MAX;  // what the settings' fractions are of
  uint64_t limit = UINT64_MAX;  // what cudaMalloc can give the allocator in all
  std::string source;           // where the numbers come from, for the reader
};

// The device's memory: `given` (a --device-memory flag) when set, else the recording's device.N.total_memory; the
// limit is the total, or, when the run hit an OOM, what the allocator held then plus what CUDA said was free.
DeviceLimits device_limits(const Snapshot& s, const Replay& r, std::optional<uint64_t> given);

struct AllocatorPrediction {
  AllocConf conf;
  uint64_t reserved_peak = 0;
  uint32_t reserved_peak_step = kNoEvent;  // the replay step after which it holds; kNoEvent = before the first
  uint64_t allocated_peak = 0;             // block bytes, as memory_stats()'s allocated_bytes
  uint32_t segments_at_peak = 0;           // reserved ranges at the reserved peak
  uint64_t free_at_peak = 0;               // reserved but not allocated at the reserved peak (fragmentation)
  uint64_t device_allocs = 0, device_frees = 0;  // cudaMalloc/cuMemMap and cudaFree/cuMemUnmap calls
  uint64_t ooms = 0;                             // requests the model could not serve within the device's memory
  std::vector<SegmentAction> segment_actions;    // with keep_actions
};

struct AllocatorReplayOptions {
  bool keep_actions = false;
  uint32_t stop_after = kNoEvent;  // stop after this replay step (for the layout at an instant)
};

// Replays device `r.device()` of `s`: the blocks live when recording began first (in address order, as allocations
// made before the first event), then every alloc, free_requested and free_completed as recorded, and each recorded
// OOM as a request that is tried and, when it succeeds, given back at once.
AllocatorPrediction predict_allocator(const Snapshot& s, const Replay& r, const AllocConf& conf,
                                      const DeviceLimits& memory, const AllocatorReplayOptions& o = {});

// The model's blocks right after `step` (kNoEvent: before the first event), segment by segment. BlockView::tag is
// the allocation id (into r.allocations()) of an allocated block.
std::vector<AllocatorModel::SegmentView> allocator_layout_after(const Snapshot& s, const Replay& r,
                                                                const AllocConf& conf, const DeviceLimits& memory,
                                                                uint32_t step);

// The recorded segment actions of the device, in order: what a replay under the run's own settings should repeat.
std::vector<SegmentAction> recorded_segment_actions(const Snapshot& s, const Replay& r);

// The settings --sweep compares: the common ones, and the given one first.
std::vector<AllocConf> sweep_settings(const AllocConf& own);

// Who fragmented the reserved memory at the peak: for each call stack, the free bytes in the segments its live blocks
// keep from being released or reused whole, shared among the live blocks of each segment.
struct FragmentationCulprit {
  uint32_t stack = 0;
  uint64_t free_bytes = 0;  // its share of the stranded free bytes
  uint32_t blocks = 0;      // its live blocks in segments with free space
  uint64_t block_bytes = 0;
  int64_t first_ns = 0, last_ns = 0;  // since the first event: when those blocks were allocated
};
std::vector<FragmentationCulprit> fragmentation_culprits(const Snapshot& s, const Replay& r, const AllocConf& conf,
                                                         const DeviceLimits& memory, uint32_t step);

// The fragmentation part of `memrec stats`: at the reserved peak (replayed under the run's settings), the sites whose
// live blocks hold segments with free space, and what the common settings would reserve instead. Histories of more
// than kCulpritsMaxEvents events get a note pointing to `memrec whatif allocator` instead (it replays the run once
// per setting); CPU runs (no segments) get an empty object.
inline constexpr uint32_t kCulpritsMaxEvents = 500'000;
nlohmann::json fragmentation_culprits_json(const Snapshot& s, const Replay& r, size_t top);
void render_fragmentation_culprits(std::string& out, const nlohmann::json& j);

// The answer of `memrec whatif allocator` as JSON. `conf` unset: the recorded settings, else the defaults (with a
// note saying so). With sweep, "sweep" lists the common settings, best first.
struct AllocatorWhatifOptions {
  std::optional<std::string> conf;
  std::optional<uint64_t> device_memory;
  bool sweep = false;
};
nlohmann::json allocator_whatif_json(const Snapshot& s, uint8_t device, const AllocatorWhatifOptions& o);
std::string allocator_whatif_text(const nlohmann::json& j);

}  // namespace memrec
