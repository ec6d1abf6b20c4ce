#include "memrec/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "memrec/report.h"
#include "memrec/stats.h"
#include "memrec/time_series.h"
#include "memrec/units.h"
#include "html_parts.h"

namespace memrec {
namespace {

constexpr int kLeft = 76, kRight = 16, kTop = 30;  // room for the byte labels and for the legend and peak label
constexpr int kBelow = 52;                          // under the plot: the phase strip, step names, time labels
constexpr double kHeadroom = 1.12;                  // the scale's top over the highest bytes, so the peak mark shows
constexpr double kCharWidth = 6.2;                  // of the 11 px sans-serif labels, to tell whether a name fits

// Where things go: the plot's edges in pixels, one pixel column per time column.
struct Plot {
  TimeAxis axis;
  double left = kLeft, top = kTop, bottom = 0;
  double scale = 1;  // the bytes at the plot's top
  int width = 0, height = 0;

  double y(uint64_t bytes) const { return bottom - double(bytes) / scale * (bottom - top); }
  double x(int64_t offset_ns) const {
    return left + double(offset_ns) * axis.columns / (double(axis.duration_ns) + 1);
  }
  double right() const { return left + axis.columns; }
};

// The first of 1, 2 or 5 times a power of ten that is at least `raw` (raw > 0).
double nice(double raw) {
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw * (1 - 1e-9)) return m * power;
  return 10 * power;
}

// About four byte ticks, each a round number of the unit the top is shown in.
uint64_t byte_step(uint64_t top) {
  double unit = 1;
  while (double(top) / unit >= 1024 && unit < std::pow(1024.0, 5)) unit *= 1024;
  return std::max<uint64_t>(1, std::llround(nice(double(top) / unit / 4) * unit));
}

// A path through each column's value, flat across the column (the most held during it).
std::string steps_path(const Plot& f, const std::vector<uint64_t>& values) {
  std::string d = fmt::format("M{},{:.1f}", f.left, f.y(values[0]));
  for (size_t c = 0; c < values.size(); ++c) {
    if (c > 0 && values[c] != values[c - 1]) d += fmt::format("V{:.1f}", f.y(values[c]));
    if (c + 1 == values.size() || values[c + 1] != values[c]) d += fmt::format("H{}", f.left + double(c + 1));
  }
  return d;
}

std::string curves(const Plot& f, const Series& series) {
  std::string out = fmt::format("<path class=\"allocated\" d=\"{}V{:.1f}H{}Z\" fill=\"#4c78a8\" fill-opacity=\"0.55\" "
                                "stroke=\"#4c78a8\" stroke-width=\"1\"/>",
                                steps_path(f, series.allocated), f.bottom, f.left);
  if (std::any_of(series.reserved.begin(), series.reserved.end(), [](uint64_t b) { return b != 0; }))
    out += fmt::format("<path class=\"reserved\" d=\"{}\" fill=\"none\" stroke=\"#e45756\" stroke-width=\"1.5\"/>",
                       steps_path(f, series.reserved));
  return out;
}

std::string byte_axis(const Plot& f) {
  uint64_t step = byte_step(static_cast<uint64_t>(f.scale / kHeadroom));
  std::string out = "<g class=\"y-axis\">";
  for (uint64_t b = 0; double(b) <= f.scale; b += step) {
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" data-bytes=\"{}\" stroke=\"#d1d9e0\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                       f.left, f.right(), f.y(b), f.y(b), b, f.left - 6, f.y(b) + 4, format_bytes(b, Digits::compact));
  }
  return out + "</g>";
}

std::string time_axis(const Plot& f) {
  int64_t step = std::max<int64_t>(1, std::llround(nice(std::max(1.0, double(f.axis.duration_ns) / 5))));
  std::string out = "<g class=\"x-axis\">";
  for (int64_t t = 0; t <= f.axis.duration_ns; t += step) {
    const char* anchor = f.x(t) > f.right() - 30 ? "end" : t == 0 ? "start" : "middle";
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\" data-ns=\"{}\">{}</text>", f.x(t),
                       f.height - 6, anchor, t, t == 0 ? "0" : format_duration(t, Digits::compact));
  }
  return out + "</g>";
}

// Training steps: every other one shaded behind the curve, named under it where the name fits. Left out when
// there are too many to tell apart.
std::string training_steps(const Plot& f, const std::vector<Span>& steps) {
  if (steps.empty() || steps.size() > size_t(f.axis.columns / 3)) return "";
  std::string bands = "<g class=\"steps\">", names;
  for (size_t i = 0; i < steps.size(); ++i) {
    double a = f.x(steps[i].start_ns), b = std::max(f.x(steps[i].end_ns), a + 1);
    if (i % 2 == 0)
      bands += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#eef1f4\"/>", a,
                           f.top, b - a, f.bottom - f.top);
    if (double(steps[i].name.size()) * kCharWidth + 8 <= b - a)
      names += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#59636e\">{}</text>",
                           (a + b) / 2, f.bottom + 24, html_escape(steps[i].name));
  }
  return bands + "</g><g class=\"step-names\">" + names + "</g>";
}

