// The ranks view driven like a user (a real window, under xvfb-run when there is no display): clicking a rank's
// lane opens that rank in the views below, and the envelope bounds every rank's curve.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>

#include "../../viewer/src/app.h"
#include "common/rank_runs.h"
#include "common/xvfb.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/viewer.h"

namespace memrec {
namespace {

using test::kMiB;
using test::RankFiles;

struct RanksApp {
  RankFiles run;
  std::unique_ptr<viewer::App> app;
  ImVec2 mouse{-1, -1};
  bool down = false;

  // Ranks 0, 1, 2 peak at 20, 32 and 22 MiB; `more` ranks after them at 20 MiB. `prepare` sees the files written
  // before the viewer opens them.
  explicit RanksApp(int more = 0, const std::function<void(RankFiles&)>& prepare = {}) {
    run.add("r.rank0.memrec", test::rank_run(0, 1'000'000, "h"));
    run.add("r.rank1.memrec", test::rank_run(12 * kMiB, 1'000'010, "h"));
    run.add("r.rank2.memrec", test::rank_run(2 * kMiB, 1'000'020, "h"));
    for (int r = 3; r < 3 + more; ++r) run.add("r.rank" + std::to_string(r) + ".memrec", test::rank_run(0, 1'000'000, "h"));
    if (prepare) prepare(run);
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
  EXPECT_EQ(r.app->ranks().layout(*r.app->doc().ranks)["read_whole"], 3) << "files without summaries are read whole";
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

// Ranks with summaries open from them alone: a rank whose chunks were damaged after its summary was written still
// gets its lane, and picking it says why it cannot be opened while the views keep the rank they show.
TEST(RanksInteraction, RanksOpenFromTheirSummariesAndOnlyThePickedOneIsRead) {
  if (test::rerun_under_xvfb()) return;
  RanksApp r(0, [](RankFiles& run) {
    for (const std::string& path : run.paths) write_summary(read_file(path), path);
    test::damage_first_chunk(run.paths[2]);
    ASSERT_THROW(load_snapshot(run.paths[2]), Error) << "the damage makes the file unreadable whole";
  });
  const RankSet& set = *r.app->doc().ranks;
  EXPECT_EQ(set.read_whole, 0u);
  EXPECT_EQ(set.ranks[2].read_from, "file summary");
  ASSERT_EQ(set.ranks[2].allocated_max.size(), kSummaryCurve);
  EXPECT_EQ(*std::max_element(set.ranks[2].allocated_max.begin(), set.ranks[2].allocated_max.end()), 22 * kMiB)
      << "rank 2's curve, from its summary, holds its peak";
  ASSERT_EQ(r.app->doc().rank_index, 1u) << "the furthest rank, read whole";

  nlohmann::json lanes = r.lanes();
  ASSERT_EQ(lanes.size(), 3u);
  r.click(ImVec2(lanes[2]["x"].get<float>() + 600, lanes[2]["y"].get<float>() - 10));
  EXPECT_EQ(r.app->doc().rank_index, 1u) << "the views keep the rank they showed";
  EXPECT_EQ(r.app->doc().path, r.run.paths[1]);
  std::string error = r.app->ranks().layout(set)["open_error"];
  EXPECT_NE(error.find("rank 2 cannot be opened"), std::string::npos) << error;
  EXPECT_NE(error.find(r.run.paths[2]), std::string::npos) << error;

  lanes = r.lanes();  // the error's line moved the plot down
  r.click(ImVec2(lanes[0]["x"].get<float>() + 600, lanes[0]["y"].get<float>() - 10));
  EXPECT_EQ(r.app->doc().rank_index, 0u);
  EXPECT_EQ(r.app->ranks().open_error, "") << "a rank that opens clears the error";
}

}  // namespace
}  // namespace memrec
