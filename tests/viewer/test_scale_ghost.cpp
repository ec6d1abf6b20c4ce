// `--scale-with` on `memrec view` and `memrec report`: the prediction of `memrec whatif scale` drawn as a ghost over
// a recorded run, in real windows under Xvfb, on the CPU recordings of examples/train.py at batch 2, 4 and 8
// (tests/data/scale_*.memrec, tests/scripts/scale_fixtures.sh) and an H100 recording (alloc_default.memrec). The
// ghost's peaks are checked against `whatif scale --json`, its pixels against the replayed recording.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/report_page.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/viewer.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;
using test::Plot;
using test::Shot;

std::string file(const std::string& name) { return quote(test::data(name)); }

json whatif(const std::string& args) {
  auto r = test::memrec("whatif scale " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output)["predictions"][0];
}

// The highest allocated total in force over [t0, t1) after the first event, by scanning every step.
uint64_t recorded_max(const Replay& r, int64_t t0, int64_t t1) {
  uint64_t best = 0;
  uint32_t before = kNoEvent;
  for (uint32_t k = 0; k < r.steps(); ++k) {
    int64_t t = r.time_of(k) - r.time_of(0);
    if (t <= t0) before = k;
    else if (t < t1) best = std::max(best, r.after(k).allocated);
  }
  return std::max(best, r.after(before).allocated);
}

// At the run's own size the prediction is the run: the dashed ghost lies on the recorded allocated line, column by
// column, where the dashes are, and the white line shows between them.
TEST(ScaleGhost, AtTheRecordedSizeTheGhostLiesOnTheRecordedLine) {
  test::TempDir dir;
  Shot shot = test::screenshot(test::data("scale_batch4.memrec"), "--size 1280x720 --scale-with " +
                               file("scale_batch2.memrec") + " --sizes 4,2 --predict 4", dir);
  ASSERT_TRUE(shot.layout.contains("ghost")) << shot.output;
  Plot plot(shot.layout);
  Snapshot s = load_snapshot(test::data("scale_batch4.memrec"));
  Replay r(s, 0);
  int64_t end = r.time_of(r.steps() - 1) - r.time_of(0);
  int ghost = 0, white = 0;
  for (int col = 0; col < plot.w; ++col) {
    auto c0 = static_cast<int64_t>(std::floor(plot.t0 + col * plot.dt));
    auto c1 = static_cast<int64_t>(std::floor(plot.t0 + (col + 1) * plot.dt));
    if (c0 < 0 || c1 > end) continue;
    int top = plot.row(recorded_max(r, c0, c1));
    if (plot.h - 1 - top < 32) continue;  // the legend's lines
    uint32_t c = plot.pixel(shot.image, col, top);
    ghost += c == viewer::kGhostAllocatedColor;
    white += c == viewer::kAllocatedColor;
    EXPECT_TRUE(c == viewer::kGhostAllocatedColor || c == viewer::kAllocatedColor) << "column " << col;
  }
  EXPECT_GT(ghost, plot.w / 2);  // dashes of 8 columns, gaps of 4
  EXPECT_GT(white, plot.w / 6);
  EXPECT_EQ(shot.layout["ghost"]["peak_allocated"], r.peak_allocated().bytes);
}

