// `memrec view --screenshot` on real PyTorch snapshots, in a real window under Xvfb: the picture is checked
// against a brute-force replay computed here, not against the viewer's own structures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "viewer/shot.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/viewer.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::Shot;
using test::screenshot;
using test::keep_for_readme;

// Highest allocated total in force during [t0, t1), by scanning every step.
uint64_t brute_max_allocated(const Replay& r, int64_t t0, int64_t t1) {
  uint64_t best = 0;
  uint32_t before = kNoEvent;
  for (uint32_t k = 0; k < r.steps(); ++k) {
    int64_t t = r.time_of(k);
    if (t <= t0) before = k;
    else if (t < t1) best = std::max(best, r.after(k).allocated);
  }
  return std::max(best, r.after(before).allocated);
}

class Screenshot : public ::testing::TestWithParam<std::string> {};

TEST_P(Screenshot, ShowsTheReplayedMemory) {
  test::TempDir dir;
  Shot shot = screenshot(test::data(GetParam()), "--size 1280x720", dir);
  ASSERT_FALSE(shot.layout.is_null()) << shot.output;
  ASSERT_EQ(shot.image.width, 1280);
  ASSERT_EQ(shot.image.height, 720);

  Snapshot s = load_snapshot(test::data(GetParam()));
  Replay r(s, 0);
  const auto& L = shot.layout;
  int px = L["plot"]["x"].get<int>(), py = L["plot"]["y"].get<int>();
  int pw = L["plot"]["w"].get<int>(), ph = L["plot"]["h"].get<int>();
  double t0 = L["t0_ns"].get<double>(), dt = L["dt_ns"].get<double>(), per_row = L["bytes_per_row"].get<double>();
  int64_t begin = L["begin_ns"].get<int64_t>();
  ASSERT_EQ(begin, r.time_of(0));
  ASSERT_GT(pw, 600);
  ASSERT_GT(ph, 200);
  // The whole recording fits in the view, and the tallest total fits in the plot.
  int64_t end = r.time_of(static_cast<uint32_t>(r.steps() - 1));
  EXPECT_LE(t0, 0);
  EXPECT_GE(t0 + pw * dt, static_cast<double>(end - begin));
  EXPECT_LT(std::max(r.peak_allocated().bytes, r.peak_reserved().bytes), per_row * ph);

  // Not an empty picture: many distinct colors.
  std::set<uint32_t> colors(shot.image.pixels.begin(), shot.image.pixels.end());
  EXPECT_GT(colors.size(), 10u);

  int peak_col = static_cast<int>(std::floor((static_cast<double>(r.peak_allocated().time_ns - begin) - t0) / dt));
  // Every column inside the recording: bands from the bottom up to the allocated total, then background above
  // the reserved total.
  auto palette = viewer::band_palette();
  auto is_band = [&](uint32_t c) { return std::find(palette.begin(), palette.end(), c) != palette.end(); };
  int checked = 0;
  for (int col = 0; col < pw; ++col) {
    auto c0 = begin + static_cast<int64_t>(std::floor(t0 + col * dt));
    auto c1 = begin + static_cast<int64_t>(std::floor(t0 + (col + 1) * dt));
    if (c0 < begin || c1 > end) continue;
    uint64_t bytes = brute_max_allocated(r, c0, c1);
    int top = static_cast<int>(static_cast<double>(bytes) / per_row);  // the white allocated line's row
    if (top < 3 || col == peak_col) continue;  // the marker covers its column
    ++checked;
    auto pixel = [&](int row_from_bottom) { return shot.image.at(px + col, py + ph - 1 - row_from_bottom); };
    EXPECT_EQ(pixel(top), viewer::kAllocatedColor) << "column " << col << ": allocated line at the replayed total";
    for (int row = 0; row < top - 1; ++row)
      ASSERT_TRUE(is_band(pixel(row))) << "column " << col << " row " << row << " of " << top;
    EXPECT_EQ(pixel(ph - 1), viewer::kPlotBackground) << "column " << col;
  }
  EXPECT_GT(checked, pw / 2);

  // The peak marker: the column with the most pure-red pixels is the one holding the replayed peak's time.
  int best = -1, best_count = 0;
  for (int col = 0; col < pw; ++col) {
    int count = 0;
    for (int row = 0; row < ph; ++row) count += shot.image.at(px + col, py + row) == viewer::kPeakColor;
    if (count > best_count) best = col, best_count = count;
  }
  EXPECT_EQ(best, peak_col);
  EXPECT_GT(best_count, ph * 3 / 4);
  EXPECT_EQ(L["instant_step"].get<int64_t>(), static_cast<int64_t>(r.peak_allocated().step));
  keep_for_readme(dir, "viewer_" + std::filesystem::path(GetParam()).stem().string() + ".png");
}

