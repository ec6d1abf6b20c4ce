#include "memrec/growth_output.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "memrec/report.h"
#include "memrec/units.h"
#include "html_parts.h"

namespace memrec {
namespace {

// "+1.00 MiB", "-512 B", "+0 B".
std::string signed_bytes(double bytes) {
  return (bytes < 0 ? "-" : "+") + format_bytes(static_cast<uint64_t>(std::llround(std::abs(bytes))));
}

// "+1.2 ms", "-503.2 us": a step may start before the device's first event.
std::string signed_duration(int64_t ns) { return (ns < 0 ? "-" : "+") + format_duration(ns < 0 ? -ns : ns); }

nlohmann::json or_null(const std::optional<uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json or_null(const std::string& v) { return v.empty() ? nlohmann::json() : nlohmann::json(v); }

nlohmann::json group_json(const GrowingGroup& g) {
  return {{"site", g.site},
          {"module", or_null(g.module)},
          {"owner", or_null(g.owner)},
          {"bytes_per_step", std::llround(g.bytes_per_step)},
          {"blocks_per_step", std::round(g.blocks_per_step * 100) / 100},
          {"first_step", g.first_step},
          {"live_at_end", g.live_at_end},
          {"stack", g.stack}};
}

// Where the projection's memory comes from.
std::string memory_source(const GrowthResult& g) {
  return fmt::format("{} {}", format_bytes(*g.device_memory),
                     g.device_memory_given ? "(--device-memory)" : "(the recording's device memory)");
}

// The projection in one sentence; "" without one.
std::string projection(const GrowthResult& g) {
  if (!g.device_memory)
    return "none: the recording does not say how much memory the device has (give it to memrec growth with "
           "--device-memory)";
  if (!g.projected_full_step) return "";
  std::string out = fmt::format("{} full at step {}", memory_source(g), grouped(*g.projected_full_step));
  if (g.projected_full_in_s && *g.projected_full_in_s > 0)
    out += fmt::format(", in {} at the median step time of {}",
                       format_duration(static_cast<int64_t>(*g.projected_full_in_s * 1e9)),
                       format_duration(g.median_step_ns));
  return out;
}

// The verdict and the slope after the warm-up, in one line.
std::string headline(const GrowthResult& g) {
  return fmt::format("{} step{}{} on device {}, settled from step {}: {}; after the warm-up {} allocated and {} "
                     "reserved a step",
                     g.steps.size(), g.steps.size() == 1 ? "" : "s", g.inferred_steps ? " (inferred from the phases)" : "", g.device, *g.settled_from,
                     to_string(g.verdict), signed_bytes(g.allocated_per_step), signed_bytes(g.reserved_per_step));
}

std::string too_few_note() {
  return fmt::format("fewer than {} settled steps: too few to tell growth from noise", kGrowthMinSteps);
}

// A line through the step starts' values, `style` its stroke: one point per step, or with many steps the highest of
// each of 240 runs of them, so that the page does not grow with the run.
std::string polyline(const GrowthResult& g, uint64_t GrowthStep::*value, uint64_t top, std::string_view style) {
  constexpr double kW = 480, kH = 120;
  constexpr size_t kPoints = 240;
  size_t n = g.steps.size(), points = std::min(n, kPoints);
  std::string out;
  for (size_t c = 0; c < points; ++c) {
    uint64_t v = 0;
    for (size_t i = c * n / points; i < (c + 1) * n / points; ++i) v = std::max(v, g.steps[i].*value);
    out += fmt::format("{:.1f},{:.1f} ", points > 1 ? kW * double(c) / double(points - 1) : kW / 2,
                       kH - kH * double(v) / double(top));
  }
  return fmt::format("<polyline points=\"{}\" fill=\"none\" {}/>", out, style);
}

// Allocated (solid) and, where there is any, reserved (dashed) at each step start; the warm-up shaded.
std::string chart_svg(const GrowthResult& g) {
  uint64_t top = 1, reserved = 0;
  size_t settled = 0;
  for (size_t i = 0; i < g.steps.size(); ++i) {
    top = std::max({top, g.steps[i].allocated, g.steps[i].reserved});
    reserved = std::max(reserved, g.steps[i].reserved);
    if (g.steps[i].step == *g.settled_from) settled = i;
  }
  double warm_up = g.steps.size() > 1 ? 480.0 * double(settled) / double(g.steps.size() - 1) : 0;
  std::string lines = polyline(g, &GrowthStep::allocated, top, "stroke=\"#0969da\" stroke-width=\"2\"");
  if (reserved) lines = polyline(g, &GrowthStep::reserved, top, "stroke=\"#8c959f\" stroke-dasharray=\"4 3\"") + lines;
  return fmt::format("<svg class=\"growth\" viewBox=\"0 0 480 120\" width=\"480\" height=\"120\" role=\"img\" "
                     "aria-label=\"memory at each step's start\"><rect x=\"0\" y=\"0\" width=\"{:.1f}\" height=\"120\" "
                     "fill=\"#f6f8fa\"/>{}</svg><p class=\"note\">At each step's start: allocated (solid){}, up to {}; "
                     "the warm-up shaded.</p>",
                     warm_up, lines, reserved ? ", reserved (dashed)" : "", format_bytes(top));
}

void render_group(std::string& out, const GrowingGroup& g) {
  out += fmt::format("  {:>12} a step  {:>5.2f} blocks a step  since step {:<6} {:>12} live at the last step  {}\n",
                     signed_bytes(g.bytes_per_step), g.blocks_per_step, g.first_step, format_bytes(g.live_at_end),
                     g.site);
  if (!g.module.empty() || !g.owner.empty())
    out += fmt::format("{:>16}{}{}{}\n", "", g.module.empty() ? "" : "module " + g.module,
                       !g.module.empty() && !g.owner.empty() ? ", " : "", g.owner.empty() ? "" : "owner " + g.owner);
  for (const std::string& frame : g.stack) out += fmt::format("{:>16}{}\n", "", frame);
}

// Every step start when there are few; else the first and last few.
void render_steps(std::string& out, const GrowthResult& g) {
  constexpr size_t kEnds = 5;
  out += fmt::format("\n  {:>8} {:>12} {:>12} {:>12}\n", "step", "start", "allocated", "reserved");
  for (size_t i = 0; i < g.steps.size(); ++i) {
    if (g.steps.size() > 4 * kEnds && i == kEnds)
      out += fmt::format("  {:>8} ({} more)\n", "...", g.steps.size() - 2 * kEnds), i = g.steps.size() - kEnds;
    const GrowthStep& s = g.steps[i];
    out += fmt::format("  {:>8} {:>12} {:>12} {:>12}{}\n", s.step, signed_duration(s.start_ns),
                       format_bytes(s.allocated), format_bytes(s.reserved),
                       g.settled_from && s.step == *g.settled_from && i > 0 ? "  settled" : "");
  }
}

}  // namespace

std::string growth_note(const GrowthResult& g) {
  if (!g.steps.empty()) return "";
  return "This recording has no training steps (no scopes named 'step N', and no forward and backward phases to infer "
         "them from), so there is nothing to compare step over step: record a training loop with memrec record, "
         "which names each optimizer step.";
}

std::string growth_summary(const GrowthResult& g) {
  if (g.verdict == GrowthVerdict::steady) return fmt::format("steady across {} steps", g.steps.size());
  std::string out = fmt::format("{} a step", signed_bytes(g.allocated_per_step));
  if (g.projected_full_step) out += fmt::format(", full at step {}", grouped(*g.projected_full_step));
  return out;
}

nlohmann::json growth_json(const GrowthResult& g) {
  nlohmann::json steps = nlohmann::json::array(), growing = nlohmann::json::array();
  for (const GrowthStep& s : g.steps)
    steps.push_back({{"step", s.step}, {"start_ns", s.start_ns}, {"allocated", s.allocated}, {"reserved", s.reserved}});
  for (const GrowingGroup& gr : g.growing) growing.push_back(group_json(gr));
  nlohmann::json out = {
      {"device", g.device},
      {"inferred_steps", g.inferred_steps},
      {"steps", steps},
      {"settled_from", or_null(g.settled_from)},
      {"per_step", {{"allocated", std::llround(g.allocated_per_step)}, {"reserved", std::llround(g.reserved_per_step)}}},
      {"verdict", to_string(g.verdict)},
      {"growing", growing},
      {"device_memory", or_null(g.device_memory)},
      {"median_step_ns", g.median_step_ns},
      {"projected_full_step", or_null(g.projected_full_step)},
      {"projected_full_in_s", g.projected_full_in_s ? nlohmann::json(*g.projected_full_in_s) : nlohmann::json()},
      {"warnings", g.warnings}};
  if (std::string note = growth_note(g); !note.empty()) out["note"] = note;
  return out;
}

std::string growth_text(const GrowthResult& g) {
  if (std::string note = growth_note(g); !note.empty()) return note + "\n";
  std::string out = headline(g) + "\n";
  if (g.verdict == GrowthVerdict::too_few_steps) out += "(" + too_few_note() + ")\n";
  if (!g.growing.empty()) {
    out += "\ngrowing lines (bytes live at each step's start, by site):\n";
    for (const GrowingGroup& gr : g.growing) render_group(out, gr);
  }
  if (g.verdict == GrowthVerdict::grows) out += "\nprojection: " + projection(g) + "\n";
  render_steps(out, g);
  return out;
}

std::string growth_html(const GrowthResult& g) {
  std::string out = "<section id=\"growth\"><h2>Growth across steps</h2>";
  if (std::string note = growth_note(g); !note.empty()) return out + "<p class=\"note\">" + html_escape(note) + "</p></section>";
  out += "<p>" + html_escape(headline(g)) + ".</p>" + chart_svg(g);
  if (g.verdict == GrowthVerdict::too_few_steps) out += "<p class=\"note\">" + too_few_note() + ".</p>";
  if (!g.growing.empty()) {
    out += "<table><thead><tr><th class=\"num\">A step</th><th class=\"num\">Blocks a step</th>"
           "<th class=\"num\">Since step</th><th class=\"num\">Live at the last step</th><th>Site</th></tr></thead><tbody>";
    for (const GrowingGroup& gr : g.growing)
      out += fmt::format("<tr><td class=\"num\">{}</td><td class=\"num\">{:.2f}</td><td class=\"num\">{}</td>{}"
                         "<td><code>{}</code>{}</td></tr>",
                         signed_bytes(gr.bytes_per_step), gr.blocks_per_step, gr.first_step, bytes_cell(gr.live_at_end),
                         html_escape(gr.site), gr.module.empty() ? "" : " <span class=\"sub\">" + html_escape(gr.module) + "</span>");
    out += "</tbody></table>";
  }
  if (g.verdict == GrowthVerdict::grows) out += "<p>Projection: " + html_escape(projection(g)) + ".</p>";
  return out + "</section>";
}

}  // namespace memrec
