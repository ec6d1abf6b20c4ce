// The owners at the peak, as the report page's section and as part of the notebook fragment.
#include <algorithm>

#include <fmt/format.h>

#include "memrec/growth_output.h"
#include "memrec/report.h"
#include "memrec/stats.h"
#include "memrec/timeline_svg.h"
#include "memrec/units.h"
#include "html_parts.h"

namespace memrec {
namespace {

bool has_owners(const Snapshot& s, uint8_t device) {
  return std::any_of(s.owners.begin(), s.owners.end(), [&](const Owner& o) { return o.device == device; });
}

// The few styles the fragment needs where no page styles it (a notebook's output area).
constexpr std::string_view kFragmentStyle =
    "<style>.memrec-summary td.num,.memrec-summary th.num{text-align:right;white-space:nowrap}"
    ".memrec-summary td,.memrec-summary th{padding:2px 10px}"
    ".memrec-summary td.key{font-family:monospace;text-align:left}.memrec-summary svg{max-width:100%;height:auto}"
    "</style>";

std::string peak_words(const char* css, const char* title, const PeakShown& p) {
  return fmt::format("{} <b class=\"{}\" title=\"{} bytes\">{}</b> {}", title, css, p.bytes, format_bytes(p.bytes),
                     peak_when(p, ", "));
}

// "Grows +512.00 KiB a step ..., most at SITE (memrec growth)" when the recording's steps grow; "" otherwise.
std::string growth_words(const Snapshot& s, uint8_t device) {
  GrowthResult g = growth(s, {.device = device, .device_memory = std::nullopt, .first_step = std::nullopt,
                              .last_step = std::nullopt});
  if (g.verdict != GrowthVerdict::grows || g.growing.empty()) return "";
  return fmt::format("<p class=\"growth\">Grows <b>{}</b> from step {}, most at <code>{}</code> "
                     "(<code>memrec growth</code>).</p>",
                     html_escape(growth_summary(g)), *g.settled_from, html_escape(g.growing.front().site));
}

}  // namespace

std::string owners_section(const Snapshot& s, const ReportOptions& o) {
  if (!has_owners(s, o.device)) return "";
  StatsResult by_owner = stats(s, {.at_ns = std::nullopt, .by = GroupBy::owner, .top = o.top, .device = o.device});
  return "<section id=\"owners\"><h2>Live at the peak by owner</h2><p class=\"note\">The tensors that held the "
         "memory, by name (<code>memrec stats --by owner</code>).</p>" +
         groups_table("Live", "Owner", by_owner.live) + "</section>";
}

std::string summary_html(const Snapshot& s, const ReportOptions& o) {
  GroupBy by = has_owners(s, o.device) ? GroupBy::owner : GroupBy::stack;
  StatsResult st = stats(s, {.at_ns = std::nullopt, .by = by, .top = o.top, .device = o.device});
  std::string peaks = peak_words("peak-allocated", "peak allocated", st.peak_allocated);
  if (st.peak_reserved.bytes) peaks += "; " + peak_words("peak-reserved", "peak reserved", st.peak_reserved);
  return fmt::format("<div class=\"memrec-summary\">{}<p>{}: {}</p>{}{}{}</div>\n", kFragmentStyle,
                     html_escape(o.file_name), peaks, growth_words(s, o.device), timeline_svg(s, o.device),
                     groups_table("Live at the peak", by == GroupBy::owner ? "Owner" : "Site", st.live));
}

}  // namespace memrec