// Batch 8 predicted from 2 and 4, drawn over batch 2 on a device of 3 MiB: the ghost's peak is whatif scale's,
// where batch 2's own peak is, and the device's memory is drawn with the point where the prediction runs out of it.
TEST(ScaleGhost, ThePredictedPeakAndWhereItRunsOutOfMemory) {
  test::TempDir dir;
  std::string runs = file("scale_batch2.memrec") + " " + file("scale_batch4.memrec") + " --sizes 2,4";
  json want = whatif(runs + " --predict 8 --device-memory 3MiB");
  Shot shot = test::screenshot(test::data("scale_batch2.memrec"), "--size 1280x720 --scale-with " +
                               file("scale_batch4.memrec") + " --sizes 2,4 --predict 8 --device-memory 3MiB", dir);
  const json& g = shot.layout["ghost"];
  ASSERT_TRUE(g.is_object()) << shot.output;
  EXPECT_EQ(g["size"], 8);
  EXPECT_EQ(g["peak_allocated"], want["peak_allocated"]);
  EXPECT_TRUE(g["peak_reserved"].is_null());  // a CPU run
  EXPECT_EQ(want["oom"], true);
  EXPECT_EQ(g["device_memory"], 3u << 20);
  Plot plot(shot.layout);
  Snapshot s = load_snapshot(test::data("scale_batch2.memrec"));
  Replay r(s, 0);
  int peak_col = plot.column(g["peak_ns"].get<int64_t>());
  EXPECT_EQ(peak_col, plot.column(r.peak_allocated().time_ns - r.time_of(0)));  // the same allocation's peak
  EXPECT_EQ(plot.pixel(shot.image, peak_col, plot.row(want["peak_allocated"])), viewer::kGhostAllocatedColor);
  EXPECT_GT(plot.row(want["peak_allocated"]), plot.row(r.peak_allocated().bytes) * 2);  // far above batch 2's

  int memory_row = plot.row(3u << 20), dashes = 0;
  for (int col = 0; col < plot.w; ++col)
    dashes += plot.pixel(shot.image, col, memory_row) == viewer::kDeviceMemoryColor;
  EXPECT_GT(dashes, plot.w / 2);
  ASSERT_TRUE(g["oom_ns"].is_number());
  EXPECT_LT(g["oom_ns"].get<int64_t>(), g["peak_ns"].get<int64_t>());
  int oom_col = plot.column(g["oom_ns"].get<int64_t>());
  for (int row : {memory_row - 3, memory_row + 3})  // the crossing's mark spans the line
    EXPECT_EQ(plot.pixel(shot.image, oom_col, row), viewer::kDeviceMemoryColor) << row;
  test::keep_for_readme(dir, "viewer_scale_ghost.png");
}

// On an H100 recording the ghost has the allocator model's reserved line: its peak is whatif scale's.
TEST(ScaleGhost, CudaRunsDrawThePredictedReservedMemory) {
  test::TempDir dir;
  std::string run = file("alloc_default.memrec");
  json want = whatif(run + " " + run + " --sizes 1,2 --predict 4");
  Shot shot = test::screenshot(test::data("alloc_default.memrec"),
                               "--size 1280x720 --scale-with " + run + " --sizes 1,2 --predict 4", dir);
  const json& g = shot.layout["ghost"];
  ASSERT_TRUE(g.is_object()) << shot.output;
  EXPECT_EQ(g["peak_allocated"], want["peak_allocated"]);
  EXPECT_EQ(g["peak_reserved"], want["peak_reserved"]);
  EXPECT_TRUE(g["device_memory"].is_null());  // it fits the H100
  Plot plot(shot.layout);
  int row = plot.row(want["peak_reserved"]), found = 0;
  for (int col = 0; col < plot.w; ++col) found += plot.pixel(shot.image, col, row) == viewer::kGhostReservedColor;
  EXPECT_GT(found, 8);
}

