#include "memrec/stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "memrec/allocator_whatif.h"
#include "memrec/attribution.h"
#include "memrec/device_memory.h"
#include "memrec/devices.h"
#include "memrec/sites.h"
#include "memrec/units.h"

namespace memrec {
namespace {

using nlohmann::json;

std::string training_step(const Snapshot& s, uint8_t device, int64_t t) {
  uint32_t id = scope_at(s, ScopeKind::step, device, t);
  return id ? s.strings[s.scopes[id].name] : "";
}

json peak_json(const Snapshot& s, const Replay& r, const Peak& p) {
  return {{"bytes", p.bytes},
          {"time_ns", r.time_of(p.step) - r.time_of(kNoEvent)},
          {"event", p.step == kNoEvent ? -1 : static_cast<int64_t>(p.step)},
          {"training_step", training_step(s, r.device(), r.time_of(p.step))}};
}

json categories_json(const Group& g) {
  json out = json::object();
  for (int c = 0; c < kCategoryCount; ++c)
    if (g.by_category[c]) out[std::string(to_string(static_cast<Category>(c)))] = g.by_category[c];
  return out;
}

// The site, the op and every frame of a stack group's first stack (--full-stack prints the frames).
void add_stack_fields(json& row, const Snapshot& s, const Group& g) {
  if (!g.stacks) return;
  json frames = json::array();
  for (const MarkedFrame& f : marked_frames(s, g.stack))
    frames.push_back({{"frame", frame_label(s, f.frame)}, {"user", f.user}, {"site", f.site}});
  row["site"] = site_label(s, g.stack);
  row["op"] = op_label(s, g.stack);
  row["stacks"] = g.stacks;
  row["frames"] = std::move(frames);
}

json groups_json(const Snapshot& s, const std::vector<Group>& groups, size_t top, uint64_t total) {
  json rows = json::array();
  uint64_t shown = 0, shown_count = 0, shown_owned = 0;
  for (size_t i = 0; i < groups.size() && i < top; ++i) {
    const Group& g = groups[i];
    rows.push_back({{"key", g.key}, {"bytes", g.bytes}, {"count", g.count},
                    {"share", total ? double(g.bytes) / double(total) : 0.0}, {"categories", categories_json(g)},
                    {"owned", g.owned}});
    add_stack_fields(rows.back(), s, g);
    shown += g.bytes;
    shown_count += g.count;
    shown_owned += g.owned;
  }
  if (groups.size() > top) {
    uint64_t count = 0, owned = 0;
    for (const Group& g : groups) count += g.count, owned += g.owned;
    rows.push_back({{"key", fmt::format("<{} more>", groups.size() - top)}, {"bytes", total - shown},
                    {"count", count - shown_count}, {"share", total ? double(total - shown) / double(total) : 0.0},
                    {"categories", json::object()}, {"owned", owned - shown_owned}});
  }
  return rows;
}

std::vector<uint32_t> recorded_allocations(const Replay& r) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < r.alloc_steps().size(); ++i)
    if (r.alloc_steps()[i] != kNoEvent) ids.push_back(i);
  return ids;
}

json top_sites_json(const Snapshot& s, const Replay& r, size_t top) {
  auto sites = group_allocations(s, r, recorded_allocations(r), GroupBy::stack);
  auto by_count = sites;
  std::stable_sort(by_count.begin(), by_count.end(), [](const Group& a, const Group& b) { return a.count > b.count; });
  auto rows = [&](const std::vector<Group>& g) {
    json out = json::array();
    for (size_t i = 0; i < g.size() && i < top; ++i)
      out.push_back({{"key", g[i].key}, {"site", site_label(s, g[i].stack)}, {"bytes", g[i].bytes}, {"count", g[i].count}});
    return out;
  };
  return {{"by_bytes", rows(sites)}, {"by_count", rows(by_count)}};
}

// Power-of-two buckets of recorded allocation sizes.
json size_histogram_json(const Replay& r) {
  std::array<std::pair<uint64_t, uint64_t>, 65> buckets{};  // bit width -> count, bytes
  for (uint32_t id = 0; id < r.alloc_steps().size(); ++id) {
    if (r.alloc_steps()[id] == kNoEvent) continue;
    uint64_t size = r.size_of(id);
    auto& [count, bytes] = buckets[std::bit_width(size)];
    ++count;
    bytes += size;
  }
  json out = json::array();
  for (int width = 0; width <= 64; ++width) {
    const auto& cb = buckets[width];
    if (cb.first == 0) continue;
    uint64_t lo = width == 0 ? 0 : uint64_t{1} << (width - 1);
    uint64_t hi = width == 0 ? 0 : (width >= 64 ? UINT64_MAX : (uint64_t{1} << width) - 1);
    out.push_back({{"min", lo}, {"max", hi}, {"count", cb.first}, {"bytes", cb.second}});
  }
  return out;
}

