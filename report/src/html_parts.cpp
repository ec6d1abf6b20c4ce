#include "html_parts.h"

#include <fmt/format.h>

#include "memrec/report.h"
#include "memrec/units.h"

namespace memrec {

std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent(double share) { return fmt::format("{:.1f}%", share * 100.0); }

std::string bytes_cell(uint64_t bytes) {
  return fmt::format("<td class=\"num\" title=\"{} bytes\">{}</td>", grouped(bytes), format_bytes(bytes));
}

std::string peak_when(const PeakShown& p, std::string_view separator) {
  std::string when = p.event < 0 ? "at the start" : "at +" + format_duration(p.time_ns);
  if (!p.training_step.empty()) when += std::string(separator) + html_escape(p.training_step);
  return when;
}

std::string groups_table(std::string_view bytes_title, std::string_view key_title, const std::vector<GroupRow>& rows) {
  std::string out = fmt::format("<table><thead><tr><th class=\"num\">{}</th><th class=\"num\">Share</th>"
                                "<th class=\"num\">Blocks</th><th>{}</th></tr></thead><tbody>",
                                bytes_title, key_title);
  for (const GroupRow& g : rows)
    out += fmt::format("<tr>{}<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"key\">{}</td></tr>",
                       bytes_cell(g.bytes), percent(g.share), g.count, html_escape(g.key));
  return out + "</tbody></table>";
}

}  // namespace memrec