TEST(ScaleGhost, BadFlagsAreOneSentence) {
  std::string b2 = file("scale_batch2.memrec"), b4 = file("scale_batch4.memrec");
  const std::pair<std::string, std::string> cases[] = {
      {"view " + b2 + " --scale-with " + b4 + " --sizes 2,4 --predict 8,16", "--predict takes the one size drawn"},
      {"view " + b2 + " --scale-with " + b4 + " --predict 8", "--scale-with needs --sizes"},
      {"view " + b2 + " " + b4 + " --scale-with " + b4 + " --sizes 2,4 --predict 8", "not over several ranks"},
      {"view " + b2 + " --scale-with " + b4 + " --sizes 2,4,8 --predict 8", "--sizes gives 3 sizes for 2 runs"},
      {"view " + b2 + " --scale-with " + b4 + " --sizes 2,4 --predict 8 --steps 0..1",
       "--scale-with draws over the whole"},
      {"report " + b2 + " -o /dev/null --scale-with " + b4 + " --sizes 2,4 --predict 8 --steps 0..1",
       "--scale-with predicts from whole runs: leave out --steps 0..1"},
      {"report " + b2 + " -o /dev/null --scale-with " + file("mlp_sequential_cpu.memrec") + " --sizes 2,4 --predict 8",
       "are not runs of one program"},
  };
  for (const auto& [args, says] : cases) {
    auto r = test::run_command("xvfb-run -a " + quote(MEMREC_BINARY) + " " + args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

// The report's section: the prediction's row and its curve (a JSON data block) against whatif scale and the replayed
// recording, and the ghost in the embedded picture.
json report_curve(const std::string& html) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(html, m, std::regex("id=\"scale-curve\">(.*?)</script>")));
  return m.empty() ? json() : json::parse(m[1].str());
}

TEST(ScaleGhostReport, TheSectionHoldsWhatifScalesPredictionAndItsCurve) {
  test::TempDir dir;
  std::string runs = file("scale_batch2.memrec") + " " + file("scale_batch4.memrec") + " --sizes 2,4";
  json want = whatif(runs + " --predict 8 --device-memory 3MiB");
  auto r = test::memrec("report " + file("scale_batch2.memrec") + " -o " + quote(dir / "r.html") + " --scale-with " +
                        file("scale_batch4.memrec") + " --sizes 2,4 --predict 8 --device-memory 3MiB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string html = test::read_bytes(dir / "r.html");
  EXPECT_NE(html.find(fmt::format("<tr class=\"predicted\" data-size=\"8\" data-peak-allocated=\"{}\"",
                                  want["peak_allocated"].get<uint64_t>())), std::string::npos);
  EXPECT_NE(html.find("<td>OOM</td>"), std::string::npos);
  json c = report_curve(html);
  ASSERT_TRUE(c.is_object());
  EXPECT_EQ(c["peak_allocated"], want["peak_allocated"]);
  auto allocated = c["allocated"].get<std::vector<uint64_t>>();
  auto time = c["time_ns"].get<std::vector<int64_t>>();
  ASSERT_EQ(allocated.size(), time.size());
  EXPECT_EQ(*std::max_element(allocated.begin(), allocated.end()), want["peak_allocated"]);
  EXPECT_TRUE(c["reserved"].is_null());
  // Runs out where the curve first passes the memory.
  uint64_t memory = c["device_memory"];
  EXPECT_EQ(memory, 3u << 20);
  size_t first_over = std::find_if(allocated.begin(), allocated.end(), [&](uint64_t b) { return b > memory; }) -
                      allocated.begin();
  ASSERT_LT(first_over, allocated.size());
  EXPECT_LE(time[first_over], c["oom_ns"].get<int64_t>());
  EXPECT_TRUE(first_over + 1 == time.size() || time[first_over + 1] > c["oom_ns"].get<int64_t>());

  std::string png = test::embedded(html, "image/png");
  ASSERT_FALSE(png.empty());
  std::ofstream(dir / "r.png", std::ios::binary) << png;
  test::Image img = test::load_png(dir / "r.png");
  EXPECT_GT(std::count(img.pixels.begin(), img.pixels.end(), viewer::kGhostAllocatedColor), 500);
  EXPECT_GT(std::count(img.pixels.begin(), img.pixels.end(), viewer::kDeviceMemoryColor), 500);
}

// At the run's own size the report's curve is the recording: each point the highest allocated total in its span.
TEST(ScaleGhostReport, AtTheRecordedSizeTheCurveIsTheRecording) {
  test::TempDir dir;
  auto r = test::memrec("report " + file("scale_batch4.memrec") + " -o " + quote(dir / "r.html") +
                        " --no-screenshot --scale-with " + file("scale_batch2.memrec") + " --sizes 4,2 --predict 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json c = report_curve(test::read_bytes(dir / "r.html"));
  ASSERT_TRUE(c.is_object());
  auto allocated = c["allocated"].get<std::vector<uint64_t>>();
  auto time = c["time_ns"].get<std::vector<int64_t>>();
  Snapshot s = load_snapshot(test::data("scale_batch4.memrec"));
  Replay replay(s, 0);
  double span = c["span_ns"];
  size_t k = 0;
  for (int i = 0; k < time.size() && i < 100000; ++i) {
    auto t0 = static_cast<int64_t>(std::floor(i * span)), t1 = static_cast<int64_t>(std::floor((i + 1) * span));
    if (time[k] != t0) continue;
    ASSERT_EQ(allocated[k], recorded_max(replay, t0, t1)) << "span " << i;
    ++k;
  }
  EXPECT_EQ(k, time.size());
  EXPECT_GT(k, 1000u);
}

}  // namespace
}  // namespace memrec
