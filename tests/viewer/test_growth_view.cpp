// `memrec view --view growth` on a real Python loop that keeps a tensor a step in a list (growth_programs.py list,
// recorded with `memrec record`): the legend names the line that appends, at the bytes it keeps a step, and the
// timeline draws the blocks that line kept past their step in the legend's color.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "common/fixtures.h"
#include "common/process.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

#ifdef MEMREC_TEST_PYTHON

using nlohmann::json;
using test::quote;

const std::string kProgram = test::source("tests/python/growth_programs.py");
constexpr double kKept = 256 * 512 * 4;  // a batch x width float32 tensor a step

uint32_t line_of(const std::string& marker) { return test::line_holding(kProgram, marker); }

TEST(GrowthShot, LegendNamesTheGrowingLineAndTheTimelineDrawsItsBlocksInItsColor) {
  test::TempDir dir;
  std::string file = dir / "list.memrec";
  auto rec = test::run_command(quote(MEMREC_BINARY) + " record -o " + quote(file) + " -- " + MEMREC_TEST_PYTHON + " " +
                               quote(kProgram) + " list --steps 16 --batch 256 --width 512");
  ASSERT_EQ(rec.exit_code, 0) << rec.output;
  test::Shot shot = test::screenshot(file, "--view growth --size 1280x720", dir);
  ASSERT_EQ(shot.layout["view"], "growth") << shot.output;
  const json& g = shot.layout["growth"];
  EXPECT_EQ(g["verdict"], "grows") << g.dump(1);

  std::string at = "growth_programs.py:" + std::to_string(line_of("# grows: list")) + ")";
  auto row = std::find_if(g["legend"].begin(), g["legend"].end(),
                          [&](const json& r) { return r["site"].get<std::string>().find(at) != std::string::npos; });
  ASSERT_NE(row, g["legend"].end()) << g.dump(1);
  EXPECT_NEAR((*row)["bytes_per_step"].get<double>(), kKept, kKept * 0.05);
  auto blocks = (*row)["blocks"].get<size_t>();
  EXPECT_GE(blocks, 12u) << "a tensor kept in each step but the warm-up's";
  auto color = (*row)["color"].get<uint32_t>();
  float half = (*row)["size"].get<float>() / 2;
  EXPECT_EQ(shot.image.at(static_cast<int>((*row)["x"].get<float>() + half), static_cast<int>((*row)["y"].get<float>() + half)),
            color);

  // On the timeline, the highest column of that color holds the kept tensors, all live at the end: as many rows as
  // their bytes fill.
  const json& plot = shot.layout["plot"];
  int x0 = plot["x"], y0 = plot["y"], w = plot["w"], h = plot["h"];
  int most = 0;
  for (int x = x0; x < x0 + w; ++x) {
    int n = 0;
    for (int y = y0; y < y0 + h; ++y) n += shot.image.at(x, y) == color;
    most = std::max(most, n);
  }
  double rows = static_cast<double>(blocks) * kKept / shot.layout["bytes_per_row"].get<double>();
  EXPECT_NEAR(most, rows, rows * 0.05 + 2) << "blocks " << blocks;
  test::keep_for_readme(dir, "viewer_growth.png");
}

#endif

}  // namespace
}  // namespace memrec
