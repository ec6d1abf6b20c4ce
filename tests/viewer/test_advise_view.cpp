// `memrec view --view advise` on a real Python program whose activations dominate (advise_programs.h kDeep, recorded
// with `memrec record`): the tab lists `memrec advise`'s changes in its order, checkpointing first and selected; the
// timeline draws the blocks its evidence names in the marks' color at the peak, and the replay's curve under the
// change as a ghost line with advise's own predicted peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "common/advise_programs.h"
#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/viewer.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

#ifdef MEMREC_TEST_PYTHON

using nlohmann::json;
using test::quote;

TEST(AdviseShot, TheTabListsTheAdviceInOrderAndTheFirstMarksItsBlocksAndDrawsItsReplay) {
  test::TempDir dir;
  std::string program = dir / "deep.py", file = dir / "deep.memrec";
  std::ofstream(program) << test::advise_programs::kDeep;
  auto rec = test::run_command(quote(MEMREC_BINARY) + " record -o " + quote(file) + " -- " + MEMREC_TEST_PYTHON +
                               " " + quote(program));
  ASSERT_EQ(rec.exit_code, 0) << rec.output;
  auto cli = test::run_command(quote(MEMREC_BINARY) + " advise " + quote(file) + " --json 2>/dev/null");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  json want = json::parse(cli.output)["advice"];
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(want[0]["kind"], "checkpoint") << want.dump(1);

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
  // On the timeline the peak's column holds them all, in the marks' color: as many rows as their bytes fill.
  test::Plot plot(shot.layout);
  auto rows_of = [&](int col, uint32_t color) {
    int n = 0;
    for (int row = 0; row < plot.h; ++row) n += plot.pixel(shot.image, col, row) == color;
    return n;
  };
  int peak_col = plot.column(r.peak_allocated().time_ns - r.time_of(0));
  double expected = static_cast<double>(marked) / plot.per_row;
  EXPECT_NEAR(rows_of(peak_col, viewer::kEvidenceColor), expected, expected * 0.05 + 2);
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

#endif

}  // namespace
}  // namespace memrec