json fragmentation_json(const Fragmentation& f) {
  return {{"reserved", f.reserved},         {"allocated", f.allocated},     {"rounding", f.rounding},
          {"pending_free", f.pending_free}, {"split_free", f.split_free},   {"other_stream", f.other_stream},
          {"cached_free", f.cached_free},   {"largest_free", f.largest_free}, {"segments", f.segments},
          {"unplaced", f.unplaced},         {"why_no_segments", why_no_segments(f)}};
}

json ooms_json(const Snapshot& s, const Replay& r, size_t top) {
  json out = json::array();
  for (const OomReport& o : explain_ooms(s, r)) {
    out.push_back({{"time_ns", o.time_ns - r.time_of(kNoEvent)},
                   {"event", o.step},
                   {"requested", o.requested},
                   {"device_free", o.device_free},
                   {"allocated", o.totals.allocated},
                   {"reserved", o.totals.reserved},
                   {"cached", o.fragmentation.reserved - std::min(o.fragmentation.reserved, o.fragmentation.allocated)},
                   {"fragmentation", fragmentation_json(o.fragmentation)},
                   {"caused_by_fragmentation", o.caused_by_fragmentation},
                   {"top_sites", groups_json(s, o.top_sites, top, o.totals.allocated)}});
  }
  return out;
}

json kernels_json(const Snapshot& s, uint8_t device, size_t top) {
  json out = json::array();
  for (const KernelStats& k : kernel_stats(s, device)) {
    if (out.size() == top) break;
    out.push_back({{"name", k.name}, {"kind", to_string(k.kind)}, {"count", k.count}, {"total_ns", k.total_ns},
                   {"avg_ns", k.total_ns / static_cast<int64_t>(k.count)}, {"max_ns", k.max_ns}});
  }
  return out;
}

std::string signed_bytes(int64_t v) { return (v < 0 ? "-" : "+") + format_bytes(static_cast<uint64_t>(std::llabs(v))); }

std::string pct(double share) { return fmt::format("{:5.1f}%", share * 100.0); }

// A stack row's whole stack, innermost first, each frame marked: "site", "user" (user code), or blank (internal).
void render_frames(std::string& out, const json& row, const std::string& indent) {
  if (!row.contains("frames")) return;
  if (row["stacks"].get<uint32_t>() > 1)
    out += fmt::format("{}{:>14}first of {} stacks with this site and op:\n", indent, "", row["stacks"].get<uint32_t>());
  for (const json& f : row["frames"]) {
    const char* mark = f["site"].get<bool>() ? "site" : f["user"].get<bool>() ? "user" : "";
    out += fmt::format("{}{:>12}  {}\n", indent, mark, f["frame"].get<std::string>());
  }
}

void render_groups(std::string& out, const json& rows, const std::string& indent, bool split = false,
                   bool full_stack = false) {
  for (const json& g : rows) {
    out += fmt::format("{}{:>12} {} {:>8}x  {}\n", indent, format_bytes(g["bytes"]), pct(g["share"]),
                       g["count"].get<uint64_t>(), g["key"].get<std::string>());
    if (full_stack) render_frames(out, g, indent);
    if (!split || g["categories"].empty()) continue;
    std::string parts;
    for (const auto& [name, bytes] : g["categories"].items())
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name, format_bytes(bytes));
    out += fmt::format("{}{:>31}{}\n", indent, "", parts);
  }
}

void render_kernels(std::string& out, const json& kernels) {
  out += fmt::format("\ntop kernels by GPU time:\n  {:>12} {:>8} {:>12} {:>12}  {}\n", "total", "count", "avg", "max", "name");
  for (const json& k : kernels)
    out += fmt::format("  {:>12} {:>8} {:>12} {:>12}  {}\n", format_duration(k["total_ns"]), k["count"].get<uint64_t>(),
                       format_duration(k["avg_ns"]), format_duration(k["max_ns"]), k["name"].get<std::string>());
}

