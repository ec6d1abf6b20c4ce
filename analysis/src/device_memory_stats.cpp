// The device memory section of `memrec stats` and `memrec report`: JSON first, text and HTML rendered from it.
#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "memrec/device_memory.h"
#include "memrec/sites.h"
#include "memrec/units.h"

namespace memrec {
namespace {

using nlohmann::json;

std::string metadata_or(const Snapshot& s, const std::string& key, const std::string& otherwise) {
  auto it = s.metadata.find(key);
  return it == s.metadata.end() ? otherwise : it->second;
}

// Other allocations grouped by the library that asked and their kind, largest first.
json groups_json(const Snapshot& s, const std::vector<const DeviceAllocation*>& allocations, size_t top) {
  std::map<std::pair<std::string, MemoryKind>, std::pair<uint64_t, uint64_t>> groups;  // -> bytes, count
  for (const DeviceAllocation* a : allocations) {
    auto& [bytes, count] = groups[{library_of(s, *a), a->kind}];
    bytes += a->bytes;
    ++count;
  }
  json rows = json::array();
  for (const auto& [key, value] : groups)
    rows.push_back({{"key", key.first}, {"kind", to_string(key.second)}, {"on_device", on_device(key.second)},
                    {"bytes", value.first}, {"count", value.second}});
  std::stable_sort(rows.begin(), rows.end(),
                   [](const json& a, const json& b) { return a["bytes"].get<uint64_t>() > b["bytes"].get<uint64_t>(); });
  if (rows.size() > top) rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(top), rows.end());
  return rows;
}

// The largest other allocations of the run, one row each (times as offsets; end null while live at the end).
json largest_json(const Snapshot& s, std::vector<const DeviceAllocation*> all, int64_t start, size_t top) {
  std::stable_sort(all.begin(), all.end(), [](auto* a, auto* b) { return a->bytes > b->bytes; });
  json rows = json::array();
  for (size_t i = 0; i < all.size() && i < top; ++i) {
    const DeviceAllocation& a = *all[i];
    rows.push_back({{"addr", a.addr}, {"bytes", a.bytes}, {"kind", to_string(a.kind)},
                    {"library", library_of(s, a)}, {"vmm", a.vmm},
                    {"site", a.stack ? allocation_site(s, a.stack) : ""}, {"start_ns", a.start_ns - start},
                    {"end_ns", a.end_ns == kStillLive ? json(nullptr) : json(a.end_ns - start)}});
  }
  return rows;
}

json point_json(const DeviceMemoryPoint& p, int64_t start) {
  return {{"sample_time_ns", p.time_ns - start}, {"device_used", p.used}, {"total", p.total},
{"reserved", p.reserved}, {"other_allocations", p.other},
          {"context", p.context}};
}

json over_run_json(const std::vector<DeviceMemoryPoint>& points) {
  if (points.empty()) return nullptr;
  auto by = [&](auto field) {
    return std::minmax_element(points.begin(), points.end(),
                               [&](const DeviceMemoryPoint& a, const DeviceMemoryPoint& b) { return a.*field < b.*field; });
  };
  auto [cmin, cmax] = by(&DeviceMemoryPoint::context);
  return {{"context_min", cmin->context}, {"context_max", cmax->context},
          {"device_used_max", by(&DeviceMemoryPoint::used).second->used},
          {"reserved_max", by(&DeviceMemoryPoint::reserved).second->reserved},
          {"other_allocations_max", by(&DeviceMemoryPoint::other).second->other}};
}

std::string signed_bytes(int64_t v) {
  return (v < 0 ? "-" : "") + format_bytes(v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
}

std::string group_line(const json& g) {
  return fmt::format("{:>12} {:>6}x  {} ({}{})", format_bytes(g["bytes"]), g["count"].get<uint64_t>(),
                     g["key"].get<std::string>(), g["kind"].get<std::string>(),
                     g["on_device"].get<bool>() ? "" : ", not device memory");
}

}  // namespace

json device_memory_json(const Snapshot& s, const Replay& r, uint32_t step, size_t top) {
  DeviceMemory d = device_memory(s, r);
  size_t records = std::count_if(s.device_memory.begin(), s.device_memory.end(),
                                 [&](const DeviceMemoryRecord& m) { return m.device == d.device; });
  if (records == 0 && d.points.empty() && !s.metadata.contains("recorder.nvml")) return nullptr;
  int64_t start = r.time_of(kNoEvent), t = r.time_of(step);
  std::vector<const DeviceAllocation*> live, all;
  for (const DeviceAllocation& a : d.other) {
    all.push_back(&a);
    if (a.live_at(t)) live.push_back(&a);
  }
  const DeviceMemoryPoint* p = d.point_at(t);
  return {{"nvml", d.nvml},
          {"cupti", metadata_or(s, "recorder.device_memory", "not recorded")},
          {"cupti_dropped", std::stoull(metadata_or(s, "recorder.cupti_dropped", "0"))},
          {"samples", d.points.size()},
          {"records", records},
          {"allocator_allocations", d.allocator_allocations},
          {"unmatched_releases", d.unmatched_releases},
          {"duplicates", d.duplicates},
          {"calls", metadata_or(s, "recorder.device_memory_calls", "not recorded")},
          {"first_event_ns", start},
          {"time_ns", t - start},
          {"other_allocations", d.other_at(t)},
          {"at", p ? point_json(*p, start) : json(nullptr)},
          {"over_run", over_run_json(d.points)},
          {"live", groups_json(s, live, top)},
          {"by_library", groups_json(s, all, top)},
          {"largest", largest_json(s, all, start, top)}};
}

std::string device_memory_text(const json& j) {
  if (j.is_null()) return "";
  std::string out = "\ndevice memory (NVML used = reserved + other allocations + context and driver):\n";
  if (j["nvml"] != "on") out += fmt::format("  NVML: {}: no used memory of the device\n", j["nvml"].get<std::string>());
  if (j["cupti"] != "on") out += fmt::format("  CUPTI memory activity: {}\n", j["cupti"].get<std::string>());
  if (j["cupti_dropped"].get<uint64_t>())
    out += fmt::format("  warning: CUPTI dropped {} records (kernels or memory): other allocations may be missing\n",
                       j["cupti_dropped"].get<uint64_t>());
  if (const json& at = j["at"]; !at.is_null()) {
    out += fmt::format("  at +{} (NVML sample at +{}):\n", format_duration(j["time_ns"]), format_duration(at["sample_time_ns"]));
    out += fmt::format("    {:<20} {:>12}  of {}\n", "used", format_bytes(at["device_used"]), format_bytes(at["total"]));
    out += fmt::format("    {:<20} {:>12}\n", "reserved", format_bytes(at["reserved"]));
    out += fmt::format("    {:<20} {:>12}\n", "other allocations", format_bytes(at["other_allocations"]));
    out += fmt::format("    {:<20} {:>12}\n", "context and driver", signed_bytes(at["context"]));
    const json& run = j["over_run"];
    out += fmt::format("  over the run ({} samples): context and driver {} .. {} (spread {}), used up to {}, other "
                       "allocations up to {}\n",
                       j["samples"].get<uint64_t>(), signed_bytes(run["context_min"]), signed_bytes(run["context_max"]),
                       format_bytes(run["context_max"].get<uint64_t>() - run["context_min"].get<uint64_t>()),
                       format_bytes(run["device_used_max"]), format_bytes(run["other_allocations_max"]));
  }
  out += fmt::format("  other allocations live at +{}: {}\n", format_duration(j["time_ns"]),
                     format_bytes(j["other_allocations"]));
  for (const json& g : j["live"]) out += "  " + group_line(g) + "\n";
  out += "  other allocations over the run, by library:\n";
  for (const json& g : j["by_library"]) out += "  " + group_line(g) + "\n";
  out += "  largest other allocations:\n";
  for (size_t i = 0; i < j["largest"].size() && i < 5; ++i) {
    const json& a = j["largest"][i];
    std::string site = a["site"].get<std::string>();
    out += fmt::format("  {:>12}  {} ({}) at +{}{}{}\n", format_bytes(a["bytes"]), a["library"].get<std::string>(),
                       a["kind"].get<std::string>(), format_duration(a["start_ns"]),
                       a["end_ns"].is_null() ? "" : ", freed at +" + format_duration(a["end_ns"]),
                       site.empty() ? "" : "  " + site);
  }
  out += fmt::format("  {} records, {} allocations of them the caching allocator's segments, {} releases with no "
                     "allocation recorded (made before the recording, or a handle released again after "
                     "cuMemRetainAllocationHandle, as NCCL frees), {} CUPTI records of virtual memory calls also recorded "
                     "from the calls (virtual memory calls: {})\n",
                     j["records"].get<uint64_t>(), j["allocator_allocations"].get<uint64_t>(),
                     j["unmatched_releases"].get<uint64_t>(), j["duplicates"].get<uint64_t>(),
                     j["calls"].get<std::string>());
  return out;
}

}  // namespace memrec
