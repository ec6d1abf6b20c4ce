// The segment history between a block's free_requested and its free_completed: the block is drawn as pending free
// (amber) in its segment, and it is the only pending one, as the events say.
#include <gtest/gtest.h>

#include <set>

#include "../../bench/synthetic.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/timeline.h"
#include "memrec/viewer.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

TEST(SegmentsPending, ABlockFreedButNotReleasedIsDrawnPending) {
  test::TempDir dir;
  std::string path = dir / "run.memrec";
  write_file(make_synthetic(400, 3), path);
  Snapshot s = load_snapshot(path);
  Replay r(s, 0);
  // The widest block whose release is not the free itself, at the instant right after its free_requested.
  uint32_t pick = kNone;
  for (uint32_t id = 0; id < r.allocations().size(); ++id) {
    Allocation a = r.allocations()[id];
    if (a.free_step < kBeforeStart && a.completed_step != kNoEvent && a.completed_step > a.free_step &&
        (pick == kNone || a.size > r.allocations()[pick].size))
      pick = id;
  }
  ASSERT_NE(pick, kNone);
  Allocation p = r.allocations()[pick];
  uint32_t step = p.free_step;
  ASSERT_LT(r.time_of(step), r.time_of(step + 1));  // the time names this step alone
  std::set<uint32_t> want;  // every block pending after `step`, from the events' steps
  for (uint32_t id = 0; id < r.allocations().size(); ++id) {
    Allocation a = r.allocations()[id];
    if (a.free_step <= step && a.completed_step != kNoEvent && a.completed_step > step) want.insert(id);
  }
  EXPECT_EQ(want, std::set<uint32_t>{pick});

  test::Shot shot = test::screenshot(
      path, "--view segments --size 1280x900 --at " + std::to_string(r.time_of(step) - r.time_of(0)) + "ns", dir);
  ASSERT_TRUE(shot.layout.contains("segments")) << shot.output;
  EXPECT_EQ(shot.layout["instant_step"].get<int64_t>(), step);
  std::set<uint32_t> got;
  bool drawn = false;
  for (const auto& bar : shot.layout["segments"]["bars"]) {
    auto addr = bar["addr"].get<uint64_t>(), size = bar["size"].get<uint64_t>();
    for (const auto& id : bar["pending"]) got.insert(id.get<uint32_t>());
    if (p.addr < addr || p.addr >= addr + size) continue;
    // Not among the segment's live blocks, and painted amber at its address.
    for (const auto& id : bar["blocks"]) EXPECT_NE(id.get<uint32_t>(), pick);
    double w = bar["w"].get<double>();
    double x = bar["x"].get<double>() + static_cast<double>(p.addr - addr + p.size / 2) * w / static_cast<double>(size);
    double y = bar["y"].get<double>() + shot.layout["segments"]["bar_h"].get<double>() / 2;
    ASSERT_GE(static_cast<double>(p.size) * w / static_cast<double>(size), 4) << "too narrow to see";
    EXPECT_EQ(shot.image.at(static_cast<int>(x), static_cast<int>(y)), viewer::kPendingFreeColor);
    drawn = true;
  }
  EXPECT_TRUE(drawn) << "the pending block's segment is not on screen";
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace memrec
