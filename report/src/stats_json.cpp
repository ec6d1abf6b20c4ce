// `memrec stats --json` and `memrec diff --json`. The field names are a contract with scripts: keep them.
#include "memrec/allocator_output.h"
#include "memrec/device_memory_output.h"
#include "memrec/stats_output.h"
#include "render.h"

namespace memrec {
namespace {

using nlohmann::json;

json peak_json(const PeakShown& p) {
  return {{"bytes", p.bytes}, {"time_ns", p.time_ns}, {"event", p.event}, {"training_step", p.training_step}};
}

json at_json(const LiveAt& at) {
  return {{"label", at.requested_ns ? "requested time" : "allocated peak"},
          {"requested_ns", or_null(at.requested_ns)},
          {"time_ns", at.time_ns},
          {"event", at.event},
          {"note", instant_note(at.instant)},
          {"allocated", at.allocated},
          {"reserved", at.reserved}};
}

json categories_json(const std::array<uint64_t, kCategoryCount>& by_category) {
  json out = json::object();
  for (int c = 0; c < kCategoryCount; ++c)
    if (by_category[c]) out[std::string(to_string(static_cast<Category>(c)))] = by_category[c];
  return out;
}

void add_stack(json& row, const GroupRow::Stack& stack) {
  json frames = json::array();
  for (const GroupRow::Frame& f : stack.frames) frames.push_back({{"frame", f.label}, {"user", f.user}, {"site", f.site}});
  row["site"] = stack.site;
  row["op"] = stack.op;
  row["stacks"] = stack.stacks;
  row["frames"] = std::move(frames);
}

json groups_json(const std::vector<GroupRow>& groups) {
  json rows = json::array();
  for (const GroupRow& g : groups) {
    json owners = json::array();
    for (const auto& [name, bytes] : g.owners) owners.push_back({{"owner", name}, {"bytes", bytes}});
    rows.push_back({{"key", g.key}, {"bytes", g.bytes}, {"count", g.count}, {"share", g.share},
                    {"categories", categories_json(g.by_category)}, {"owned", g.owned}, {"owners", owners}});
    if (g.stack) add_stack(rows.back(), *g.stack);
  }
  return rows;
}

json sites_json(const std::vector<SiteRow>& sites) {
  json rows = json::array();
  for (const SiteRow& s : sites) rows.push_back({{"key", s.key}, {"site", s.site}, {"bytes", s.bytes}, {"count", s.count}});
  return rows;
}

json size_histogram_json(const std::vector<SizeBucket>& buckets) {
  json rows = json::array();
  for (const SizeBucket& b : buckets) rows.push_back({{"min", b.min}, {"max", b.max}, {"count", b.count}, {"bytes", b.bytes}});
  return rows;
}

json fragmentation_json(const Fragmentation& f) {
  return {{"reserved", f.reserved},         {"allocated", f.allocated},     {"rounding", f.rounding},
          {"pending_free", f.pending_free}, {"split_free", f.split_free},   {"other_stream", f.other_stream},
          {"cached_free", f.cached_free},   {"largest_free", f.largest_free}, {"segments", f.segments},
          {"unplaced", f.unplaced},         {"why_no_segments", why_no_segments(f)}};
}

json ooms_json(const std::vector<OomShown>& ooms) {
  json rows = json::array();
  for (const OomShown& o : ooms)
    rows.push_back({{"time_ns", o.time_ns},
                    {"event", o.event},
                    {"requested", o.requested},
                    {"device_free", o.device_free},
                    {"allocated", o.allocated},
                    {"reserved", o.reserved},
                    {"cached", o.cached},
                    {"fragmentation", fragmentation_json(o.fragmentation)},
                    {"caused_by_fragmentation", o.caused_by_fragmentation},
                    {"top_sites", groups_json(o.top_sites)}});
  return rows;
}

json kernels_json(const std::vector<KernelStats>& kernels) {
  json rows = json::array();
  for (const KernelStats& k : kernels)
    rows.push_back({{"name", k.name}, {"kind", to_string(k.kind)}, {"count", k.count}, {"total_ns", k.total_ns},
                    {"avg_ns", k.avg_ns()}, {"max_ns", k.max_ns}});
  return rows;
}

json side_json(const DiffSide& s) {
  return {{"device", s.device}, {"peak_allocated", s.peak_allocated}, {"peak_reserved", s.peak_reserved},
          {"events", s.events}};
}

json changes_json(const std::vector<GroupChange>& changes) {
  json rows = json::array();
  for (const GroupChange& c : changes)
    rows.push_back({{"key", c.key}, {"a_bytes", c.a_bytes}, {"b_bytes", c.b_bytes}, {"delta", c.delta},
                    {"a_count", c.a_count}, {"b_count", c.b_count}});
  return rows;
}

}  // namespace

json group_changes_json(const GroupChanges& changes) {
  return {{"groups_changed", changes.changed}, {"rows", changes_json(changes.rows)}};
}

json warnings_json(std::initializer_list<const Snapshot*> inputs) {
  json out = json::array();
  for (const Snapshot* s : inputs)
    for (const std::string& w : s->warnings) out.push_back(w);
  return out;
}

json stats_json(const StatsResult& s) {
  return {{"device", s.device},
          {"events", s.events},
          {"complete", s.complete},
          {"warnings", s.warnings},
          {"dropped_events", s.dropped_events},
          {"duration_ns", s.duration_ns},
          {"peak_allocated", peak_json(s.peak_allocated)},
          {"peak_reserved", peak_json(s.peak_reserved)},
          {"at", at_json(s.at)},
          {"by", to_string(s.by)},
          {"live", groups_json(s.live)},
          {"full_stack", s.full_stack},
          {"top_sites", {{"by_bytes", sites_json(s.top_by_bytes)}, {"by_count", sites_json(s.top_by_count)}}},
          {"size_histogram", size_histogram_json(s.size_histogram)},
          {"fragmentation", fragmentation_json(s.fragmentation)},
          {"fragmentation_culprits", fragmentation_culprits_json(s.fragmentation_culprits)},
          {"ooms", ooms_json(s.ooms)},
          {"kernels", kernels_json(s.kernels)},
          {"kernel_steps", s.kernel_steps},
          {"device_memory", device_memory_json(s.device_memory)}};
}

json diff_json(const DiffResult& d) {
  json out = {{"by", to_string(d.by)}, {"warnings", d.warnings}, {"a", side_json(d.a)}, {"b", side_json(d.b)},
              {"delta_peak_allocated", d.delta_peak_allocated}, {"delta_peak_reserved", d.delta_peak_reserved},
              {"groups_changed", d.changes.changed}, {"rows", changes_json(d.changes.rows)}};
  if (d.ranks) out["ranks"] = {{"a", d.ranks->first}, {"b", d.ranks->second}};
  return out;
}

}  // namespace memrec
