#include "memrec/summary.h"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>

#include "memrec/replay.h"

namespace memrec {
namespace {

// Frames that say how a stack was taken or how the allocator works inside, not who allocated.
constexpr std::array<std::string_view, 11> kNoiseFunctions = {
    "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "memrec::", "_start",
    "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_", "CUDACachingAllocator", "c10::alloc_cpu"};
constexpr std::array<std::string_view, 10> kNoiseFiles = {
    "core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
    "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"};

bool contains_any(std::string_view text, std::span<const std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return text.find(n) != std::string_view::npos; });
}

bool is_noise(const Snapshot& s, const Frame& f) {
  return contains_any(s.strings[f.function], kNoiseFunctions) || contains_any(s.strings[f.file], kNoiseFiles);
}

std::string scope_path(const Snapshot& s, uint32_t scope) {
  std::string path;
  for (int depth = 0; scope != 0 && scope < s.scopes.size() && depth < 64; ++depth) {
    const Scope& sc = s.scopes[scope];
    path = path.empty() ? s.strings[sc.name] : s.strings[sc.name] + " > " + path;
    scope = sc.parent;
  }
  return path;
}

void append_metadata(std::string& out, const Snapshot& s) {
  for (const auto& [key, value] : s.metadata) {
    if (key == "allocator_settings") continue;  // long JSON; `memrec export` keeps it
    out += fmt::format("  {:<22} {}\n", key, value);
  }
}

void append_action_counts(std::string& out, const Snapshot& s) {
  std::array<uint64_t, kActionCount> counts{};
  for (const Event& e : s.events) ++counts[static_cast<size_t>(e.action)];
  out += "events by action:\n";
  for (int a = 0; a < kActionCount; ++a)
    if (counts[a]) out += fmt::format("  {:<16} {:>12}\n", to_string(static_cast<Action>(a)), counts[a]);
}

std::string when(const Replay& r, uint32_t step, int64_t start_ns) {
  if (step == kNoEvent) return "at start";
  return fmt::format("at +{} (event {} of this device)", format_duration(r.time_of(step) - start_ns), step);
}

void append_largest_live(std::string& out, const Snapshot& s, const Replay& r, uint32_t step) {
  auto ids = r.live_after(step);
  const auto& allocs = r.allocations();
  std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return allocs[a].size > allocs[b].size; });
  ids.resize(std::min<size_t>(ids.size(), 10));
  out += fmt::format("  largest live allocations at the allocated peak:\n");
  for (uint32_t id : ids) {
    const Allocation& a = allocs[id];
    std::string origin = a.alloc_step == kNoEvent ? "before recording" : scope_path(s, a.scope);
    out += fmt::format("    {:>12}  0x{:x}  {}\n", format_bytes(a.size), a.addr, origin);
    for (uint32_t f : top_frames(s, a.stack, 3)) out += fmt::format("        {}\n", format_frame(s, f));
  }
}

void append_device(std::string& out, const Snapshot& s, uint8_t device) {
  Replay r(s, device);
  int64_t start = r.time_of(kNoEvent);
  int64_t end = r.events().empty() ? start : r.time_of(static_cast<uint32_t>(r.events().size() - 1));
  out += fmt::format("device {}: {} events over {}\n", device, r.events().size(), format_duration(end - start));
  out += fmt::format("  peak allocated  {:>12}  {}\n", format_bytes(r.peak_allocated().bytes),
                     when(r, r.peak_allocated().step, start));
  out += fmt::format("  peak reserved   {:>12}  {}\n", format_bytes(r.peak_reserved().bytes),
                     when(r, r.peak_reserved().step, start));
  out += fmt::format("  at start: {} allocated, {} reserved; {} blocks were live before recording\n",
                     format_bytes(r.initial().allocated), format_bytes(r.initial().reserved),
                     std::count_if(r.allocations().begin(), r.allocations().end(),
                                   [](const Allocation& a) { return a.alloc_step == kNoEvent; }));
  if (r.unmatched_frees())
    out += fmt::format("  warning: {} frees did not match a live block\n", r.unmatched_frees());
  append_largest_live(out, s, r, r.peak_allocated().step);
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  constexpr std::array<const char*, 6> units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < units.size()) v /= 1024.0, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_duration(int64_t ns) {
  double v = static_cast<double>(ns);
  if (std::abs(v) < 1e3) return fmt::format("{} ns", ns);
  if (std::abs(v) < 1e6) return fmt::format("{:.1f} us", v / 1e3);
  if (std::abs(v) < 1e9) return fmt::format("{:.1f} ms", v / 1e6);
  return fmt::format("{:.3f} s", v / 1e9);
}

std::string format_frame(const Snapshot& s, uint32_t frame_id) {
  const Frame& f = s.frames[frame_id];
  std::string name = f.function ? s.strings[f.function] : fmt::format("0x{:x}", f.pc);
  if (f.file) return fmt::format("{} ({}:{})", name, s.strings[f.file], f.line);
  if (f.library) return fmt::format("{} ({})", name, s.strings[f.library]);
  return name;
}

std::vector<uint32_t> top_frames(const Snapshot& s, uint32_t stack, size_t n) {
  std::vector<uint32_t> out;
  for (uint32_t f : s.stacks[stack]) {
    if (out.size() == n) break;
    if (!is_noise(s, s.frames[f])) out.push_back(f);
  }
  return out;
}

std::string info_report(const Snapshot& s) {
  std::string out;
  if (!s.complete) out += "note: the recording was cut short (no footer); showing what was written\n";
  append_metadata(out, s);
  out += fmt::format("{} events, {} kernels, {} scopes, {} stacks, {} frames, {} dropped events\n",
                     s.events.size(), s.kernels.size(), s.scopes.size() - 1, s.stacks.size() - 1,
                     s.frames.size(), s.dropped_events);
  append_action_counts(out, s);
  for (uint8_t d : devices_of(s)) append_device(out, s, d);
  return out;
}

}  // namespace memrec
