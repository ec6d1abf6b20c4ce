// The pool of each block: a CUDA graph's private pool in a real PyTorch snapshot, and on a constructed history a
// segment address reused by a pool segment after an event-only segment, a block outside every segment, and a
// recording without segments.
#include <gtest/gtest.h>

#include <map>

#include "memrec/analysis.h"
#include "memrec/attribution.h"
#include "memrec/load.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

std::map<std::string, uint64_t> bytes_by_key(const std::vector<Group>& groups) {
  std::map<std::string, uint64_t> out;
  for (const Group& g : groups) out[g.key] = g.bytes;
  return out;
}

TEST(Pools, EndOfACudaGraphRecordingMatchesTheRecordedSegmentsPools) {
  Snapshot s = load_snapshot(test::data("torch_compile_graph.pickle"));
  Replay r(s, 0);
  // What the end state says: the requested bytes of the allocated blocks, by their segment's pool.
  std::map<std::string, uint64_t> want;
  for (const Segment& seg : s.segments_end) {
    bool graph = seg.pool_id[0] != 0 || seg.pool_id[1] != 0;
    for (const Block& b : seg.blocks)
      if (b.state == BlockState::active_allocated)
        want[graph ? "pool (" + std::to_string(seg.pool_id[0]) + ", " + std::to_string(seg.pool_id[1]) + ")"
                   : "default pool"] += b.requested_size;
  }
  ASSERT_EQ(want.size(), 2u);
  ASSERT_GT(want["pool (1, 0)"], 0u);
  EXPECT_EQ(bytes_by_key(group_live(s, r, r.steps() - 1, GroupBy::pool)), want);
}

TEST(Pools, PeakOfACudaGraphRecordingSumsToTheLiveBytes) {
  Snapshot s = load_snapshot(test::data("torch_compile_graph.pickle"));
  Replay r(s, 0);
  uint32_t peak = r.peak_allocated().step;
  uint64_t sum = 0;
  for (const Group& g : group_live(s, r, peak, GroupBy::pool)) sum += g.bytes;
  EXPECT_EQ(sum, r.peak_allocated().bytes);
}

constexpr uint64_t kSegment = 2 << 20;
constexpr uint64_t kBase = 0x7f0000000000;

struct History {
  Snapshot s;
  int64_t now = 0;
  void add(Action a, uint64_t addr, uint64_t size) {
    s.events.push_back(Event{.time_ns = now += 10, .addr = addr, .size = size, .action = a, .device = 0});
  }
};

TEST(Pools, AReusedAddressTakesThePoolOfTheSegmentThereWhenTheBlockWasAllocated) {
  History h;
  h.add(Action::segment_alloc, kBase, kSegment);  // known only from events: unknown pool
  h.add(Action::alloc, kBase, 1024);              // id 0
  h.add(Action::free_requested, kBase, 1024);
  h.add(Action::free_completed, kBase, 1024);
  h.add(Action::segment_free, kBase, kSegment);
  h.add(Action::segment_alloc, kBase, kSegment);  // the graph's segment, alive at the end
  h.add(Action::alloc, kBase + 512, 2048);        // id 1
  h.add(Action::alloc, kBase + 4 * kSegment, 4096);  // id 2: outside every segment
  Segment graph{.addr = kBase, .total_size = kSegment, .pool_id = {1, 0}};
  graph.blocks = {Block{.addr = kBase + 512, .size = 2048, .requested_size = 2048,
                        .state = BlockState::active_allocated}};
  h.s.segments_end = {graph};
  Replay r(h.s, 0);
  ASSERT_EQ(r.allocations().size(), 3u);
  std::vector<uint32_t> ids = {2, 0, 1};
  EXPECT_EQ(pool_keys(h.s, r, ids), (std::vector<std::string>{"unknown pool", "unknown pool", "pool (1, 0)"}));
}

TEST(Pools, AStartSegmentOfTheDefaultPoolHoldsThePreExistingBlocks) {
  History h;
  Segment start{.addr = kBase, .total_size = kSegment};
  start.blocks = {Block{.addr = kBase, .size = 1024, .requested_size = 1024, .state = BlockState::active_allocated}};
  h.s.segments_start = {start};
  h.s.segments_end = {start};
  h.s.has_segments_start = true;
  h.add(Action::alloc, kBase + 1024, 512);
  Replay r(h.s, 0);
  EXPECT_EQ(bytes_by_key(group_live(h.s, r, 0, GroupBy::pool)),
            (std::map<std::string, uint64_t>{{"default pool", 1536}}));
}

TEST(Pools, WithoutSegmentsEveryBlockIsInAnUnknownPool) {
  History h;
  h.add(Action::alloc, kBase, 512);
  h.add(Action::alloc, kBase + 512, 256);
  Replay r(h.s, 0);
  EXPECT_EQ(bytes_by_key(group_live(h.s, r, 1, GroupBy::pool)),
            (std::map<std::string, uint64_t>{{"unknown pool", 768}}));
}

}  // namespace
}  // namespace memrec