const char* phase_color(const std::string& name) {
  if (name == "forward") return "#4f8fdc";
  if (name == "backward") return "#f08c3c";
  if (name == "optimizer") return "#9a6ad6";
  return "#a0a4a8";
}

// A strip under the plot colored by the phase each column is in (the latest-starting one over it), one rect per run.
std::string phase_strip(const Plot& f, const std::vector<Span>& phases) {
  if (phases.empty()) return "";
  std::vector<int> phase(f.axis.columns, -1);
  for (size_t i = 0; i < phases.size(); ++i)
    for (int c = f.axis.column_of(phases[i].start_ns); c <= f.axis.column_of(phases[i].end_ns); ++c)
      phase[c] = static_cast<int>(i);
  std::string out = "<g class=\"phases\">";
  for (int c = 0, run = 0; c < f.axis.columns; c = run) {
    for (run = c + 1; run < f.axis.columns && phase[run] == phase[c];) ++run;
    if (phase[c] < 0) continue;
    const std::string& name = phases[phase[c]].name;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"7\" fill=\"{}\"><title>{}</title></rect>",
                       f.left + c, f.bottom + 3, run - c, phase_color(name), html_escape(name));
  }
  return out + "</g>";
}

std::string legend(bool reserved, bool phases) {
  std::vector<std::pair<const char*, const char*>> keys = {{"allocated", "#4c78a8"}};
  if (reserved) keys.emplace_back("reserved", "#e45756");
  if (phases) keys.insert(keys.end(), {{"forward", "#4f8fdc"}, {"backward", "#f08c3c"}, {"optimizer", "#9a6ad6"}});
  std::string out = "<g class=\"legend\">";
  double x = kLeft;
  for (const auto& [name, color] : keys) {
    out += fmt::format("<rect x=\"{}\" y=\"9\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"18\">{}</text>", x, color, x + 14, name);
    x += 14 + kCharWidth * double(std::string_view(name).size()) + 14;
  }
  return out + "</g>";
}

std::string peak_mark(const Plot& f, const PeakShown& p) {
  double x = f.left + f.axis.column_of(p.time_ns) + 0.5, y = f.y(p.bytes);
  bool right_half = x > (f.left + f.right()) / 2;
  return fmt::format("<g class=\"peak\"><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#d62728\" "
                     "stroke-dasharray=\"4,3\"/><circle cx=\"{0:.1f}\" cy=\"{3:.1f}\" r=\"3.5\" fill=\"#d62728\" "
                     "data-bytes=\"{4}\" data-ns=\"{5}\"/><text class=\"peak-label\" x=\"{6:.1f}\" y=\"{7:.1f}\" "
                     "text-anchor=\"{8}\" fill=\"#d62728\">peak allocated {9} {10}</text></g>",
                     x, f.top, f.bottom, y, p.bytes, p.time_ns, right_half ? x - 6 : x + 6, std::max(y - 6, f.top + 12),
                     right_half ? "end" : "start", format_bytes(p.bytes), peak_when(p, ", "));
}

}  // namespace

std::string timeline_svg(const Snapshot& s, uint8_t device, TimelineSvgSize size) {
  Replay r(s, device);
  Plot f;
  f.width = size.width, f.height = size.height;
  f.axis = {duration_of(r), std::max(1, size.width - kLeft - kRight)};
  f.bottom = size.height - kBelow;
  f.scale = std::max<double>(1, double(std::max(r.peak_allocated().bytes, r.peak_reserved().bytes)) * kHeadroom);
  Series series = memrec::series(r, f.axis);
  std::vector<Span> phases = spans(s, r, ScopeKind::phase);
  bool reserved = r.peak_reserved().bytes != 0;
  std::string body = training_steps(f, spans(s, r, ScopeKind::step)) + byte_axis(f) + curves(f, series) +
                     fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#59636e\"/>", f.left,
                                 f.right(), f.bottom) +
                     phase_strip(f, phases) + time_axis(f) + legend(reserved, !phases.empty());
  body += r.steps() == 0 ? fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no events on device {}</text>",
                                       (f.left + f.right()) / 2, (f.top + f.bottom) / 2, device)
                         : peak_mark(f, peak_shown(s, r, r.peak_allocated()));
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"memrec-timeline\" width=\"{0}\" height=\"{1}\" "
                     "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#1f2328\">"
                     "<title>Allocated and reserved bytes over time on device {2}</title>{3}</svg>\n",
                     size.width, size.height, device, body);
}

}  // namespace memrec