void render_fragmentation(std::string& out, const json& f) {
  if (f["segments"].get<uint64_t>() == 0) {
    out += fmt::format("fragmentation: no reserved segments recorded ({})\n", f["why_no_segments"].get<std::string>());
    return;
  }
  auto line = [&](const char* what, const char* key) {
    out += fmt::format("  {:<44} {:>12}\n", what, format_bytes(f[key]));
  };
  out += fmt::format("fragmentation (reserved - allocated = {}) in {} segments:\n",
                     format_bytes(f["reserved"].get<uint64_t>() - f["allocated"].get<uint64_t>()),
                     f["segments"].get<uint64_t>());
  line("block rounding (512-byte granularity)", "rounding");
  line("freed, waiting for other streams", "pending_free");
  line("free pieces of split segments", "split_free");
  line("free pieces of other streams' segments", "other_stream");
  line("cached, wholly free segments", "cached_free");
  line("largest contiguous free range", "largest_free");
  if (f["unplaced"].get<uint64_t>())
    out += fmt::format("  not counted: {} allocated in segments the recording does not hold\n", format_bytes(f["unplaced"]));
}

void render_oom(std::string& out, const json& o) {
  uint64_t device_free = o["device_free"];  // unknown (0) for the CPU allocator
  out += fmt::format("OOM at +{}: requested {}{}; {} allocated, {} reserved\n", format_duration(o["time_ns"]),
                     format_bytes(o["requested"]),
                     device_free ? fmt::format(", the device had {} free", format_bytes(device_free)) : "",
                     format_bytes(o["allocated"]), format_bytes(o["reserved"]));
  const json& f = o["fragmentation"];
  if (o["caused_by_fragmentation"].get<bool>())
    out += fmt::format("  fragmentation: {} was cached but the largest free range was {}\n",
                       format_bytes(o["cached"]), format_bytes(f["largest_free"]));
  else
    out += "  not fragmentation: the program needed more memory than the device had\n";
  out += "  who held the memory:\n";
  render_groups(out, o["top_sites"], "    ");
}

std::string peak_line(const char* what, const json& p) {
  if (p["bytes"].get<uint64_t>() == 0) return fmt::format("{:<15} {:>12}\n", what, "none");
  std::string step = p["training_step"].get<std::string>();
  return fmt::format("{:<15} {:>12}  at +{} (event {}){}\n", what, format_bytes(p["bytes"]),
                     format_duration(p["time_ns"]), p["event"].get<int64_t>(), step.empty() ? "" : ", " + step);
}

// "the allocated peak (+1.2 ms)"; for a requested time, also the event whose state it shows.
std::string instant_label(const json& at) {
  std::string event = at["event"].get<int64_t>() < 0 ? "the start" : fmt::format("event {}", at["event"].get<int64_t>());
  if (at["requested_ns"].is_null()) return fmt::format("the {} (+{})", at["label"].get<std::string>(), format_duration(at["time_ns"]));
  return fmt::format("+{} (the state after {}, at +{})", format_duration(at["requested_ns"]), event,
                     format_duration(at["time_ns"]));
}

}  // namespace

std::optional<int64_t> parse_at(const std::string& text) {
  if (text == "peak") return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value < 0)
    throw Error("--at wants 'peak' or a time after the start like 12ms, 1.5s, 300us: " + text);
  std::string unit(end, text.data() + text.size());
  static const std::map<std::string, double> scale = {{"", 1e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}};
  auto it = scale.find(unit);
  if (it == scale.end()) throw Error("--at " + text + ": unknown unit '" + unit + "' (use s, ms, us or ns)");
  double ns = std::round(value * it->second);
  // 2^63 is the first double past int64's range; converting it or more is undefined.
  if (ns >= 0x1p63) throw Error("--at " + text + " is too large: times up to 292 years (9223372036 s) are counted");
  return static_cast<int64_t>(ns);
}

Instant instant_at(const Replay& r, std::optional<int64_t> at_ns) {
  if (!at_ns) return {r.peak_allocated().step, ""};
  if (r.steps() == 0) return {kNoEvent, "the device has no events; showing the state at the start"};
  int64_t start = r.time_of(kNoEvent), duration = r.time_of(r.steps() - 1) - start;
  if (*at_ns > duration)  // compared as offsets: start + a huge offset would overflow
    return {r.steps() - 1, fmt::format("--at +{} is past the end of the recording (+{}); showing its last event",
                                       format_duration(*at_ns), format_duration(duration))};
  uint32_t lo = 0, hi = r.steps();  // the first step after the time; step 0 is at the start, so not it
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    (r.time_of(mid) - start <= *at_ns ? lo : hi) = mid;
  }
  return {lo, ""};
}

