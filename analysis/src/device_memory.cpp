#include "memrec/device_memory.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace memrec {
namespace {

// How far a CUPTI timestamp may sit from the allocator's event of the same segment: both are CLOCK_REALTIME, the
// allocator's converted from its ticks (within a microsecond), and its event comes right after the driver call.
constexpr int64_t kClockSlackNs = 1'000'000;

struct SegmentEvent {
  int64_t time_ns;
  uint64_t addr, size;
  bool mapped;  // segment_map (a range of an expandable segment), else segment_alloc
};

std::vector<SegmentEvent> segment_grows(const Replay& r) {
  std::vector<SegmentEvent> out;
  for (uint32_t step : r.segment_steps()) {
    Event e = r.event(step);
    if (is_segment_grow(e.action)) out.push_back({e.time_ns, e.addr, e.size, e.action == Action::segment_map});
  }
  return out;
}

// The virtual ranges each physical allocation (handle) of the virtual memory API was mapped at, on any device.
using Mappings = std::unordered_multimap<uint64_t, std::pair<uint64_t, uint64_t>>;  // handle -> address, bytes

Mappings mappings_of(const Snapshot& s) {
  Mappings out;
  for (const DeviceMemoryRecord& m : s.device_memory)
    if (m.op == MemoryOp::vmm_map) out.emplace(m.handle, std::pair{m.addr, m.bytes});
  return out;
}

bool within(uint64_t addr, uint64_t bytes, const SegmentEvent& g) {
  return g.addr <= addr && addr - g.addr <= g.size && bytes <= g.size - (addr - g.addr);
}

bool is_allocators(const DeviceAllocation& a, const std::vector<SegmentEvent>& grows, const Mappings& maps) {
  if (a.vmm) {  // an expandable segment's page: mapped inside one of the allocator's mapped ranges
    auto [first, last] = maps.equal_range(a.addr);
    return std::any_of(first, last, [&](const auto& m) {
      return std::any_of(grows.begin(), grows.end(),
                         [&](const SegmentEvent& g) { return g.mapped && within(m.second.first, m.second.second, g); });
    });
  }
  return std::any_of(grows.begin(), grows.end(), [&](const SegmentEvent& g) {
    // Differences taken unsigned: a hostile file's times must not overflow.
    bool too_early = g.time_ns < a.start_ns && uint64_t(a.start_ns) - uint64_t(g.time_ns) > uint64_t(kClockSlackNs);
    if (too_early || g.time_ns > a.end_ns) return false;
    return g.mapped ? within(a.addr, a.bytes, g) : g.addr == a.addr && g.size == a.bytes;
  });
}

// The device's records in time order (CUPTI hands buffers over per thread and stream, not in time order).
std::vector<uint32_t> records_of(const Snapshot& s, uint8_t device) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < s.device_memory.size(); ++i)
    if (s.device_memory[i].device == device) ids.push_back(i);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](uint32_t a, uint32_t b) { return s.device_memory[a].time_ns < s.device_memory[b].time_ns; });
  return ids;
}

bool is_vmm_call(MemoryOp op) { return op != MemoryOp::allocation && op != MemoryOp::release; }

// The correlation ids of the virtual memory calls. CUPTI also writes memory records for some of them (NCCL's cuMemMap
// at the mapped address, cuMemUnmap), which would count the same bytes twice.
std::unordered_set<uint32_t> vmm_calls(const Snapshot& s) {
  std::unordered_set<uint32_t> out;
  for (const DeviceMemoryRecord& m : s.device_memory)
    if (is_vmm_call(m.op)) out.insert(m.correlation);
  return out;
}

// Pairs allocations with their releases (by address, or by handle for the virtual memory API); returns every
// allocation of the device.
std::vector<DeviceAllocation> pair_records(const Snapshot& s, DeviceMemory& d) {
  std::vector<DeviceAllocation> all;
  std::unordered_map<uint64_t, size_t> live[2];  // [vmm] address or handle -> index into all
  auto vmm = vmm_calls(s);
  for (uint32_t id : records_of(s, d.device)) {
    DeviceMemoryRecord rec = s.device_memory[id];
    bool is_vmm = rec.op == MemoryOp::vmm_create || rec.op == MemoryOp::vmm_release;
    if (!is_vmm_call(rec.op) && rec.correlation && vmm.contains(rec.correlation)) {
      ++d.duplicates;
      continue;
    }
    auto& open = live[is_vmm];
    auto it = open.find(rec.addr);
    if (rec.op == MemoryOp::release || rec.op == MemoryOp::vmm_release) {
      if (it == open.end()) {
        ++d.unmatched_releases;
        continue;
      }
      all[it->second].end_ns = rec.time_ns;
      open.erase(it);
      continue;
    }
    if (rec.op != MemoryOp::allocation && rec.op != MemoryOp::vmm_create) continue;  // maps: see mappings_of
    if (it != open.end()) all[it->second].end_ns = rec.time_ns;  // its release was lost: it ended by now
    open[rec.addr] = all.size();
    all.push_back({rec.addr, rec.bytes, rec.time_ns, kStillLive, id, rec.source, rec.stack, rec.kind, is_vmm});
  }
  return all;
}

