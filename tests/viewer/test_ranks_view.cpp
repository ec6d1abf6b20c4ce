// `memrec view A B C --screenshot`: the ranks side by side, each lane's drawn peak checked against the rank's own
// replay (not the viewer's curves), and the rank furthest from the median opened in the views below.
#include <gtest/gtest.h>

#include <stb/stb_image.h>

#include <cstring>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/rank_runs.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/viewer.h"

namespace memrec {
namespace {

using test::kMiB;
using test::quote;

struct Shot {
  nlohmann::json layout;
  int width = 0, height = 0;
  std::vector<uint32_t> pixels;  // ABGR as ImGui packs colors
  uint32_t at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

Shot screenshot(const std::string& files, const std::string& png) {
  auto r = test::run_command("xvfb-run -a " + quote(MEMREC_BINARY) + " view " + files + " --screenshot " +
                                quote(png) + " --size 1280x1000");
  Shot shot;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("{")) shot.layout = nlohmann::json::parse(line);
  int channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> data(stbi_load(png.c_str(), &shot.width, &shot.height, &channels, 4),
                                                       stbi_image_free);
  if (data) {
    shot.pixels.resize(static_cast<size_t>(shot.width) * shot.height);
    std::memcpy(shot.pixels.data(), data.get(), shot.pixels.size() * 4);
  }
  return shot;
}

TEST(RanksView, EachLaneShowsItsRanksReplayedPeak) {
  test::RankFiles run;
  run.add("r.rank0.memrec", test::rank_run(0, 1'000'000, "h"));
  run.add("r.rank1.memrec", test::rank_run(12 * kMiB, 1'000'300, "h"));
  run.add("r.rank2.memrec", test::rank_run(2 * kMiB, 1'000'600, "h"));
  Shot shot = screenshot(run.quoted(), run.dir / "ranks.png");
  ASSERT_TRUE(shot.layout.contains("ranks")) << shot.layout;
  const nlohmann::json& L = shot.layout["ranks"];
  ASSERT_EQ(L["lanes"].size(), 3u);
  double scale = L["scale_bytes"].get<double>();
  EXPECT_EQ(scale, 64.0 * kMiB) << "one scale for every lane: the highest reserved peak";
  for (size_t i = 0; i < 3; ++i) {
    const nlohmann::json& lane = L["lanes"][i];
    ASSERT_EQ(lane["rank"], static_cast<int>(i));
    int x = lane["x"].get<int>(), bottom = lane["y"].get<int>(), w = lane["w"].get<int>(), h = lane["h"].get<int>();
    ASSERT_GT(h, 60);
    // The highest white pixel of the lane is its allocated peak.
    int top = bottom + 1;
    for (int y = bottom - h + 1; y <= bottom && top > bottom; ++y)
      for (int col = x; col < x + w; ++col)
        if (shot.at(col, y) == viewer::kAllocatedColor) {
          top = y;
          break;
        }
    ASSERT_LE(top, bottom) << "rank " << i << ": no allocated curve";
    Snapshot s = load_snapshot(run.paths[i]);
    Replay r(s, 0);
    double per_row = scale / (h - 1);
    double drawn = (bottom - top) * per_row;
    EXPECT_NEAR(drawn, static_cast<double>(r.peak_allocated().bytes), per_row / 2 + 1) << "rank " << i;
    // Reserved (the segment) is the lane's top row: the whole scale.
    bool reserved_top = false;
    for (int col = x; col < x + w; ++col) reserved_top |= shot.at(col, bottom - h + 1) == viewer::kReservedColor;
    EXPECT_TRUE(reserved_top) << "rank " << i;
  }
  EXPECT_GT(shot.layout["instant_step"].get<int64_t>(), 0) << "the views below show the furthest rank at its peak";
  Snapshot furthest = load_snapshot(run.paths[1]);
  EXPECT_EQ(shot.layout["instant_step"].get<int64_t>(), static_cast<int64_t>(Replay(furthest, 0).peak_allocated().step));
}

}  // namespace
}  // namespace memrec