json warnings_json(std::initializer_list<const Snapshot*> inputs) {
  json out = json::array();
  for (const Snapshot* s : inputs)
    for (const std::string& w : s->warnings) out.push_back(w);
  return out;
}

nlohmann::json stats_json(const Snapshot& s, const StatsOptions& o) {
  uint8_t device = choose_device(s, o.device);
  Replay r(s, device);
  Instant instant = instant_at(r, o.at_ns);
  uint32_t step = instant.step;
  const Totals& at = r.after(step);
  auto live = group_live(s, r, step, o.by);
  int64_t start = r.time_of(kNoEvent);
  int64_t end = r.steps() == 0 ? start : r.time_of(r.steps() - 1);
  return {{"device", device},
          {"events", r.steps()},
          {"complete", s.complete},
          {"warnings", warnings_json({&s})},
          {"dropped_events", s.dropped_events},
          {"duration_ns", end - start},
          {"peak_allocated", peak_json(s, r, r.peak_allocated())},
          {"peak_reserved", peak_json(s, r, r.peak_reserved())},
          {"at", {{"label", o.at_ns ? "requested time" : "allocated peak"},
                  {"requested_ns", o.at_ns ? json(*o.at_ns) : json(nullptr)},
                  {"time_ns", r.time_of(step) - start},
                  {"event", step == kNoEvent ? -1 : static_cast<int64_t>(step)},
                  {"note", instant.note},
                  {"allocated", at.allocated},
                  {"reserved", at.reserved}}},
          {"by", to_string(o.by)},
          {"live", groups_json(s, live, o.top, at.allocated)},
          {"full_stack", o.full_stack},
          {"top_sites", top_sites_json(s, r, o.top)},
          {"size_histogram", size_histogram_json(r)},
          {"fragmentation", fragmentation_json(fragmentation_after(s, r, step))},
          {"fragmentation_culprits", fragmentation_culprits_json(s, r, o.top)},
          {"ooms", ooms_json(s, r, o.top)},
          {"kernels", o.kernels ? kernels_json(s, device, o.top) : json::array()},
          {"device_memory", device_memory_json(s, r, step, o.top)}};
}

std::string stats_text(const nlohmann::json& j) {
  std::string out;
  if (j["dropped_events"].get<uint64_t>()) out += fmt::format("warning: {} events were dropped while recording\n", j["dropped_events"].get<uint64_t>());
  const json& at = j["at"];
  if (!at["note"].get<std::string>().empty()) out += "note: " + at["note"].get<std::string>() + "\n";
  out += fmt::format("device {}: {} events over {}\n", j["device"].get<int>(), j["events"].get<uint64_t>(),
                     format_duration(j["duration_ns"]));
  out += peak_line("peak allocated", j["peak_allocated"]);
  out += peak_line("peak reserved", j["peak_reserved"]);
  out += fmt::format("\nlive at {}: {} allocated, {} reserved, by {}:\n", instant_label(at), format_bytes(at["allocated"]),
                     format_bytes(at["reserved"]), j["by"].get<std::string>());
  std::string by = j["by"];
  render_groups(out, j["live"], "  ", by != "stack" && by != "category", j.value("full_stack", false));
  out += "\ntop allocation sites by bytes allocated over the run:\n";
  for (const json& g : j["top_sites"]["by_bytes"])
    out += fmt::format("  {:>12} {:>8}x  {}\n", format_bytes(g["bytes"]), g["count"].get<uint64_t>(), g["key"].get<std::string>());
  out += "top allocation sites by count:\n";
  for (const json& g : j["top_sites"]["by_count"])
    out += fmt::format("  {:>8}x {:>12}  {}\n", g["count"].get<uint64_t>(), format_bytes(g["bytes"]), g["key"].get<std::string>());
  out += "\nallocation sizes:\n";
  for (const json& b : j["size_histogram"])
    out += fmt::format("  {:>12} .. {:<12} {:>10}x {:>12}\n", format_bytes(b["min"]), format_bytes(b["max"]),
                       b["count"].get<uint64_t>(), format_bytes(b["bytes"]));
  out += "\n";
  render_fragmentation(out, j["fragmentation"]);
  render_fragmentation_culprits(out, j["fragmentation_culprits"]);
  out += device_memory_text(j["device_memory"]);
  for (const json& o : j["ooms"]) render_oom(out += "\n", o);
  if (!j["kernels"].empty()) render_kernels(out, j["kernels"]);
  return out;
}

