// The report's section on `--scale-with`: the runs and the prediction drawn over the timeline as a table, and the
// predicted curve as a JSON data block, so that a script can plot it again from the page alone.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "memrec/report.h"
#include "html_parts.h"
#include "render.h"

namespace memrec {
namespace {

constexpr size_t kCurvePoints = 1600;  // the picture's width: as fine as what is drawn

std::string dash_cell() { return "<td class=\"num\">–</td>"; }

std::string run_row(const ScaleWhatif::Run& r, bool base) {
  return fmt::format("<tr class=\"recorded\"><td class=\"key\">{}{}</td><td class=\"num\">{}</td>{}{}<td>–</td>"
                     "<td></td></tr>",
                     html_escape(r.name), base ? " (base)" : "", r.size, bytes_cell(r.peak_allocated), dash_cell());
}

// The peak's time on the clock of the run drawn under it.
std::string prediction_row(const ScalePrediction& p) {
  return fmt::format("<tr class=\"predicted\" data-size=\"{}\" data-peak-allocated=\"{}\" data-peak-reserved=\"{}\">"
                     "<td class=\"key\">predicted</td><td class=\"num\">{}</td>{}{}<td>{}</td><td>{}</td></tr>",
                     p.size, p.peak_allocated, p.peak_reserved ? std::to_string(*p.peak_reserved) : "", p.size,
                     bytes_cell(p.peak_allocated), p.peak_reserved ? bytes_cell(*p.peak_reserved) : dash_cell(),
                     html_escape(scale_fits_text(p)),
                     html_escape(scale_where_text(p, p.curve->time_ns[p.curve->peak])));
}

// The curve at kCurvePoints spans of the run's time: point i is span [floor(i * span_ns), floor((i + 1) * span_ns)),
// given by its start and its highest bytes (so that the curve's peak is the prediction's).
nlohmann::json curve_json(const ScalePrediction& p, const ScaleWhatif& w) {
  const ScaleCurve& c = *p.curve;
  double dt = (static_cast<double>(c.time_ns.back()) + 2) / kCurvePoints;
  nlohmann::json time = nlohmann::json::array(), allocated = nlohmann::json::array();
  nlohmann::json reserved = nlohmann::json::array();
  std::vector<ScaleSpan> spans = curve_spans(c, 0, dt, kCurvePoints);
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!spans[i].shown) continue;
    time.push_back(static_cast<int64_t>(std::floor(static_cast<double>(i) * dt)));
    allocated.push_back(spans[i].allocated);
    if (!c.reserved.empty()) reserved.push_back(spans[i].reserved);
  }
  bool oom = c.oom && p.oom.value_or(false);
  return {{"size", p.size}, {"peak_allocated", p.peak_allocated}, {"peak_reserved", or_null(p.peak_reserved)},
          {"peak_ns", c.time_ns[c.peak]},
          {"device_memory", or_null(w.memory.bytes)},
          {"oom_ns", oom ? nlohmann::json(c.time_ns[*c.oom]) : nlohmann::json(nullptr)},
          {"span_ns", dt}, {"time_ns", time}, {"allocated", allocated},
          {"reserved", c.reserved.empty() ? nlohmann::json(nullptr) : reserved}};
}

}  // namespace

std::string scale_section_html(const ScaleWhatif& w) {
  if (w.predictions.empty() || !w.predictions.front().curve || w.predictions.front().curve->time_ns.empty()) return "";
  const ScalePrediction& p = w.predictions.front();
  std::vector<uint64_t> sizes;
  for (const ScaleWhatif::Run& r : w.runs) sizes.push_back(r.size);
  std::string out = fmt::format("<section id=\"scale\"><h2>What if: size {}</h2>", p.size);
  out += fmt::format("<p>Predicted by <code>memrec whatif scale</code> from runs at sizes {}: the base run's history "
                     "replayed with every allocation at the size fitted across the runs{}. The timeline above draws it "
                     "as dashed lines: pink the predicted allocated bytes{}{}.</p>",
                     fmt::join(sizes, ", "),
                     w.settings ? ", and through the allocator model for the reserved bytes" : "",
                     p.peak_reserved ? ", light blue the reserved bytes" : "",
                     p.oom.value_or(false) ? ", light red the device's memory, where the prediction runs out of it"
                                           : "");
  out += "<table><thead><tr><th>Run</th><th class=\"num\">Size</th><th class=\"num\">Peak allocated</th>"
         "<th class=\"num\">Peak reserved</th><th>Fits</th><th>Allocated peak in</th></tr></thead><tbody>";
  for (size_t j = 0; j < w.runs.size(); ++j) out += run_row(w.runs[j], j == w.base);
  out += prediction_row(p) + "</tbody></table>";
  if (w.memory.bytes) out += fmt::format("<p>Device memory: {}.</p>", format_bytes(*w.memory.bytes));
  for (ScaleNote n : w.notes) out += "<p class=\"note\">" + html_escape(scale_note_text(n, w)) + "</p>";
  // "</" would end the block early: JSON allows it as "<\/".
  std::string data = curve_json(p, w).dump();
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3)) data.insert(at + 1, "\\");
  return out + "<script type=\"application/json\" id=\"scale-curve\">" + data + "</script></section>";
}

}  // namespace memrec
