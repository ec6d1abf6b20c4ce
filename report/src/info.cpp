#include "memrec/info.h"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>

#include "memrec/devices.h"
#include "memrec/replay.h"
#include "memrec/sites.h"
#include "memrec/units.h"

namespace memrec {
namespace {

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
    if (key == "allocator_settings" || key == "pickle_extra") {  // long JSON; `memrec export` keeps it
      out += fmt::format("  {:<22} ({} bytes of JSON, kept for export)\n", key, value.size());
      continue;
    }
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
  // The site first (docs/attribution.md), then the scopes the block was allocated in.
  for (uint32_t id : ids) {
    const Allocation& a = allocs[id];
    std::string site = a.alloc_step == kNoEvent ? "live before recording" : allocation_site(s, a.stack);
    out += fmt::format("    {:>12}  0x{:x}  {}\n", format_bytes(a.size), a.addr, site);
    std::string scopes = a.alloc_step == kNoEvent ? "" : scope_path(s, a.scope);
    if (!scopes.empty()) out += fmt::format("{:>18}in {}\n", "", scopes);  // under the address
    if (uint32_t row = r.owner_of(id); row != kNoOwner) {
      const Owner& o = s.owners[row];
      uint32_t others = r.owner_names(id) - 1;
      out += fmt::format("{:>18}holds {}{} ({})\n", "", s.strings[o.name],
                         others ? fmt::format(" (+{})", others) : "", to_string(o.kind));
    }
  }
}

// What the owner rows of this device name: "owners: 12 rows (parameters 4, gradients 4, optimizer state 4), 0
// unresolved". Buffers count as parameters, as their category does.
void append_owners(std::string& out, const Snapshot& s, const Replay& r) {
  uint64_t rows = 0, by_kind[kOwnerKindCount] = {};
  for (const Owner& o : s.owners)
    if (o.device == r.device()) ++rows, ++by_kind[static_cast<size_t>(o.kind)];
  if (!rows) return;
  auto n = [&](OwnerKind k) { return by_kind[static_cast<size_t>(k)]; };
  out += fmt::format("  owners: {} rows (parameters {}, gradients {}, optimizer state {}), {} unresolved\n", rows,
                     n(OwnerKind::parameter) + n(OwnerKind::buffer), n(OwnerKind::gradient),
                     n(OwnerKind::optimizer_state), r.unresolved_owners());
}

void append_device(std::string& out, const Snapshot& s, uint8_t device) {
  Replay r(s, device);
  int64_t start = r.time_of(kNoEvent);
  int64_t end = r.steps() == 0 ? start : r.time_of(r.steps() - 1);
  out += fmt::format("device {}: {} events over {}\n", device, r.steps(), format_duration(end - start));
  out += fmt::format("  peak allocated  {:>12}  {}\n", format_bytes(r.peak_allocated().bytes),
                     when(r, r.peak_allocated().step, start));
  out += fmt::format("  peak reserved   {:>12}  {}\n", format_bytes(r.peak_reserved().bytes),
                     when(r, r.peak_reserved().step, start));
  out += fmt::format("  at start: {} allocated, {} reserved; {} blocks were live before recording\n",
                     format_bytes(r.initial().allocated), format_bytes(r.initial().reserved),
                     std::ranges::count(r.alloc_steps(), kNoEvent));
  if (r.unmatched_frees())
    out += fmt::format("  warning: {} frees did not match a live block\n", r.unmatched_frees());
  append_owners(out, s, r);
  for (uint32_t step = 0; step < r.steps(); ++step) {
    const Event& e = r.event(step);
    if (e.action == Action::oom)
      out += fmt::format("  OOM at +{}: requested {} with {} free on the device ({} allocated, {} reserved)\n",
                         format_duration(e.time_ns - start), format_bytes(e.size), format_bytes(e.addr),
                         format_bytes(r.after(step).allocated), format_bytes(r.after(step).reserved));
  }
  append_largest_live(out, s, r, r.peak_allocated().step);
}

}  // namespace

std::string info_report(const Snapshot& s) {
  std::string out;
  append_metadata(out, s);
  out += fmt::format("{} events, {} kernels, {} scopes, {} stacks, {} frames, {} dropped events\n",
                     s.events.size(), s.kernels.size(), s.scopes.size() - 1, s.stacks.size() - 1,
                     s.frames.size(), s.dropped_events);
  append_action_counts(out, s);
  for (uint8_t d : devices_of(s)) append_device(out, s, d);
  return out;
}

}  // namespace memrec
