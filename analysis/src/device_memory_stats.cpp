// The device memory section of `memrec stats` and `memrec report`.
#include <algorithm>
#include <map>

#include "memrec/device_memory.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

std::string metadata_or(const Snapshot& s, const std::string& key, const std::string& otherwise) {
  auto it = s.metadata.find(key);
  return it == s.metadata.end() ? otherwise : it->second;
}

// Other allocations grouped by the library that asked and their kind, largest first.
std::vector<LibraryGroup> library_groups(const Snapshot& s, const std::vector<const DeviceAllocation*>& allocations,
                                         size_t top) {
  std::map<std::pair<std::string, MemoryKind>, std::pair<uint64_t, uint64_t>> groups;  // -> bytes, count
  for (const DeviceAllocation* a : allocations) {
    auto& [bytes, count] = groups[{library_of(s, *a), a->kind}];
    bytes += a->bytes;
    ++count;
  }
  std::vector<LibraryGroup> rows;
  for (const auto& [key, value] : groups) rows.push_back({key.first, key.second, on_device(key.second), value.first, value.second});
  std::stable_sort(rows.begin(), rows.end(), [](const LibraryGroup& a, const LibraryGroup& b) { return a.bytes > b.bytes; });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

// The largest other allocations of the run, one row each.
std::vector<OtherAllocation> largest(const Snapshot& s, std::vector<const DeviceAllocation*> all, int64_t start, size_t top) {
  std::stable_sort(all.begin(), all.end(), [](auto* a, auto* b) { return a->bytes > b->bytes; });
  std::vector<OtherAllocation> rows;
  for (size_t i = 0; i < all.size() && i < top; ++i) {
    const DeviceAllocation& a = *all[i];
    rows.push_back({a.addr, a.bytes, a.kind, library_of(s, a), a.vmm, a.stack ? allocation_site(s, a.stack) : "",
                    a.start_ns - start, a.end_ns == kStillLive ? std::nullopt : std::optional(a.end_ns - start)});
  }
  return rows;
}

std::optional<DeviceMemoryRange> over_run(const std::vector<DeviceMemoryPoint>& points) {
  if (points.empty()) return std::nullopt;
  auto by = [&](auto field) {
    return std::minmax_element(points.begin(), points.end(),
                               [&](const DeviceMemoryPoint& a, const DeviceMemoryPoint& b) { return a.*field < b.*field; });
  };
  auto [cmin, cmax] = by(&DeviceMemoryPoint::context);
  return DeviceMemoryRange{cmin->context, cmax->context, by(&DeviceMemoryPoint::used).second->used,
                           by(&DeviceMemoryPoint::reserved).second->reserved, by(&DeviceMemoryPoint::other).second->other};
}

}  // namespace

std::optional<DeviceMemoryStats> device_memory_stats(const Snapshot& s, const Replay& r, uint32_t step, size_t top) {
  DeviceMemory d = device_memory(s, r);
  size_t records = std::count_if(s.device_memory.begin(), s.device_memory.end(),
                                 [&](const DeviceMemoryRecord& m) { return m.device == d.device; });
  if (records == 0 && d.points.empty() && !s.metadata.contains("recorder.nvml")) return std::nullopt;
  int64_t start = r.time_of(kNoEvent), t = r.time_of(step);
  std::vector<const DeviceAllocation*> live, all;
  for (const DeviceAllocation& a : d.other) {
    all.push_back(&a);
    if (a.live_at(t)) live.push_back(&a);
  }
  DeviceMemoryStats out{.nvml = d.nvml,
                        .cupti = metadata_or(s, "recorder.device_memory", "not recorded"),
                        .cupti_dropped = std::stoull(metadata_or(s, "recorder.cupti_dropped", "0")),
                        .samples = d.points.size(),
                        .records = records,
                        .allocator_allocations = d.allocator_allocations,
                        .unmatched_releases = d.unmatched_releases,
                        .duplicates = d.duplicates,
                        .calls = metadata_or(s, "recorder.device_memory_calls", "not recorded"),
                        .first_event_ns = start,
                        .time_ns = t - start,
                        .other_allocations = d.other_at(t),
                        .at = std::nullopt,
                        .over_run = over_run(d.points),
                        .live = library_groups(s, live, top),
                        .by_library = library_groups(s, all, top),
                        .largest = largest(s, all, start, top)};
  if (const DeviceMemoryPoint* p = d.point_at(t)) {
    out.at = *p;
    out.at->time_ns -= start;
  }
  return out;
}

}  // namespace memrec
