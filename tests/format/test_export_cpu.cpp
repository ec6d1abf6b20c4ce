// A CPU recording has no segments; its exported pickle still draws in every row of memory_viz's Allocator State
// History. Checked by tests/scripts/memory_viz_replay.py, which undoes the trace from the end the way memory_viz
// does and fails where a block would lie outside every segment.
#include <gtest/gtest.h>

#include "../../bench/synthetic.h"
#include "memrec/pickle.h"
#include "memrec/replay.h"
#include "test_pickle_util.h"

namespace memrec {
namespace {

using test::TempDir;

int memory_viz_replay(const std::string& pickle) {
  return test::run(fmt::format("python3 '{}' '{}'", test::source("tests/scripts/memory_viz_replay.py"), pickle));
}

// A training-loop-shaped history with the segments taken out, as memrec's CPU recorder writes it.
Snapshot cpu_history() {
  Snapshot gpu = make_synthetic(6000, 3);
  Snapshot s = gpu;
  std::vector<Event> events;
  for (size_t i = 0; i < gpu.events.size(); ++i)
    if (Event e = gpu.events[i]; !is_segment_grow(e.action) && !is_segment_shrink(e.action)) events.push_back(e);
  s.events.assign(events);
  s.segments_end.clear();
  s.metadata["device.0.type"] = "cpu";
  return s;
}

TEST(ExportCpu, EveryRowOfMemoryVizFindsItsBlocksInSegments) {
  TempDir tmp;
  std::string out = tmp / "cpu.pickle";
  Snapshot s = cpu_history();
  ASSERT_GT(s.events.size(), 5000u);
  export_pickle_file(s, out);
  EXPECT_EQ(memory_viz_replay(out), 0);
}

TEST(ExportCpu, BlocksLiveAtTheEndGetSegmentsAndBlocksFreedBeforeTheTraceToo) {
  Snapshot s;
  s.events.push_back(Event{.time_ns = 1000, .addr = 0x9000, .size = 64, .action = Action::free_requested});
  s.events.push_back(Event{.time_ns = 2000, .addr = 0x9000, .size = 64, .action = Action::free_completed});
  s.events.push_back(Event{.time_ns = 3000, .addr = 0x1000, .size = 100, .rounding = 28, .action = Action::alloc});
  s.events.push_back(Event{.time_ns = 4000, .addr = 0x2000, .size = 50, .action = Action::alloc});
  s.events.push_back(Event{.time_ns = 5000, .addr = 0x2000, .size = 50, .action = Action::free_requested});
  TempDir tmp;
  std::string out = tmp / "cpu.pickle";
  export_pickle_file(s, out);
  EXPECT_EQ(memory_viz_replay(out), 0);

  Snapshot back = import_pickle_file(out);
  ASSERT_EQ(back.segments_end.size(), 2u);  // 0x1000 allocated, 0x2000 pending free
  EXPECT_EQ(back.segments_end[0].addr, 0x1000u);
  EXPECT_EQ(back.segments_end[0].total_size, 128u);
  EXPECT_EQ(back.segments_end[0].blocks.at(0).requested_size, 100u);
  EXPECT_EQ(back.segments_end[1].blocks.at(0).state, BlockState::active_pending_free);
  // segment_free after the free of the block freed before the trace, a segment_alloc before each alloc.
  ASSERT_EQ(back.events.size(), 8u);
  EXPECT_EQ(back.events[2].action, Action::segment_free);
  EXPECT_EQ(back.events[3].action, Action::segment_alloc);
  EXPECT_EQ(back.events[3].size, 128u);
  EXPECT_TRUE(back.warnings.empty()) << back.warnings.front();
}

TEST(ExportCpu, DevicesWithSegmentsAreLeftAsTheyAre) {
  Snapshot gpu = make_synthetic(3000, 5);
  EXPECT_EQ(import_pickle(export_pickle(gpu)).events.size(), gpu.events.size());
}

}  // namespace
}  // namespace memrec
