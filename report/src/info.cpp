#include "memrec/info.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "memrec/units.h"
#include "render.h"

namespace memrec {
namespace {

using nlohmann::json;

// What a metadata key holding long JSON is for (it is summed up, not printed), or "" for the other keys.
std::string_view long_json(const std::string& key) {
  if (key == "allocator_settings" || key == "pickle_extra") return "kept for export";
  if (key == "compiled_code") return "generated code mapped to the model's lines and modules";
  if (key == "compiled_pieces") return "the modules of each piece of a split graph";
  return {};
}

void append_metadata(std::string& out, const FileInfo& info) {
  for (const auto& [key, value] : info.metadata) {
    if (std::string_view what = long_json(key); !what.empty())
      out += fmt::format("  {:<22} ({} bytes of JSON, {})\n", key, value.size(), what);
    else
      out += fmt::format("  {:<22} {}\n", key, value);
  }
}

void append_action_counts(std::string& out, const FileInfo& info) {
  out += "events by action:\n";
  for (int a = 0; a < kActionCount; ++a)
    if (info.actions[a]) out += fmt::format("  {:<16} {:>12}\n", to_string(static_cast<Action>(a)), info.actions[a]);
}

std::string when(const Moment& m) {
  if (m.event < 0) return "at start";
  return fmt::format("at +{} (event {} of this device)", format_duration(m.time_ns), m.event);
}

std::string owner_text(const InfoBlock& b) {
  return fmt::format("{}{} ({})", b.owner, b.other_owners ? fmt::format(" (+{})", b.other_owners) : "",
                     to_string(*b.owner_kind));
}

void append_largest_live(std::string& out, const DeviceInfo& d) {
  out += fmt::format("  largest live allocations at the allocated peak:\n");
  // The site first (docs/attribution.md), then the scopes the block was allocated in.
  for (const InfoBlock& b : d.largest_live) {
    out += fmt::format("    {:>12}  0x{:x}  {}\n", format_bytes(b.bytes), b.addr,
                       b.before_recording ? "live before recording" : b.site);
    if (!b.scopes.empty()) out += fmt::format("{:>18}in {}\n", "", b.scopes);  // under the address
    if (b.owner_kind) out += fmt::format("{:>18}holds {}\n", "", owner_text(b));
  }
}

void append_device(std::string& out, const DeviceInfo& d) {
  out += fmt::format("device {}: {} events over {}\n", d.device, d.events, format_duration(d.duration_ns));
  out += fmt::format("  peak allocated  {:>12}  {}\n", format_bytes(d.peak_allocated.bytes), when(d.peak_allocated.at));
  out += fmt::format("  peak reserved   {:>12}  {}\n", format_bytes(d.peak_reserved.bytes), when(d.peak_reserved.at));
  out += fmt::format("  at start: {} allocated, {} reserved; {} blocks were live before recording\n",
                     format_bytes(d.initial_allocated), format_bytes(d.initial_reserved), d.blocks_before_recording);
  if (d.unmatched_frees) out += fmt::format("  warning: {} frees did not match a live block\n", d.unmatched_frees);
  if (const auto& o = d.owners)
    out += fmt::format("  owners: {} rows (parameters {}, gradients {}, optimizer state {}), {} unresolved\n", o->rows,
                       o->parameters, o->gradients, o->optimizer_state, o->unresolved);
  for (const InfoOom& o : d.ooms)
    out += fmt::format("  OOM at +{}: requested {} with {} free on the device ({} allocated, {} reserved)\n",
                       format_duration(o.at.time_ns), format_bytes(o.requested), format_bytes(o.device_free),
                       format_bytes(o.allocated), format_bytes(o.reserved));
  append_largest_live(out, d);
}

json cost_json(const std::optional<RecordingCost>& c) {
  if (!c) return nullptr;
  return {{"events", c->events},       {"steps", c->steps},         {"step_ns", c->step_ns},
          {"span_ns", c->span_ns},     {"hooks_ns", c->hooks_ns()}, {"share", c->share()},
          {"events_ns", c->events_ns}, {"ops_ns", c->ops_ns},       {"scopes_ns", c->scopes_ns},
          {"op_calls", c->op_calls},   {"scope_calls", c->scope_calls}};
}

json peak_json(const InfoPeak& p) { return {{"bytes", p.bytes}, {"event", p.at.event}, {"time_ns", p.at.time_ns}}; }

json owners_json(const std::optional<InfoOwners>& o) {
  if (!o) return nullptr;
  return {{"rows", o->rows}, {"parameters", o->parameters}, {"gradients", o->gradients},
          {"optimizer_state", o->optimizer_state}, {"unresolved", o->unresolved}};
}

json block_json(const InfoBlock& b) {
  return {{"bytes", b.bytes}, {"addr", b.addr}, {"before_recording", b.before_recording}, {"site", b.site},
          {"scopes", b.scopes}, {"owner", b.owner_kind ? json(b.owner) : json(nullptr)},
          {"owner_kind", b.owner_kind ? json(to_string(*b.owner_kind)) : json(nullptr)},
          {"other_owners", b.other_owners}};
}

json device_json(const DeviceInfo& d) {
  json ooms = json::array(), blocks = json::array();
  for (const InfoOom& o : d.ooms)
    ooms.push_back({{"event", o.at.event}, {"time_ns", o.at.time_ns}, {"requested", o.requested},
                    {"device_free", o.device_free}, {"allocated", o.allocated}, {"reserved", o.reserved}});
  for (const InfoBlock& b : d.largest_live) blocks.push_back(block_json(b));
  return {{"device", d.device},
          {"events", d.events},
          {"duration_ns", d.duration_ns},
          {"peak_allocated", peak_json(d.peak_allocated)},
          {"peak_reserved", peak_json(d.peak_reserved)},
          {"initial_allocated", d.initial_allocated},
          {"initial_reserved", d.initial_reserved},
          {"blocks_before_recording", d.blocks_before_recording},
          {"unmatched_frees", d.unmatched_frees},
          {"owners", owners_json(d.owners)},
          {"ooms", std::move(ooms)},
          {"largest_live", std::move(blocks)}};
}

}  // namespace

std::string cost_text(const RecordingCost& c) {
  int64_t per = int64_t(std::max<uint64_t>(c.steps, 1));
  std::string of = c.steps ? fmt::format("of the median step, {}", format_duration(c.step_ns))
                           : fmt::format("of the recording, {}", format_duration(c.span_ns));
  return fmt::format(
      "recording cost: {} events; memrec's hooks {} {} ({:.1f}% {}): allocator hooks {}, op callbacks {} ({} calls), "
      "scope hooks {} ({} calls); not counted: torch's RecordFunction around each op callback, the scope hooks' "
      "Python\n",
      c.events, format_duration(c.hooks_per_step_ns()), c.steps ? "a step" : "in all", 100.0 * c.share(), of,
      format_duration(c.events_ns / per), format_duration(c.ops_ns / per), c.op_calls / uint64_t(per),
      format_duration(c.scopes_ns / per), c.scope_calls / uint64_t(per));
}

std::string info_text(const FileInfo& info) {
  std::string out;
  append_metadata(out, info);
  out += fmt::format("{} events, {} kernels, {} scopes, {} stacks, {} frames, {} dropped events\n", info.events,
                     info.kernels, info.scopes, info.stacks, info.frames, info.dropped_events);
  if (!info.kernel_steps.empty()) out += info.kernel_steps + "\n";
  if (info.cost) out += cost_text(*info.cost);
  append_action_counts(out, info);
  for (const DeviceInfo& d : info.devices) append_device(out, d);
  return out;
}

json info_json(const FileInfo& info) {
  json actions = json::object(), devices = json::array();
  for (int a = 0; a < kActionCount; ++a)
    if (info.actions[a]) actions[std::string(to_string(static_cast<Action>(a)))] = info.actions[a];
  for (const DeviceInfo& d : info.devices) devices.push_back(device_json(d));
  return {{"metadata", info.metadata},   {"complete", info.complete},     {"warnings", info.warnings},
          {"events", info.events},       {"kernels", info.kernels},       {"kernel_steps", info.kernel_steps},
          {"scopes", info.scopes},       {"stacks", info.stacks},         {"frames", info.frames},
          {"dropped_events", info.dropped_events}, {"cost", cost_json(info.cost)},
          {"actions", std::move(actions)}, {"devices", std::move(devices)}};
}

}  // namespace memrec
