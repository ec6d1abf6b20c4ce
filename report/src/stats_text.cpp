// `memrec stats` and `memrec diff` as text.
#include <fmt/format.h>

#include "memrec/allocator_output.h"
#include "memrec/device_memory_output.h"
#include "memrec/stats_output.h"
#include "memrec/units.h"
#include "render.h"

namespace memrec {
namespace {

std::string pct(double share) { return fmt::format("{:5.1f}%", share * 100.0); }

// A stack row's whole stack, innermost first, each frame marked: "site", "user" (user code), or blank (internal).
void render_frames(std::string& out, const GroupRow::Stack& stack, const std::string& indent) {
  if (stack.stacks > 1) out += fmt::format("{}{:>14}first of {} stacks with this site and op:\n", indent, "", stack.stacks);
  for (const GroupRow::Frame& f : stack.frames)
    out += fmt::format("{}{:>12}  {}\n", indent, f.site ? "site" : f.user ? "user" : "", f.label);
}

// The categories of a row, as the JSON lists them: by name.
void render_categories(std::string& out, const GroupRow& g, const std::string& indent) {
  static constexpr Category kByName[] = {Category::activation,      Category::gradient,  Category::input,
                                         Category::optimizer_state, Category::parameter, Category::temporary,
                                         Category::unknown};
  std::string parts;
  for (Category c : kByName)
    if (uint64_t bytes = g.by_category[static_cast<int>(c)])
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", to_string(c), format_bytes(bytes));
  if (!parts.empty()) out += fmt::format("{}{:>31}{}\n", indent, "", parts);
}

void render_groups(std::string& out, const std::vector<GroupRow>& rows, const std::string& indent, bool split = false,
                   bool full_stack = false) {
  for (const GroupRow& g : rows) {
    out += fmt::format("{}{:>12} {} {:>8}x  {}\n", indent, format_bytes(g.bytes), pct(g.share), g.count, g.key);
    if (full_stack && g.stack) render_frames(out, *g.stack, indent);
    if (split) render_categories(out, g, indent);
  }
}

void render_sites(std::string& out, const StatsResult& s) {
  out += "\ntop allocation sites by bytes allocated over the run:\n";
  for (const SiteRow& g : s.top_by_bytes) out += fmt::format("  {:>12} {:>8}x  {}\n", format_bytes(g.bytes), g.count, g.key);
  out += "top allocation sites by count:\n";
  for (const SiteRow& g : s.top_by_count) out += fmt::format("  {:>8}x {:>12}  {}\n", g.count, format_bytes(g.bytes), g.key);
  out += "\nallocation sizes:\n";
  for (const SizeBucket& b : s.size_histogram)
    out += fmt::format("  {:>12} .. {:<12} {:>10}x {:>12}\n", format_bytes(b.min), format_bytes(b.max), b.count,
                       format_bytes(b.bytes));
}

void render_kernels(std::string& out, const std::vector<KernelStats>& kernels, const std::string& steps) {
  out += fmt::format("\ntop kernels by GPU time{}:\n  {:>12} {:>8} {:>12} {:>12}  {}\n",
                     steps.empty() ? "" : ", " + steps, "total", "count", "avg", "max", "name");
  for (const KernelStats& k : kernels)
    out += fmt::format("  {:>12} {:>8} {:>12} {:>12}  {}\n", format_duration(k.total_ns), k.count,
                       format_duration(k.avg_ns()), format_duration(k.max_ns), k.name);
}

void render_fragmentation(std::string& out, const Fragmentation& f) {
  if (f.segments == 0) {
    out += fmt::format("fragmentation: no reserved segments recorded ({})\n", why_no_segments(f));
    return;
  }
  out += fmt::format("fragmentation (reserved - allocated = {}) in {} segments:\n", format_bytes(f.reserved - f.allocated),
                     f.segments);
  for (const FragmentationPart& part : kFragmentationParts)
    out += fmt::format("  {:<44} {:>12}\n", part.label, format_bytes(f.*part.bytes));
  if (f.unplaced)
    out += fmt::format("  not counted: {} allocated in segments the recording does not hold\n", format_bytes(f.unplaced));
}

void render_oom(std::string& out, const OomShown& o) {
  out += fmt::format("OOM at +{}: requested {}{}; {} allocated, {} reserved\n", format_duration(o.time_ns),
                     format_bytes(o.requested),
                     o.device_free ? fmt::format(", the device had {} free", format_bytes(o.device_free)) : "",
                     format_bytes(o.allocated), format_bytes(o.reserved));
  if (o.caused_by_fragmentation)
    out += fmt::format("  fragmentation: {} was cached but the largest free range was {}\n", format_bytes(o.cached),
                       format_bytes(o.fragmentation.largest_free));
  else
    out += "  not fragmentation: the program needed more memory than the device had\n";
  out += "  who held the memory:\n";
  render_groups(out, o.top_sites, "    ");
}

std::string peak_line(const char* what, const PeakShown& p) {
  if (p.bytes == 0) return fmt::format("{:<15} {:>12}\n", what, "none");
  return fmt::format("{:<15} {:>12}  at +{} (event {}){}\n", what, format_bytes(p.bytes), format_duration(p.time_ns),
                     p.event, p.training_step.empty() ? "" : ", " + p.training_step);
}

// "the allocated peak (+1.2 ms)"; for a requested time, also the event whose state it shows.
std::string instant_label(const LiveAt& at) {
  if (!at.requested_ns) return fmt::format("the allocated peak (+{})", format_duration(at.time_ns));
  std::string event = at.event < 0 ? "the start" : fmt::format("event {}", at.event);
  return fmt::format("+{} (the state after {}, at +{})", format_duration(*at.requested_ns), event,
                     format_duration(at.time_ns));
}

}  // namespace

std::string instant_note(const InstantShown& i) {
  switch (i.moved) {
    case InstantShown::Moved::no: return "";
    case InstantShown::Moved::no_events: return "the device has no events; showing the state at the start";
    case InstantShown::Moved::past_end:
      return fmt::format("--at +{} is past the end of the recording (+{}); showing its last event",
                         format_duration(i.asked_ns), format_duration(i.duration_ns));
  }
  return "";
}

std::string stats_text(const StatsResult& s) {
  std::string out;
  if (s.dropped_events) out += fmt::format("warning: {} events were dropped while recording\n", s.dropped_events);
  if (std::string note = instant_note(s.at.instant); !note.empty()) out += "note: " + note + "\n";
  out += fmt::format("device {}: {} events over {}\n", s.device, s.events, format_duration(s.duration_ns));
  out += peak_line("peak allocated", s.peak_allocated);
  out += peak_line("peak reserved", s.peak_reserved);
  out += fmt::format("\nlive at {}: {} allocated, {} reserved, by {}:\n", instant_label(s.at), format_bytes(s.at.allocated),
                     format_bytes(s.at.reserved), to_string(s.by));
  render_groups(out, s.live, "  ", s.by != GroupBy::stack && s.by != GroupBy::category, s.full_stack);
  render_sites(out, s);
  out += "\n";
  render_fragmentation(out, s.fragmentation);
  out += fragmentation_culprits_text(s.fragmentation_culprits);
  if (s.device_memory) out += device_memory_text(*s.device_memory);
  for (const OomShown& o : s.ooms) render_oom(out += "\n", o);
  if (!s.kernels.empty()) render_kernels(out, s.kernels, s.kernel_steps);
  return out;
}

std::string group_changes_text(const std::vector<GroupChange>& rows) {
  std::string out;
  for (const GroupChange& r : rows)
    if (r.delta != 0)
      out += fmt::format("  {:>13} {:>12} -> {:<12} {}\n", signed_bytes(r.delta, "+"), format_bytes(r.a_bytes),
                         format_bytes(r.b_bytes), r.key);
  return out;
}

std::string diff_text(const DiffResult& d) {
  std::string out, a = "a", b = "b";
  if (d.ranks) {  // two ranks of one run: named by rank
    a = fmt::format("rank {}", d.ranks->first), b = fmt::format("rank {}", d.ranks->second);
    out += fmt::format("comparing {} (a) with {} (b)\n", a, b);
  }
  out += fmt::format("{:<16} {:>12} {:>12} {:>13}\n", "", a, b, "b - a");
  out += fmt::format("{:<16} {:>12} {:>12}\n", "device", d.a.device, d.b.device);
  out += fmt::format("{:<16} {:>12} {:>12} {:>13}\n", "peak allocated", format_bytes(d.a.peak_allocated),
                     format_bytes(d.b.peak_allocated), signed_bytes(d.delta_peak_allocated, "+"));
  out += fmt::format("{:<16} {:>12} {:>12} {:>13}\n", "peak reserved", format_bytes(d.a.peak_reserved),
                     format_bytes(d.b.peak_reserved), signed_bytes(d.delta_peak_reserved, "+"));
  out += fmt::format("\nlive at each peak by {}, largest change first ({} groups changed):\n", to_string(d.by),
                     d.changes.changed);
  return out + group_changes_text(d.changes.rows);
}

}  // namespace memrec
