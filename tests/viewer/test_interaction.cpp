// The viewer driven like a user: mouse clicks, wheel, drags and keys fed through ImGuiIO into a real window
// (re-run under xvfb-run when there is no display), with outcomes checked against the replay.
#include <gtest/gtest.h>

#include <GLFW/glfw3.h>

#include <cstdlib>
#include <numeric>

#include "../../bench/synthetic.h"
#include "../../viewer/src/app.h"
#include "common/process.h"
#include "viewer/driven.h"
#include "memrec/format.h"

namespace memrec {
namespace {

using viewer::App;
using test::Driven;
using test::rerun_under_xvfb;

TEST(Interaction, ClickingABandInspectsThatBlock) {
  if (rerun_under_xvfb()) return;
  Driven d("torch_2layer_python.pickle");
  const Replay& r = *d.app().doc().replay;
  uint32_t peak = r.peak_allocated().step;
  const auto& g = d.grid();
  float x = g.x_of(r.peak_allocated().time_ns);
  // A row a third of the way up the peak's stack; the block there comes from the live blocks' sizes in order.
  int row = static_cast<int>(static_cast<double>(r.peak_allocated().bytes) / 3 / d.app().timeline().bytes_per_row());
  float y = g.y + d.app().timeline().plot_height() - 1 - row;
  uint64_t offset = static_cast<uint64_t>((row + 0.5) * d.app().timeline().bytes_per_row());
  uint32_t want = kNone;
  uint64_t top = 0;
  for (uint32_t id : r.live_after(peak)) {
    top += r.allocations()[id].size;
    if (offset < top) {
      want = id;
      break;
    }
  }
  ASSERT_NE(want, kNone);
  d.app().state().set_instant(d.app().doc(), kNoEvent);  // clicking must move it back to the peak
  d.click(ImVec2(x + 0.5f, y + 0.5f));
  EXPECT_EQ(d.app().state().selected_allocation, want);
  EXPECT_EQ(d.app().state().instant, peak);
  EXPECT_EQ(d.app().state().attribution->root().bytes, r.peak_allocated().bytes);
}

TEST(Interaction, WheelZoomsAroundTheMouseAndDragPans) {
  if (rerun_under_xvfb()) return;
  Driven d("torch_2layer_all.pickle");
  viewer::ViewState& st = d.app().state();
  const auto& g = d.grid();
  ImVec2 p(g.x + 300.5f, g.y + 50);
  double before_span = st.span, under_mouse = g.time_at(p.x);
  d.wheel(p, 2);
  EXPECT_NEAR(st.span, before_span * 0.64, before_span * 1e-9);
  EXPECT_NEAR(d.grid().time_at(p.x), under_mouse, 2 * d.grid().dt) << "the time under the mouse stays put";

  double t0 = st.t0, dt = st.span / d.grid().width;  // the grid shows the new zoom from the next frame
  d.drag(ImVec2(g.x + 600.5f, g.y + 50), ImVec2(g.x + 400.5f, g.y + 50));
  EXPECT_NEAR(st.t0 - t0, 200 * dt, 2 * dt) << "dragging left by 200 px shows what was 200 columns to the right";
}

// A synthetic recording with kernels on two streams and phase, module and op scopes: lanes with thousands of items.
std::string write_recording_with_lanes(const test::TempDir& tmp) {
  Snapshot s = make_synthetic(30'000, 5);
  add_training_scopes_and_kernels(s);
  std::string path = tmp / "lanes.memrec";
  write_file(s, path);
  return path;
}

// Panning repaints only the lane columns that scrolled in: the result must equal painting the same view afresh.
TEST(Interaction, PannedLanesEqualAFreshPaint) {
  if (rerun_under_xvfb()) return;
  test::TempDir tmp;
  Driven d(write_recording_with_lanes(tmp), true);
  ASSERT_GE(d.app().doc().kernel_lanes.size(), 2u);
  const auto& g = d.grid();
  d.wheel(ImVec2(g.x + 500.5f, g.y + 50), 6);  // items now span several columns
  d.drag(ImVec2(g.x + 600.5f, g.y + 50), ImVec2(g.x + 430.5f, g.y + 50));
  d.drag(ImVec2(g.x + 300.5f, g.y + 50), ImVec2(g.x + 333.5f, g.y + 50));
  // Pixels, and the item under each column (which places the names).
  std::vector<uint32_t> panned = d.app().lanes().image().pixels(), panned_items = d.app().lanes().items();
  viewer::ViewState& st = d.app().state();
  double t0 = st.t0, span = st.span;
  st.span *= 3;  // another zoom, then back: the lanes are painted whole
  d.frames(1);
  st.t0 = t0, st.span = span;
  d.frames(1);
  EXPECT_TRUE(d.app().lanes().image().pixels() == panned);
  EXPECT_EQ(d.app().lanes().items(), panned_items);
}

TEST(Interaction, KeysZoomPanAndFitThePeak) {
  if (rerun_under_xvfb()) return;
  Driven d("torch_2layer_python.pickle");
  viewer::ViewState& st = d.app().state();
  const Replay& r = *d.app().doc().replay;
  double full = st.span;
  d.hold(GLFW_KEY_W, 5);
  EXPECT_LT(st.span, full);
  double t0 = st.t0;
  d.hold(GLFW_KEY_D, 5);
  EXPECT_GT(st.t0, t0);
  d.hold(GLFW_KEY_S, 20);
  EXPECT_GT(st.span, full * 0.5);
  st.set_instant(d.app().doc(), kNoEvent);
  d.hold(GLFW_KEY_F, 1);
  double peak = static_cast<double>(r.peak_allocated().time_ns - r.time_of(0));
  EXPECT_LT(st.span, full);
  EXPECT_GT(peak, st.t0);
  EXPECT_LT(peak, st.t1());
  EXPECT_EQ(st.instant, r.peak_allocated().step);
  d.hold(GLFW_KEY_0, 1);
  EXPECT_DOUBLE_EQ(st.span, full);
  EXPECT_TRUE(d.app().timeline().complete() || (d.frames(50), d.app().timeline().complete()));
}

TEST(Interaction, SearchHighlightsTheBlocksOfMatchingFrames) {
  if (rerun_under_xvfb()) return;
  Driven d("torch_2layer_python.pickle");
  const Snapshot& s = d.app().doc().snapshot;
  const auto& allocs = d.app().doc().replay->allocations();
  // Expected: blocks whose stack has a frame with "_apply" in its function or file name.
  std::vector<uint8_t> want(allocs.size());
  for (size_t i = 0; i < allocs.size(); ++i)
    for (uint32_t f : s.stacks[allocs[i].stack])
      if (s.strings[s.frames[f].function].find("_apply") != std::string::npos ||
          s.strings[s.frames[f].file].find("_apply") != std::string::npos)
        want[i] = 1;
  ASSERT_GT(std::accumulate(want.begin(), want.end(), 0), 0);
  ASSERT_LT(std::accumulate(want.begin(), want.end(), 0), static_cast<int>(allocs.size()));

  d.click(ImVec2(60, 16));  // the search box, top left
  d.type("_apply");
  d.hold(GLFW_KEY_ENTER, 1);
  EXPECT_EQ(d.app().state().highlight, want);
  d.click(ImVec2(60, 16));
  d.hold(GLFW_KEY_BACKSPACE, 1);
  EXPECT_EQ(d.app().state().highlight, want) << "editing alone does not search";
}

}  // namespace
}  // namespace memrec
