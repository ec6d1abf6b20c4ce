// The ranks view driven like a user (a real window, under xvfb-run when there is no display): clicking a rank's
// lane opens that rank in the views below, and the envelope bounds every rank's curve.
#include <gtest/gtest.h>

#include <future>

#include "../../viewer/src/app.h"
#include "common/rank_runs.h"
#include "common/xvfb.h"
#include "memrec/viewer.h"

namespace memrec {
namespace {

using test::kMiB;

struct RanksApp {
  test::RankFiles run;
  std::unique_ptr<viewer::App> app;
  ImVec2 mouse{-1, -1};
  bool down = false;

  // Ranks 0, 1, 2 peak at 20, 32 and 22 MiB; `more` ranks after them at 20 MiB.
  explicit RanksApp(int more = 0) {
    run.add("r.rank0.memrec", test::rank_run(0, 1'000'000, "h"));
    run.add("r.rank1.memrec", test::rank_run(12 * kMiB, 1'000'010, "h"));
    run.add("r.rank2.memrec", test::rank_run(2 * kMiB, 1'000'020, "h"));
    for (int r = 3; r < 3 + more; ++r) run.add("r.rank" + std::to_string(r) + ".memrec", test::rank_run(0, 1'000'000, "h"));
    app = std::make_unique<viewer::App>(std::async(std::launch::async, viewer::open_ranks, run.paths, std::nullopt),
                                        1280, 1000, true);
    app->input = [this](ImGuiIO& io) {
      io.MousePos = mouse;
      io.MouseDown[0] = down;
    };
    frames(3);
  }
  void frames(int n) {
    for (int i = 0; i < n; ++i) app->frame();
  }
  void click(ImVec2 p) {
    mouse = p;
    frames(1);
    down = true;
    frames(1);
    down = false;
    frames(2);
  }
  nlohmann::json lanes() { return app->ranks().layout(*app->doc().ranks)["lanes"]; }
};

TEST(RanksInteraction, ClickingALaneOpensThatRank) {
  if (test::rerun_under_xvfb()) return;
  RanksApp r;
  ASSERT_FALSE(r.app->ranks().envelope) << "three ranks: a lane each";
  ASSERT_EQ(r.app->doc().rank_index, 1u) << "opens on the furthest rank";
  EXPECT_EQ(r.app->doc().path, r.run.paths[1]);
  nlohmann::json lane = r.lanes()[2];
  r.click(ImVec2(lane["x"].get<float>() + 600, lane["y"].get<float>() - 10));
  EXPECT_EQ(r.app->doc().rank_index, 2u);
  EXPECT_EQ(r.app->doc().path, r.run.paths[2]);
  EXPECT_EQ(r.app->state().instant, r.app->doc().replay->peak_allocated().step) << "the rank opens at its peak";
}

TEST(RanksInteraction, TheEnvelopeHoldsTheHighestAndLowestRank) {
  if (test::rerun_under_xvfb()) return;
  RanksApp r;
  r.app->ranks().envelope = true;
  r.frames(2);
  nlohmann::json layout = r.app->ranks().layout(*r.app->doc().ranks);
  ASSERT_EQ(layout["lanes"].size(), 1u);
  EXPECT_TRUE(layout["envelope"].get<bool>());
  // 280 ns into the axis every rank holds its peak: 20 MiB (rank 0), 32 MiB (rank 1), 22 MiB (rank 2). Clicking at
  // 20 MiB there picks the rank whose curve is nearest: rank 0.
  EXPECT_EQ(layout["scale_bytes"], 32 * kMiB) << "the envelope's scale: the highest allocated peak";
  const nlohmann::json& plot = layout["lanes"][0];
  double per_row = layout["scale_bytes"].get<double>() / (plot["h"].get<double>() - 1);
  float x = plot["x"].get<float>() + static_cast<float>(280 / layout["dt_ns"].get<double>());
  float y = plot["y"].get<float>() - static_cast<float>(20 * kMiB / per_row);
  r.click(ImVec2(x, y));
  EXPECT_EQ(r.app->doc().rank_index, 0u);
}

TEST(RanksInteraction, MoreThanSixteenRanksOpenAsTheEnvelope) {
  if (test::rerun_under_xvfb()) return;
  RanksApp r(15);  // one window at a time: GLFW and ImGui are process-wide
  nlohmann::json layout = r.app->ranks().layout(*r.app->doc().ranks);
  EXPECT_TRUE(layout["envelope"].get<bool>());
  EXPECT_EQ(r.app->doc().rank_index, 1u) << "still the furthest";
}

}  // namespace
}  // namespace memrec
