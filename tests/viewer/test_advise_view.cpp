// `memrec view --view advise` on a real Python program whose activations dominate (advise_programs.h kDeep, recorded
// with `memrec record`): the tab lists `memrec advise`'s changes in its order, checkpointing first and selected; the
// timeline draws the blocks its evidence names in the marks' color at the peak, and the replay's curve under the
// change as a ghost line with advise's own predicted peak. A click on another change marks its blocks and draws its
// curve instead; another tab drops the curve.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "common/advise_programs.h"
#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/viewer.h"
#include "viewer/driven.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

#ifdef MEMREC_TEST_PYTHON

using nlohmann::json;
using test::quote;

// Twelve layers of activations, recorded: checkpointing every layer is advise's first change.
std::string record_deep(const test::TempDir& dir) {
  std::string program = dir / "deep.py", file = dir / "deep.memrec";
  std::ofstream(program) << test::advise_programs::kDeep;
  auto rec = test::run_command(quote(MEMREC_BINARY) + " record -o " + quote(file) + " -- " + MEMREC_TEST_PYTHON +
                               " " + quote(program));
  EXPECT_EQ(rec.exit_code, 0) << rec.output;
  return file;
}

// The picture `--view advise` takes, against `memrec advise --json`'s changes (`want`).
void check_shot(const test::TempDir& dir, const std::string& file, const json& want) {
  test::Shot shot = test::screenshot(file, "--view advise --size 1280x720", dir);
  ASSERT_EQ(shot.layout["view"], "advise") << shot.output;
  const json& tab = shot.layout["advise"];
  const json& rows = tab["rows"];
  ASSERT_EQ(rows.size(), want.size()) << tab.dump(1);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["kind"], want[i]["kind"]) << i;
    EXPECT_EQ(rows[i]["saves_allocated"], want[i]["saves"]["allocated"]) << i;
    if (i > 0) EXPECT_GT(rows[i]["y"].get<float>(), rows[i - 1]["y"].get<float>()) << "row " << i << " below";
  }
  EXPECT_EQ(tab["selected"], 0);
  auto swatch = [&](const json& r) {
    float half = r["size"].get<float>() / 2;
    return shot.image.at(static_cast<int>(r["x"].get<float>() + half), static_cast<int>(r["y"].get<float>() + half));
  };
  EXPECT_EQ(swatch(rows[0]), viewer::kEvidenceColor);
  if (rows.size() > 1) EXPECT_NE(swatch(rows[1]), viewer::kEvidenceColor);

  // The marked blocks: the activations the layers' forwards made, live at the peak; at least what checkpointing
  // saves, at most the peak.
  auto saves = want[0]["saves"]["allocated"].get<uint64_t>();
  auto marked = tab["marked_bytes"].get<uint64_t>();
  Snapshot s = load_snapshot(file);
  Replay r(s, 0);
  EXPECT_GE(marked, saves);
  EXPECT_LE(marked, r.peak_allocated().bytes);
  // On the timeline the highest column of the marks' color holds them all (they are all live at the peak, whose own
  // column the peak marker covers): as many rows as their bytes fill.
  test::Plot plot(shot.layout);
  auto rows_of = [&](int col, uint32_t color) {
    int n = 0;
    for (int row = 0; row < plot.h; ++row) n += plot.pixel(shot.image, col, row) == color;
    return n;
  };
  int most = 0;
  for (int col = 0; col < plot.w; ++col) most = std::max(most, rows_of(col, viewer::kEvidenceColor));
  double expected = static_cast<double>(marked) / plot.per_row;
  EXPECT_NEAR(most, expected, expected * 0.05 + 2);
  // Only the columns where those blocks are live: not the optimizer steps' or the backward's end.
  int marked_cols = 0, drawn_cols = 0;
  for (int col = 0; col < plot.w; ++col) {
    marked_cols += rows_of(col, viewer::kEvidenceColor) > 0;
    drawn_cols += plot.pixel(shot.image, col, 0) != viewer::kPlotBackground;
  }
  EXPECT_GT(marked_cols, 0);
  EXPECT_LT(marked_cols, drawn_cols);

  // The ghost: the run replayed with every layer checkpointed, its peak advise's peak after, drawn where it is.
  const json& g = shot.layout["ghost"];
  ASSERT_TRUE(g.is_object()) << shot.output;
  EXPECT_EQ(g["peak_allocated"], want[0]["peak_after"]["allocated"]);
  EXPECT_EQ(g["label"].get<std::string>().rfind("advice 1 (replayed)", 0), 0u) << g["label"];
  int ghost_col = plot.column(g["peak_ns"].get<int64_t>());
  EXPECT_EQ(plot.pixel(shot.image, ghost_col, plot.row(g["peak_allocated"].get<uint64_t>())),
            viewer::kGhostAllocatedColor);
  test::keep_for_readme(dir, "viewer_advise.png");
}

// The tab driven like a user: a click on the second change.
void check_clicks(const std::string& file) {
  test::Driven d(file, true);
  viewer::ViewState& st = d.app().state();
  st.focus = viewer::Focus::advise;
  d.frames(4);  // the tab opens, says it is computing, computes, marks
  json tab = d.app().advise().layout();
  ASSERT_TRUE(tab.is_object());
  const json& rows = tab["rows"];
  ASSERT_GE(rows.size(), 2u) << tab.dump(1);
  auto marked = [&] { return std::count_if(st.highlight.begin(), st.highlight.end(), [](uint8_t m) { return m; }); };
  EXPECT_EQ(marked(), rows[0]["blocks"].get<long>());
  ASSERT_NE(st.ghost, nullptr);
  EXPECT_EQ(st.ghost_label.rfind("advice 1 ", 0), 0u) << st.ghost_label;

  float half = rows[1]["size"].get<float>() / 2;
  d.click(ImVec2(rows[1]["x"].get<float>() + 80, rows[1]["y"].get<float>() + half));
  EXPECT_EQ(d.app().advise().layout()["selected"], 1);
  EXPECT_EQ(marked(), rows[1]["blocks"].get<long>());
  EXPECT_NE(rows[1]["blocks"], rows[0]["blocks"]);
  ASSERT_NE(st.ghost, nullptr);
  EXPECT_EQ(st.ghost_label.rfind("advice 2 ", 0), 0u) << st.ghost_label;
  // Its curve peaks at the recorded peak less its saving, as `memrec advise` says.
  uint64_t peak = *std::max_element(st.ghost->allocated.begin(), st.ghost->allocated.end());
  EXPECT_EQ(peak, d.app().doc().replay->peak_allocated().bytes - rows[1]["saves_allocated"].get<uint64_t>());

  st.focus = viewer::Focus::timeline;
  d.frames(2);
  EXPECT_EQ(st.ghost, nullptr);
}

// One recording for both (a Python program with torch takes seconds to record); the window needs a display.
TEST(AdviseView, TheTabListsTheAdviceInOrderAndTheSelectedOneMarksItsBlocksAndDrawsItsCurve) {
  if (test::rerun_under_xvfb()) return;
  test::TempDir dir;
  std::string file = record_deep(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto cli = test::run_command(quote(MEMREC_BINARY) + " advise " + quote(file) + " --json 2>/dev/null");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  json want = json::parse(cli.output)["advice"];
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(want[0]["kind"], "checkpoint") << want.dump(1);
  check_shot(dir, file, want);
  check_clicks(file);
}

#endif

}  // namespace
}  // namespace memrec