nlohmann::json group_changes_json(std::span<const Group> a, std::span<const Group> b, size_t top) {
  std::map<std::string, std::pair<const Group*, const Group*>> rows;
  for (const Group& g : a) rows[g.key].first = &g;
  for (const Group& g : b) rows[g.key].second = &g;
  json out = json::array();
  for (auto& [key, pair] : rows) {
    uint64_t ab = pair.first ? pair.first->bytes : 0, bb = pair.second ? pair.second->bytes : 0;
    out.push_back({{"key", key}, {"a_bytes", ab}, {"b_bytes", bb},
                   {"delta", static_cast<int64_t>(bb) - static_cast<int64_t>(ab)},
                   {"a_count", pair.first ? pair.first->count : 0}, {"b_count", pair.second ? pair.second->count : 0}});
  }
  std::stable_sort(out.begin(), out.end(), [](const json& x, const json& y) {
    return std::llabs(x["delta"].get<int64_t>()) > std::llabs(y["delta"].get<int64_t>());
  });
  size_t changed = std::count_if(out.begin(), out.end(), [](const json& r) { return r["delta"].get<int64_t>() != 0; });
  if (out.size() > top) out.erase(out.begin() + static_cast<std::ptrdiff_t>(top), out.end());
  return {{"groups_changed", changed}, {"rows", out}};
}

std::string group_changes_text(const nlohmann::json& rows) {
  std::string out;
  for (const json& r : rows) {
    if (r["delta"].get<int64_t>() == 0) continue;
    out += fmt::format("  {:>13} {:>12} -> {:<12} {}\n", signed_bytes(r["delta"]), format_bytes(r["a_bytes"]),
                       format_bytes(r["b_bytes"]), r["key"].get<std::string>());
  }
  return out;
}

nlohmann::json diff_json(const Snapshot& a, const Snapshot& b, const StatsOptions& o) {
  Replay ra(a, choose_device(a, o.device)), rb(b, choose_device(b, o.device));
  auto ga = group_live(a, ra, ra.peak_allocated().step, o.by);
  auto gb = group_live(b, rb, rb.peak_allocated().step, o.by);
  json changes = group_changes_json(ga, gb, o.top);
  auto side = [](const Replay& r) {
    return json{{"device", r.device()}, {"peak_allocated", r.peak_allocated().bytes},
                {"peak_reserved", r.peak_reserved().bytes}, {"events", r.steps()}};
  };
  return {{"by", to_string(o.by)}, {"warnings", warnings_json({&a, &b})}, {"a", side(ra)}, {"b", side(rb)},
          {"delta_peak_allocated", int64_t(rb.peak_allocated().bytes) - int64_t(ra.peak_allocated().bytes)},
          {"delta_peak_reserved", int64_t(rb.peak_reserved().bytes) - int64_t(ra.peak_reserved().bytes)},
          {"groups_changed", changes["groups_changed"]}, {"rows", changes["rows"]}};
}

std::string diff_text(const nlohmann::json& d) {
  std::string out, a = "a", b = "b";
  if (d.contains("ranks")) {  // two ranks of one run: named by rank
    a = fmt::format("rank {}", d["ranks"]["a"].get<int>()), b = fmt::format("rank {}", d["ranks"]["b"].get<int>());
    out += fmt::format("comparing {} (a) with {} (b)\n", a, b);
  }
  out += fmt::format("{:<16} {:>12} {:>12} {:>13}\n", "", a, b, "b - a");
  out += fmt::format("{:<16} {:>12} {:>12}\n", "device", d["a"]["device"].get<int>(), d["b"]["device"].get<int>());
  out += fmt::format("{:<16} {:>12} {:>12} {:>13}\n", "peak allocated", format_bytes(d["a"]["peak_allocated"]),
                     format_bytes(d["b"]["peak_allocated"]), signed_bytes(d["delta_peak_allocated"]));
  out += fmt::format("{:<16} {:>12} {:>12} {:>13}\n", "peak reserved", format_bytes(d["a"]["peak_reserved"]),
                     format_bytes(d["b"]["peak_reserved"]), signed_bytes(d["delta_peak_reserved"]));
  out += fmt::format("\nlive at each peak by {}, largest change first ({} groups changed):\n",
                     d["by"].get<std::string>(), d["groups_changed"].get<size_t>());
  return out + group_changes_text(d["rows"]);
}

}  // namespace memrec
