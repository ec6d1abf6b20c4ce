// Device memory as the driver sees it, from the raw CUPTI memory records and NVML samples of a recording:
// at every sampled instant, used (NVML) = reserved (the caching allocator) + other allocations + the rest, which is
// the CUDA context, the driver's own memory and whatever the recording could not see (allocations made before it
// started). The rest is what the gap between torch.cuda.memory_reserved() and nvidia-smi is made of, with the
// other allocations (NCCL's buffers, cuBLAS workspaces, extensions' cudaMalloc) taken out of it.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "memrec/replay.h"
#include "memrec/snapshot.h"

namespace memrec {

inline constexpr int64_t kStillLive = std::numeric_limits<int64_t>::max();

// Whether memory of this kind sits on the device, so that NVML's used counts it. Host memory (pageable, pinned)
// does not; managed memory moves, and is left out. CUPTI's unknown kind is counted: its record names a device.
bool on_device(MemoryKind k);

// One allocation and its release: CUPTI's, paired by address, or the virtual memory API's, paired by handle.
struct DeviceAllocation {
  uint64_t addr = 0;            // the handle when `vmm`
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = kStillLive;  // its release, or kStillLive when the recording saw none
  uint32_t record = 0;          // index into Snapshot::device_memory of the allocation record
  uint32_t source = 0;          // string id: the shared object that asked for it
  uint32_t stack = 0;
  MemoryKind kind = MemoryKind::unknown;
  bool vmm = false;             // cuMemCreate/cuMemRelease
  bool live_at(int64_t t) const { return start_ns <= t && t < end_ns; }
};

// One NVML sample with the accounting at its time. context = used - reserved - other, signed: a negative value
// means something was counted twice (or NVML and the events disagree), which the numbers then show.
struct DeviceMemoryPoint {
  int64_t time_ns = 0;
  uint64_t used = 0;
  uint64_t total = 0;
  uint64_t reserved = 0;
  uint64_t other = 0;         // other allocations on the device, live at time_ns
  int64_t context = 0;
};

// How a device's records and NVML samples split up. The caching allocator's own cudaMalloc/cuMemCreate calls
// show up among the records too: an allocation is the allocator's when, while it was live, the allocator recorded a
// segment_alloc of the same address and size on the device, or a segment_map whose range holds it; a cuMemCreate
// allocation is the allocator's when it was mapped inside a segment_map's range (expandable segments). Everything
// else is an "other allocation". A CUPTI record of a call that the virtual memory records also report (same
// correlation id) is left out, so that nothing counts twice.
struct DeviceMemory {
  uint8_t device = 0;
  std::vector<DeviceAllocation> other;      // by allocation time
  uint64_t allocator_allocations = 0;       // CUPTI allocations that are the caching allocator's segments
  uint64_t unmatched_releases = 0;          // releases of memory allocated before the recording (or lost records)
  uint64_t duplicates = 0;                  // CUPTI records of calls the virtual memory records report
  std::vector<DeviceMemoryPoint> points;    // one per NVML sample of the device, by time
  std::string nvml;                         // "on", or why there are no samples (metadata "recorder.nvml")

  // Other allocations on the device live at t.
  uint64_t other_at(int64_t t) const;
  // The last point at or before t (else the first one); nullptr without samples.
  const DeviceMemoryPoint* point_at(int64_t t) const;
};

// `r` must be the replay of `device`.
DeviceMemory device_memory(const Snapshot& s, const Replay& r);

// Other allocations of one library and kind.
struct LibraryGroup {
  std::string key;  // library_name of the library that asked
  MemoryKind kind = MemoryKind::unknown;
  bool on_device = false;
  uint64_t bytes = 0, count = 0;
};

// One other allocation as `memrec stats` lists it; times are offsets from the device's first event.
struct OtherAllocation {
  uint64_t addr = 0, bytes = 0;
  MemoryKind kind = MemoryKind::unknown;
  std::string library;
  bool vmm = false;
  std::string site;  // allocation_site of its stack, or ""
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns;  // unset while live at the end
};

// The extremes over every NVML sample.
struct DeviceMemoryRange {
  int64_t context_min = 0, context_max = 0;
  uint64_t device_used_max = 0, reserved_max = 0, other_allocations_max = 0;
};

// `memrec stats`' device memory section at the instant after a step (time_ns) and over the run; times are offsets
// from the device's first event (first_event_ns, on the recording's clock).
struct DeviceMemoryStats {
  std::string nvml;         // DeviceMemory::nvml
  std::string cupti;        // metadata "recorder.device_memory", or "not recorded"
  uint64_t cupti_dropped = 0;
  size_t samples = 0, records = 0;
  uint64_t allocator_allocations = 0, unmatched_releases = 0, duplicates = 0;
  std::string calls;        // metadata "recorder.device_memory_calls", or "not recorded"
  int64_t first_event_ns = 0, time_ns = 0;
  uint64_t other_allocations = 0;          // live at time_ns
  std::optional<DeviceMemoryPoint> at;     // the NVML sample at time_ns (its time_ns an offset too)
  std::optional<DeviceMemoryRange> over_run;
  std::vector<LibraryGroup> live, by_library;  // live at time_ns, and over the run: largest first, at most `top`
  std::vector<OtherAllocation> largest;        // the run's largest, at most `top`
};

// `r` must be the replay of s's device; unset for a recording with neither CUPTI records nor NVML samples nor a
// note on NVML.
std::optional<DeviceMemoryStats> device_memory_stats(const Snapshot& s, const Replay& r, uint32_t step, size_t top);

// "libnccl.so.2" for "/usr/lib/x86_64-linux-gnu/libnccl.so.2"; "unknown library" for an empty path.
std::string library_name(const std::string& path);
// The library that asked for an allocation: CUPTI's source, else the first frame of its stack outside CUDA's own
// libraries and memrec's (the virtual memory records have no source).
std::string library_of(const Snapshot& s, const DeviceAllocation& a);

}  // namespace memrec
