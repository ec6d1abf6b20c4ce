// The display-free timeline picture, read back as a browser would place it: the curves' highest points, mapped
// through the picture's own byte axis, are the replay's peaks; the peak mark sits on the curve's top and says what
// `memrec stats` says; the time labels name the times they stand at.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "memrec/devices.h"
#include "memrec/load.h"
#include "memrec/stats.h"
#include "memrec/time_series.h"
#include "memrec/timeline_svg.h"
#include "memrec/units.h"

namespace memrec {
namespace {

// A horizontal piece of a path: from x0 to x1 at height y.
struct Flat {
  double x0, x1, y;
};

// The flat pieces of a path made of M, H, V and Z, as timeline_svg writes them.
std::vector<Flat> flats(const std::string& d) {
  std::vector<Flat> out;
  std::istringstream in(d);
  double x = 0, y = 0;
  for (char op; in >> op;) {
    if (op == 'M') {
      char comma;
      in >> x >> comma >> y;
    } else if (op == 'H') {
      double to;
      in >> to;
      out.push_back({x, to, y});
      x = to;
    } else if (op == 'V') {
      in >> y;
    }
  }
  return out;
}

std::string attribute(const std::string& svg, const std::string& element_start, const std::string& name) {
  size_t at = svg.find(element_start);
  if (at == std::string::npos) return "";
  size_t value = svg.find(" " + name + "=\"", at) + name.size() + 3;
  return svg.substr(value, svg.find('"', value) - value);
}

// The byte axis: each grid line's height and the bytes it says.
struct Axis {
  std::vector<std::pair<double, uint64_t>> ticks;
  double bytes_at(double y) const {
    auto [y0, b0] = ticks.front();
    auto [y1, b1] = ticks.back();
    return double(b0) + (y - y0) / (y1 - y0) * double(b1 - b0);
  }
  double bytes_per_pixel() const { return std::abs(bytes_at(0) - bytes_at(1)); }
};

Axis byte_axis(const std::string& svg) {
  Axis a;
  std::regex line("<line [^>]*y1=\"([0-9.]+)\"[^>]*data-bytes=\"([0-9]+)\"[^>]*/><text [^>]*>([^<]*)</text>");
  for (std::sregex_iterator it(svg.begin(), svg.end(), line), end; it != end; ++it) {
    uint64_t bytes = std::stoull((*it)[2]);
    EXPECT_EQ((*it)[3].str(), format_bytes(bytes, Digits::compact));
    a.ticks.emplace_back(std::stod((*it)[1]), bytes);
  }
  return a;
}

double highest(const std::vector<Flat>& pieces) {
  return std::min_element(pieces.begin(), pieces.end(), [](const Flat& a, const Flat& b) { return a.y < b.y; })->y;
}

void expect_picture_of(const std::string& file) {
  SCOPED_TRACE(file);
  Snapshot s = load_snapshot(test::data(file));
  uint8_t device = choose_device(s, std::nullopt);
  std::string svg = timeline_svg(s, device);
  Replay r(s, device);
  Axis axis = byte_axis(svg);
  ASSERT_GE(axis.ticks.size(), 2u);
  EXPECT_EQ(axis.ticks.front().second, 0u);
  // Coordinates are written to a tenth of a pixel: the curve's and the two ticks' roundings add up.
  double tolerance = axis.bytes_per_pixel() * 0.15 + 1;

  std::vector<Flat> allocated = flats(attribute(svg, "<path class=\"allocated\"", "d"));
  ASSERT_FALSE(allocated.empty());
  double top = highest(allocated);
  EXPECT_NEAR(axis.bytes_at(top), double(r.peak_allocated().bytes), tolerance);
  EXPECT_LE(double(axis.ticks.back().second), double(r.peak_allocated().bytes) * 1.12 + tolerance);

  // The mark: on the curve's top, over the column the peak falls in.
  double cx = std::stod(attribute(svg, "<circle", "cx")), cy = std::stod(attribute(svg, "<circle", "cy"));
  EXPECT_DOUBLE_EQ(cy, top);
  EXPECT_TRUE(std::any_of(allocated.begin(), allocated.end(), [&](const Flat& f) {
    return f.y == top && f.x0 <= cx && cx <= f.x1;
  })) << cx;
  EXPECT_EQ(std::stoull(attribute(svg, "<circle", "data-bytes")), r.peak_allocated().bytes);
  PeakShown peak = stats(s, {.device = device}).peak_allocated;
  std::string label = "peak allocated " + format_bytes(peak.bytes) + " at +" + format_duration(peak.time_ns);
  if (!peak.training_step.empty()) label += ", " + peak.training_step;
  EXPECT_NE(svg.find(">" + label + "</text>"), std::string::npos) << label;

  std::string reserved = attribute(svg, "<path class=\"reserved\"", "d");
  EXPECT_EQ(reserved.empty(), r.peak_reserved().bytes == 0);
  if (!reserved.empty())
    EXPECT_NEAR(axis.bytes_at(highest(flats(reserved))), double(r.peak_reserved().bytes), tolerance);

  std::regex time_label("<text [^>]*data-ns=\"([0-9]+)\">([^<]*)</text>");
  int labels = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), time_label), end; it != end; ++it, ++labels) {
    int64_t ns = std::stoll((*it)[1]);
    EXPECT_LE(ns, r.time_of(r.steps() - 1) - r.time_of(kNoEvent));
    EXPECT_EQ((*it)[2].str(), ns == 0 ? "0" : format_duration(ns, Digits::compact));
  }
  EXPECT_GE(labels, 2);
}

TEST(TimelineSvg, CurvesAndAxisShowTheReplaysPeaks) {
  // A CPU recording with steps and phases, a CUDA run of torch.compile with reserved segments, and a PyTorch pickle.
  for (const char* file : {"mlp_sequential_cpu.memrec", "gpt2_compile_h100.memrec", "torch_2layer_all.pickle"})
    expect_picture_of(file);
}

// A few steps, each wide enough for its name: every one is named under the curve, and the phases are drawn.
TEST(TimelineSvg, NamesTheSteps) {
  Snapshot s = load_snapshot(test::data("transformer_2layer_cpu.memrec"));
  Replay r(s, choose_device(s, std::nullopt));
  std::string svg = timeline_svg(s, r.device());
  std::vector<Span> steps = spans(s, r, ScopeKind::step);
  ASSERT_GE(steps.size(), 2u);
  for (const Span& step : steps) EXPECT_NE(svg.find(">" + step.name + "</text>"), std::string::npos) << step.name;
  EXPECT_FALSE(spans(s, r, ScopeKind::phase).empty());
  EXPECT_NE(svg.find("<g class=\"phases\"><rect"), std::string::npos);
}

}  // namespace
}  // namespace memrec
