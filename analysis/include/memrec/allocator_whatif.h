// `memrec whatif allocator`: replay a run's requests through AllocatorModel under other settings, and find who
// fragmented the reserved memory at the peak.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memrec/allocator_model.h"
#include "memrec/replay.h"

namespace memrec {

// The device's memory as the model sees it. Unknown values are UINT64_MAX (no limit).
struct DeviceLimits {
  uint64_t total = UINT64_MAX;  // what the settings' fractions are of
  uint64_t limit = UINT64_MAX;  // what cudaMalloc can give the allocator in all
  // Where the numbers come from, for the reader:
  bool given = false;           // --device-memory
  bool recorded_total = false;  // the recording's device.N.total_memory
  bool oom_limit = false;       // the limit from the recorded OOM: what the allocator held then plus CUDA's free bytes
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
  uint32_t first_oom_step = kNoEvent;            // the replay step of the first of them
  std::vector<SegmentAction> segment_actions;    // with keep_actions
  std::vector<uint64_t> reserved_after;          // with keep_reserved: reserved after each replay step
};

struct AllocatorReplayOptions {
  bool keep_actions = false;
  bool keep_reserved = false;
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

// One setting's prediction as the commands show it (peak_ns since the first event), with what it saves against a
// baseline: unset when it runs out of memory, since the run would not finish, or when there is no baseline.
struct SettingPrediction {
  std::string settings;  // to_string(AllocConf)
  uint64_t reserved_peak = 0, allocated_peak = 0;
  int64_t peak_ns = 0;
  uint32_t segments = 0;
  uint64_t device_allocs = 0, device_frees = 0, free_at_peak = 0, ooms = 0;
  std::optional<int64_t> saving;
  bool own = false;  // the run's own settings
  bool fits() const { return ooms == 0; }
};

// A site's share of the fragmentation: the culprits of its stacks merged, since stacks that differ only below the
// program's own frames read as one site.
struct SiteCulprit {
  std::string site;
  FragmentationCulprit held;  // .stack: its first stack
};

// The fragmentation part of `memrec stats`: at the reserved peak (replayed under the run's settings), the sites whose
// live blocks hold segments with free space, and what the common settings would reserve instead. Histories of more
// than kCulpritsMaxEvents events are left to `memrec whatif allocator` (it replays the run once per setting); CPU
// runs have no segments.
inline constexpr uint32_t kCulpritsMaxEvents = 500'000;
struct FragmentationCulprits {
  enum class State : uint8_t { no_segments, too_many_events, failed, found };
  State state = State::no_segments;
  std::string error;  // failed: why; a part of stats, whose failure must not take the rest of stats with it
  std::string settings;  // what the run was replayed under
  bool assumed = false;  // the file does not say which settings the run used: the defaults
  int64_t time_ns = 0;   // of the reserved peak
  uint64_t reserved = 0, free = 0;
  std::vector<SiteCulprit> culprits;            // most free bytes first, at most `top`
  std::vector<SettingPrediction> settings_savings;  // the other common settings, best first
};
FragmentationCulprits stats_fragmentation_culprits(const Snapshot& s, const Replay& r, size_t top);

// `memrec whatif allocator`. `conf` unset: the recorded settings, else the defaults (with a note saying so).
struct AllocatorWhatifOptions {
  std::optional<std::string> conf;
  std::optional<uint64_t> device_memory;
  bool sweep = false;
};

enum class SettingsSource : uint8_t { given, recorded, assumed };  // --alloc-conf, the recording's, the defaults

// The settings to replay under: `given` (--alloc-conf) parsed, else those the run was recorded with, else the
// defaults; and which of them it is.
struct ChosenSettings {
  AllocConf conf;
  SettingsSource source = SettingsSource::assumed;
};
ChosenSettings choose_settings(const std::optional<std::string>& given, const std::optional<AllocConf>& recorded);

// What the reader must know about the prediction.
enum class AllocatorNote : uint8_t {
  assumed_defaults,            // the file does not say which settings the run used
  memory_unknown,              // no limit assumed: no release-and-retry or OOM modelled
  fraction_ignored,            // a memory fraction or gc threshold without the device's memory
  threshold_without_fraction,  // garbage_collection_threshold acts only with a memory fraction
  out_of_memory,               // the prediction runs out of memory (prediction.ooms requests)
};

struct AllocatorWhatif {
  uint8_t device = 0;
  SettingPrediction prediction;
  SettingsSource source = SettingsSource::assumed;
  std::optional<std::string> recorded_settings;
  uint64_t recorded_reserved_peak = 0, recorded_segment_allocs = 0, recorded_ooms = 0;
  uint64_t requests = 0;  // allocations replayed
  DeviceLimits memory;
  std::vector<AllocatorNote> notes;
  std::vector<std::string> warnings;  // the notes of a file cut short
  struct Sweep {
    uint64_t baseline = 0;  // the run's own settings' predicted reserved peak
    std::vector<SettingPrediction> rows;  // the common settings, best first
  };
  std::optional<Sweep> sweep;
};
AllocatorWhatif allocator_whatif(const Snapshot& s, uint8_t device, const AllocatorWhatifOptions& o);

}  // namespace memrec
