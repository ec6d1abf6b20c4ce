// The segment history driven like a user: a click on a block in a segment's bar inspects that block and highlights
// it alone on the timeline; the arrows step the instant one event.
#include <gtest/gtest.h>

#include "viewer/driven.h"

namespace memrec {
namespace {

using test::Driven;

TEST(SegmentsInteraction, ClickingABlockSelectsIt) {
  if (test::rerun_under_xvfb()) return;
  Driven d("torch_2layer_python.pickle");
  d.app().state().focus = viewer::Focus::segments;
  d.frames(3);
  const viewer::SegmentsView& v = d.app().segments();
  const Replay& r = *d.app().doc().replay;
  // A block at least 20 px wide, in a bar inside the window; its place comes from its address in the segment.
  uint32_t want = kNone;
  ImVec2 at;
  for (const auto& bar : v.bars()) {
    const SegmentAt& s = v.segments()[bar.segment];
    if (bar.y + 20 > 700 || want != kNone) continue;
    for (uint32_t id : s.blocks) {
      Allocation a = r.allocations()[id];
      double x0 = bar.x + static_cast<double>(a.addr - s.addr) * bar.width / static_cast<double>(s.size);
      double w = static_cast<double>(a.size) * bar.width / static_cast<double>(s.size);
      if (w < 20 || id == d.app().state().selected_allocation) continue;
      want = id;
      at = ImVec2(static_cast<float>(x0 + w / 2), bar.y + viewer::SegmentsView::bar_height() / 2);
      break;
    }
  }
  ASSERT_NE(want, kNone);
  d.click(at);
  EXPECT_EQ(d.app().state().selected_allocation, want);
  const auto& marks = d.app().state().highlight;
  ASSERT_EQ(marks.size(), r.allocations().size());
  EXPECT_EQ(std::count(marks.begin(), marks.end(), 1), 1);
  EXPECT_EQ(marks[want], 1);
}

}  // namespace
}  // namespace memrec
