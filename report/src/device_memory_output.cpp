// The device memory section of `memrec stats` and `memrec report`, as JSON and text.
#include "memrec/device_memory_output.h"

#include <fmt/format.h>

#include "memrec/units.h"
#include "render.h"

namespace memrec {
namespace {

using nlohmann::json;

json groups_json(const std::vector<LibraryGroup>& groups) {
  json rows = json::array();
  for (const LibraryGroup& g : groups)
    rows.push_back({{"key", g.key}, {"kind", to_string(g.kind)}, {"on_device", g.on_device}, {"bytes", g.bytes},
                    {"count", g.count}});
  return rows;
}

json largest_json(const std::vector<OtherAllocation>& largest) {
  json rows = json::array();
  for (const OtherAllocation& a : largest)
    rows.push_back({{"addr", a.addr}, {"bytes", a.bytes}, {"kind", to_string(a.kind)}, {"library", a.library},
                    {"vmm", a.vmm}, {"site", a.site}, {"start_ns", a.start_ns},
                    {"end_ns", or_null(a.end_ns)}});
  return rows;
}

json point_json(const DeviceMemoryPoint& p) {
  return {{"sample_time_ns", p.time_ns}, {"device_used", p.used},   {"total", p.total},
          {"reserved", p.reserved},      {"other_allocations", p.other}, {"context", p.context}};
}

json range_json(const DeviceMemoryRange& r) {
  return {{"context_min", r.context_min}, {"context_max", r.context_max}, {"device_used_max", r.device_used_max},
          {"reserved_max", r.reserved_max}, {"other_allocations_max", r.other_allocations_max}};
}

std::string group_line(const LibraryGroup& g) {
  return fmt::format("{:>12} {:>6}x  {} ({}{})", format_bytes(g.bytes), g.count, g.key, to_string(g.kind),
                     g.on_device ? "" : ", not device memory");
}

void render_sample(std::string& out, const DeviceMemoryStats& d, const DeviceMemoryPoint& at, const DeviceMemoryRange& run) {
  out += fmt::format("  at +{} (NVML sample at +{}):\n", format_duration(d.time_ns), format_duration(at.time_ns));
  out += fmt::format("    {:<20} {:>12}  of {}\n", "used", format_bytes(at.used), format_bytes(at.total));
  out += fmt::format("    {:<20} {:>12}\n", "reserved", format_bytes(at.reserved));
  out += fmt::format("    {:<20} {:>12}\n", "other allocations", format_bytes(at.other));
  out += fmt::format("    {:<20} {:>12}\n", "context and driver", signed_bytes(at.context));
  out += fmt::format("  over the run ({} samples): context and driver {} .. {} (spread {}), used up to {}, other "
                     "allocations up to {}\n",
                     d.samples, signed_bytes(run.context_min), signed_bytes(run.context_max),
                     format_bytes(static_cast<uint64_t>(run.context_max) - static_cast<uint64_t>(run.context_min)),
                     format_bytes(run.device_used_max), format_bytes(run.other_allocations_max));
}

void render_largest(std::string& out, const std::vector<OtherAllocation>& largest) {
  out += "  largest other allocations:\n";
  for (size_t i = 0; i < largest.size() && i < 5; ++i) {
    const OtherAllocation& a = largest[i];
    out += fmt::format("  {:>12}  {} ({}) at +{}{}{}\n", format_bytes(a.bytes), a.library, to_string(a.kind),
                       format_duration(a.start_ns), a.end_ns ? ", freed at +" + format_duration(*a.end_ns) : "",
                       a.site.empty() ? "" : "  " + a.site);
  }
}

}  // namespace

json device_memory_json(const std::optional<DeviceMemoryStats>& d) {
  if (!d) return nullptr;
  return {{"nvml", d->nvml},
          {"cupti", d->cupti},
          {"cupti_dropped", d->cupti_dropped},
          {"samples", d->samples},
          {"records", d->records},
          {"allocator_allocations", d->allocator_allocations},
          {"unmatched_releases", d->unmatched_releases},
          {"duplicates", d->duplicates},
          {"calls", d->calls},
          {"first_event_ns", d->first_event_ns},
          {"time_ns", d->time_ns},
          {"other_allocations", d->other_allocations},
          {"at", d->at ? point_json(*d->at) : json(nullptr)},
          {"over_run", d->over_run ? range_json(*d->over_run) : json(nullptr)},
          {"live", groups_json(d->live)},
          {"by_library", groups_json(d->by_library)},
          {"largest", largest_json(d->largest)}};
}

std::string device_memory_text(const DeviceMemoryStats& d) {
  std::string out = "\ndevice memory (NVML used = reserved + other allocations + context and driver):\n";
  if (d.nvml != "on") out += fmt::format("  NVML: {}: no used memory of the device\n", d.nvml);
  if (d.cupti != "on") out += fmt::format("  CUPTI memory activity: {}\n", d.cupti);
  if (d.cupti_dropped)
    out += fmt::format("  warning: CUPTI dropped {} records (kernels or memory): other allocations may be missing\n",
                       d.cupti_dropped);
  if (d.at && d.over_run) render_sample(out, d, *d.at, *d.over_run);
  out += fmt::format("  other allocations live at +{}: {}\n", format_duration(d.time_ns), format_bytes(d.other_allocations));
  for (const LibraryGroup& g : d.live) out += "  " + group_line(g) + "\n";
  out += "  other allocations over the run, by library:\n";
  for (const LibraryGroup& g : d.by_library) out += "  " + group_line(g) + "\n";
  render_largest(out, d.largest);
  out += fmt::format("  {} records, {} allocations of them the caching allocator's segments, {} releases with no "
                     "allocation recorded (made before the recording, or a handle released again after "
                     "cuMemRetainAllocationHandle, as NCCL frees), {} CUPTI records of virtual memory calls also recorded "
                     "from the calls (virtual memory calls: {})\n",
                     d.records, d.allocator_allocations, d.unmatched_releases, d.duplicates, d.calls);
  return out;
}

}  // namespace memrec
