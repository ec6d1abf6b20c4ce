#include "memrec/file_info.h"

#include <algorithm>

#include <fmt/format.h>

#include "memrec/devices.h"
#include "memrec/replay.h"
#include "memrec/sites.h"

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

Moment moment(const Replay& r, uint32_t step) {
  if (step == kNoEvent) return {};
  return {step, r.time_of(step) - r.time_of(kNoEvent)};
}

InfoBlock block(const Snapshot& s, const Replay& r, uint32_t id) {
  const Allocation a = r.allocations()[id];
  InfoBlock out;
  out.bytes = a.size, out.addr = a.addr, out.before_recording = a.alloc_step == kNoEvent;
  if (!out.before_recording) out.site = allocation_site(s, a.stack), out.scopes = scope_path(s, a.scope);
  if (uint32_t row = r.owner_of(id); row != kNoOwner) {
    out.owner = s.strings[s.owners[row].name];
    out.other_owners = r.owner_names(id) - 1;
    out.owner_kind = s.owners[row].kind;
  }
  return out;
}

std::vector<InfoBlock> largest_live(const Snapshot& s, const Replay& r, uint32_t step) {
  auto ids = r.live_after(step);
  const auto& allocs = r.allocations();
  std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return allocs[a].size > allocs[b].size; });
  ids.resize(std::min<size_t>(ids.size(), 10));
  std::vector<InfoBlock> out;
  for (uint32_t id : ids) out.push_back(block(s, r, id));
  return out;
}

std::optional<InfoOwners> owners(const Snapshot& s, const Replay& r) {
  InfoOwners out;
  for (const Owner& o : s.owners) {
    if (o.device != r.device()) continue;
    ++out.rows;
    if (o.kind == OwnerKind::parameter || o.kind == OwnerKind::buffer) ++out.parameters;
    if (o.kind == OwnerKind::gradient) ++out.gradients;
    if (o.kind == OwnerKind::optimizer_state) ++out.optimizer_state;
  }
  out.unresolved = r.unresolved_owners();
  return out.rows ? std::optional(out) : std::nullopt;
}

std::vector<InfoOom> ooms(const Replay& r) {
  std::vector<InfoOom> out;
  for (uint32_t step = 0; step < r.steps(); ++step) {
    const Event& e = r.event(step);
    if (e.action == Action::oom)
      out.push_back({moment(r, step), e.size, e.addr, r.after(step).allocated, r.after(step).reserved});
  }
  return out;
}

DeviceInfo device_info(const Snapshot& s, uint8_t device) {
  Replay r(s, device);
  DeviceInfo out;
  out.device = device;
  out.events = r.steps();
  out.duration_ns = r.steps() == 0 ? 0 : r.time_of(r.steps() - 1) - r.time_of(kNoEvent);
  out.peak_allocated = {r.peak_allocated().bytes, moment(r, r.peak_allocated().step)};
  out.peak_reserved = {r.peak_reserved().bytes, moment(r, r.peak_reserved().step)};
  out.initial_allocated = r.initial().allocated;
  out.initial_reserved = r.initial().reserved;
  out.blocks_before_recording = std::ranges::count(r.alloc_steps(), kNoEvent);
  out.unmatched_frees = r.unmatched_frees();
  out.owners = owners(s, r);
  out.ooms = ooms(r);
  out.largest_live = largest_live(s, r, r.peak_allocated().step);
  return out;
}

}  // namespace

std::string kernel_steps_note(const Snapshot& s) {
  auto rule = s.metadata.find("recorder.kernel_steps"), traced = s.metadata.find("recorder.kernel_steps_traced");
  if (rule == s.metadata.end() || traced == s.metadata.end() || rule->second == "all") return "";
  return fmt::format("kernels traced on {} steps ({})", traced->second, rule->second);
}

FileInfo file_info(const Snapshot& s) {
  FileInfo out;
  out.metadata = s.metadata;
  out.kernel_steps = kernel_steps_note(s);
  out.cost = recording_cost(s);
  out.events = s.events.size(), out.kernels = s.kernels.size(), out.scopes = s.scopes.size() - 1;
  out.stacks = s.stacks.size() - 1, out.frames = s.frames.size(), out.dropped_events = s.dropped_events;
  out.complete = s.complete;
  out.warnings = s.warnings;
  for (const Event& e : s.events) ++out.actions[static_cast<size_t>(e.action)];
  for (uint8_t d : devices_of(s)) out.devices.push_back(device_info(s, d));
  return out;
}

}  // namespace memrec
