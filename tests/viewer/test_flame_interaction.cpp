// The flame graph driven like a user: a click zooms into a box and a second one zooms out, the zoom stays on its
// group when the instant moves, and the search text leaves the boxes it names bright and dims the others.
#include <gtest/gtest.h>

#include <GLFW/glfw3.h>

#include "viewer/driven.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

using test::Driven;
using viewer::FlameView;

const FlameView::Box* box_of(const FlameView& f, uint32_t node) {
  for (const FlameView::Box& b : f.boxes())
    if (b.node == node) return &b;
  return nullptr;
}

ImVec2 middle(const FlameView& f, const FlameView::Box& b) {
  return ImVec2(f.origin().x + (b.x0 + b.x1) / 2, f.origin().y + (static_cast<float>(b.depth) + 0.5f) * FlameView::row_height());
}

// The box's top pixel row (above its label), read back from the frame.
uint32_t top_pixel(const test::Image& img, const FlameView& f, const FlameView::Box& b) {
  return img.at(static_cast<int>(f.origin().x + (b.x0 + b.x1) / 2),
                static_cast<int>(f.origin().y + static_cast<float>(b.depth) * FlameView::row_height() + 1));
}

TEST(FlameInteraction, ClickZoomsAndTheZoomFollowsTheInstant) {
  if (test::rerun_under_xvfb()) return;
  Driven d("torch_2layer_python.pickle");
  d.app().state().focus = viewer::Focus::flame;
  d.frames(3);
  const FlameView& f = d.app().flame();
  const FlameView::Box* pick = nullptr;
  for (const FlameView::Box& b : f.boxes())
    if (b.depth == 2 && b.x1 - b.x0 < f.width() - 1 && (!pick || b.x1 - b.x0 > pick->x1 - pick->x0)) pick = &b;
  ASSERT_NE(pick, nullptr);
  uint32_t node = pick->node;
  float width_before = pick->x1 - pick->x0;
  std::string label = f.tree()->label(node);
  d.click(middle(f, *pick));

  // Zoomed: the group spans the graph and its children share it by their bytes.
  const FlameView::Box* z = box_of(f, node);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->x0, 0);
  EXPECT_NEAR(z->x1, f.width(), 0.5);
  const auto& nodes = f.tree()->nodes();
  for (uint32_t c : nodes[node].children) {
    double want = f.width() * static_cast<double>(nodes[c].bytes) / static_cast<double>(nodes[node].bytes);
    if (want < 1) continue;
    const FlameView::Box* cb = box_of(f, c);
    ASSERT_NE(cb, nullptr);
    EXPECT_NEAR(cb->x1 - cb->x0, want, 0.5);
  }
  // Its parent stays above it, full width.
  const FlameView::Box* parent = box_of(f, nodes[node].parent);
  ASSERT_NE(parent, nullptr);
  EXPECT_NEAR(parent->x1 - parent->x0, f.width(), 0.5);

  // Another instant: the tree is rebuilt and the zoom is on the same group again.
  const Replay& r = *d.app().doc().replay;
  d.app().state().set_instant(d.app().doc(), r.peak_allocated().step - 1);
  d.frames(1);
  const FlameView::Box* again = nullptr;
  for (const FlameView::Box& b : f.boxes())
    if (b.depth == 2 && b.x0 == 0 && b.x1 >= f.width() - 0.5f) again = &b;
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(f.tree()->label(again->node), label);

  // Back at the peak, a click on the zoomed box zooms out one level: its parent spans the graph, and it has its share
  // of the parent.
  d.app().state().set_instant(d.app().doc(), r.peak_allocated().step);
  d.frames(1);
  const FlameView::Box* zoomed = nullptr;
  for (const FlameView::Box& b : f.boxes())
    if (b.depth == 2 && b.x0 == 0 && b.x1 >= f.width() - 0.5f) zoomed = &b;
  ASSERT_NE(zoomed, nullptr);
  d.click(middle(f, *zoomed));
  const FlameView::Box* out = nullptr;
  for (const FlameView::Box& b : f.boxes())
    if (f.tree()->label(b.node) == label && b.depth == 2) out = &b;
  ASSERT_NE(out, nullptr);
  const auto& now = f.tree()->nodes();
  uint32_t up = now[out->node].parent;
  EXPECT_NEAR(box_of(f, up)->x1 - box_of(f, up)->x0, f.width(), 0.5);
  EXPECT_NEAR(out->x1 - out->x0, f.width() * static_cast<double>(now[out->node].bytes) / static_cast<double>(now[up].bytes), 0.5);
  // And once more: the whole graph again, the group with its share of everything, as before the first click.
  d.click(middle(f, *box_of(f, up)));
  out = nullptr;
  for (const FlameView::Box& b : f.boxes())
    if (f.tree()->label(b.node) == label && b.depth == 2) out = &b;
  EXPECT_NEAR(out->x1 - out->x0, width_before, 0.5);
}

TEST(FlameInteraction, SearchKeepsTheBoxesItNamesBright) {
  if (test::rerun_under_xvfb()) return;
  test::TempDir dir;
  Driven d("torch_2layer_python.pickle");
  d.app().state().focus = viewer::Focus::flame;
  d.frames(3);
  const FlameView& f = d.app().flame();
  // The search names the function of the widest box of row 2; a box of row 1 that does not hold it stays apart.
  const FlameView::Box* named = nullptr;
  for (const FlameView::Box& b : f.boxes())
    if (b.depth == 2 && (!named || b.x1 - b.x0 > named->x1 - named->x0)) named = &b;
  ASSERT_NE(named, nullptr);
  std::string label = f.tree()->label(named->node);
  std::string text = label.substr(0, label.find(' '));
  const FlameView::Box* other = nullptr;
  for (const FlameView::Box& b : f.boxes())
    if (b.depth == 1 && b.x1 - b.x0 > 4 && f.tree()->label(b.node).find(text) == std::string::npos) other = &b;
  ASSERT_NE(other, nullptr) << text;
  uint32_t named_node = named->node, other_node = other->node;
  d.app().save_png(dir / "before.png");
  d.click(ImVec2(60, 16));  // the search box, top left
  d.type(text);
  d.hold(GLFW_KEY_ENTER, 1);
  EXPECT_EQ(d.app().state().search, text);
  d.app().save_png(dir / "after.png");
  auto before = test::load_png(dir / "before.png"), after = test::load_png(dir / "after.png");
  EXPECT_EQ(top_pixel(after, f, *box_of(f, named_node)), top_pixel(before, f, *box_of(f, named_node))) << text;
  EXPECT_NE(top_pixel(after, f, *box_of(f, other_node)), top_pixel(before, f, *box_of(f, other_node))) << text;
}

}  // namespace
}  // namespace memrec