// Reserved bytes as a step function of time: (time, reserved from then on), from the segment events.
std::vector<std::pair<int64_t, uint64_t>> reserved_steps(const Replay& r) {
  std::vector<std::pair<int64_t, uint64_t>> out;
  for (uint32_t step : r.segment_steps()) out.emplace_back(r.time_of(step), r.after(step).reserved);
  return out;
}

uint64_t reserved_at(const Replay& r, const std::vector<std::pair<int64_t, uint64_t>>& steps, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t, [](int64_t x, const auto& p) { return x < p.first; });
  return it == steps.begin() ? r.initial().reserved : std::prev(it)->second;
}

std::vector<DeviceMemoryPoint> account(const Snapshot& s, const Replay& r, const DeviceMemory& d) {
  std::vector<DeviceMemorySample> samples;
  for (const DeviceMemorySample& m : s.memory_samples)
    if (m.device == d.device) samples.push_back(m);
  std::stable_sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  // Changes of the other allocations on the device, swept along the samples (unsigned: sums wrap, never overflow).
  std::vector<std::pair<int64_t, uint64_t>> changes;
  for (const DeviceAllocation& a : d.other) {
    if (!on_device(a.kind)) continue;
    changes.emplace_back(a.start_ns, a.bytes);
    if (a.end_ns != kStillLive) changes.emplace_back(a.end_ns, 0 - a.bytes);
  }
  std::sort(changes.begin(), changes.end());
  auto reserved = reserved_steps(r);
  std::vector<DeviceMemoryPoint> out;
  uint64_t other = 0;
  size_t next = 0;
  for (const DeviceMemorySample& m : samples) {
    for (; next < changes.size() && changes[next].first <= m.time_ns; ++next) other += changes[next].second;
    DeviceMemoryPoint p{m.time_ns, m.used, m.total, reserved_at(r, reserved, m.time_ns), other, 0};
    p.context = static_cast<int64_t>(p.used - p.reserved - other);
    out.push_back(p);
  }
  return out;
}

}  // namespace

bool on_device(MemoryKind k) {
  return k == MemoryKind::device || k == MemoryKind::array || k == MemoryKind::device_static ||
         k == MemoryKind::unknown;
}

uint64_t DeviceMemory::other_at(int64_t t) const {
  uint64_t bytes = 0;
  for (const DeviceAllocation& a : other)
    if (on_device(a.kind) && a.live_at(t)) bytes += a.bytes;
  return bytes;
}

const DeviceMemoryPoint* DeviceMemory::point_at(int64_t t) const {
  if (points.empty()) return nullptr;
  auto it = std::upper_bound(points.begin(), points.end(), t,
                             [](int64_t x, const DeviceMemoryPoint& p) { return x < p.time_ns; });
  return it == points.begin() ? &points.front() : &*std::prev(it);
}

DeviceMemory device_memory(const Snapshot& s, const Replay& r) {
  DeviceMemory d;
  d.device = r.device();
  auto nvml = s.metadata.find("recorder.nvml");
  d.nvml = nvml != s.metadata.end() ? nvml->second : "not recorded";
  auto grows = segment_grows(r);
  auto maps = mappings_of(s);
  for (DeviceAllocation& a : pair_records(s, d)) {
    if (is_allocators(a, grows, maps)) ++d.allocator_allocations;
    else d.other.push_back(a);
  }
  d.points = account(s, r, d);
  return d;
}

std::string library_name(const std::string& path) {
  if (path.empty()) return "unknown library";
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string library_of(const Snapshot& s, const DeviceAllocation& a) {
  if (a.source || !a.stack) return library_name(s.strings[a.source]);
  for (uint32_t f : s.stacks[a.stack]) {
    std::string name = library_name(s.strings[s.frames[f].library]);
    bool cuda_or_memrec = name.starts_with("libcuda.") || name.starts_with("libcupti") ||
                          name.starts_with("libcudart") || name.starts_with("libmemrec");
    if (s.frames[f].library && !cuda_or_memrec) return name;
  }
  return "unknown library";
}

}  // namespace memrec