INSTANTIATE_TEST_SUITE_P(Torch, Screenshot, ::testing::Values("torch_2layer_python.pickle", "torch_2layer_all.pickle"));

TEST(ScreenshotAt, SelectsTheStepInForceAtThatTime) {
  test::TempDir dir;
  Snapshot s = load_snapshot(test::data("torch_2layer_python.pickle"));
  Replay r(s, 0);
  int64_t at = 10'000'000;  // 10 ms after the first event
  uint32_t want = kNoEvent;
  for (uint32_t k = 0; k < r.steps(); ++k)
    if (r.time_of(k) <= r.time_of(0) + at) want = k;
  Shot shot = screenshot(test::data("torch_2layer_python.pickle"), "--at 10ms --size 1024x640", dir);
  ASSERT_FALSE(shot.layout.is_null()) << shot.output;
  EXPECT_EQ(shot.layout["instant_step"].get<int64_t>(), static_cast<int64_t>(want));
  EXPECT_EQ(shot.image.width, 1024);
  // The selected instant is drawn in yellow: it is not the peak.
  ASSERT_NE(want, r.peak_allocated().step);
  int yellow = static_cast<int>(std::count(shot.image.pixels.begin(), shot.image.pixels.end(), 0xFF00DCFFu));
  EXPECT_GT(yellow, shot.layout["plot"]["h"].get<int>() / 2);
  keep_for_readme(dir, "viewer_at_10ms.png");
}

TEST(ScreenshotErrors, BadInputSaysWhy) {
  test::TempDir dir;
  auto bad_at = run_command(quote(MEMREC_BINARY) + " view " + quote(test::data("torch_2layer_python.pickle")) +
                            " --screenshot " + quote(dir / "x.png") + " --at soon");
  EXPECT_EQ(bad_at.exit_code, 1);
  EXPECT_NE(bad_at.output.find("--at wants"), std::string::npos) << bad_at.output;
  auto bad_size = run_command(quote(MEMREC_BINARY) + " view " + quote(test::data("torch_2layer_python.pickle")) +
                              " --screenshot " + quote(dir / "x.png") + " --size 10x10");
  EXPECT_EQ(bad_size.exit_code, 1);
  EXPECT_NE(bad_size.output.find("--size"), std::string::npos) << bad_size.output;
  std::string garbage = dir / "garbage.pickle";
  { std::ofstream(garbage) << "not a snapshot"; }
  auto bad_file = run_command(quote(MEMREC_BINARY) + " view " + quote(garbage) + " --screenshot " + quote(dir / "x.png"));
  EXPECT_EQ(bad_file.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.png"));
}

TEST(ScreenshotErrors, NoDisplaySaysSo) {
  test::TempDir dir;
  auto r = run_command("env -u DISPLAY -u WAYLAND_DISPLAY " + quote(MEMREC_BINARY) + " view " +
                       quote(test::data("torch_2layer_python.pickle")) + " --screenshot " + quote(dir / "x.png"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("xvfb-run"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace memrec
