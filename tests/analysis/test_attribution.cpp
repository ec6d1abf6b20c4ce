// Grouping the live memory at an instant: exact sums at the peak of real PyTorch snapshots, exact trees on a
// constructed history with scopes, and segments that match the recorded end state.
#include <gtest/gtest.h>

#include <map>

#include "memrec/attribution.h"
#include "memrec/load.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

// Each node holds its children's bytes plus those of the blocks whose path ends at it.
void expect_consistent(const Attribution& at) {
  std::vector<uint64_t> ending(at.nodes().size());
  for (size_t i = 0; i < at.leaves().size(); ++i) ending[at.leaves()[i]] += 1;
  for (const GroupNode& n : at.nodes()) {
    uint64_t children = 0;
    for (uint32_t c : n.children) children += at.nodes()[c].bytes;
    EXPECT_LE(children, n.bytes);
    for (size_t k = 1; k < n.children.size(); ++k)
      EXPECT_GE(at.nodes()[n.children[k - 1]].bytes, at.nodes()[n.children[k]].bytes);
  }
}

class AttributionFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(AttributionFixture, PeakGroupingsSumToTheReplayedLiveBytes) {
  Snapshot s = load_snapshot(test::data(GetParam()));
  Replay r(s, 0);
  uint32_t peak = r.peak_allocated().step;
  std::vector<uint32_t> live = r.live_after(peak);
  uint64_t want = r.after(peak).allocated;
  ASSERT_EQ(want, r.peak_allocated().bytes);
  ASSERT_GT(want, 0u);
  for (int g = 0; g < kGroupingCount; ++g) {
    Attribution at(s, r.allocations(), live, static_cast<Grouping>(g));
    SCOPED_TRACE(std::string(to_string(at.grouping())));
    EXPECT_EQ(at.root().bytes, want);
    EXPECT_EQ(at.root().blocks, live.size());
    uint64_t top = 0;
    for (uint32_t c : at.root().children) top += at.nodes()[c].bytes;
    EXPECT_EQ(top, want) << "every block has a path, so the first level sums to the total";
    expect_consistent(at);
    // Every leaf's path is exactly the block's own path.
    std::vector<uint32_t> path;
    for (size_t i = 0; i < live.size(); ++i) {
      group_path(s, r.allocations()[live[i]], at.grouping(), path);
      ASSERT_EQ(at.path(at.leaves()[i]), path);
    }
  }
}

TEST_P(AttributionFixture, StackTreesNameRealFrames) {
  Snapshot s = load_snapshot(test::data(GetParam()));
  Replay r(s, 0);
  std::vector<uint32_t> live = r.live_after(r.peak_allocated().step);
  Attribution down(s, r.allocations(), live, Grouping::stack_top_down);
  Attribution up(s, r.allocations(), live, Grouping::stack_bottom_up);
  // The recorded blocks have stacks: some first-level group must be a real frame with a file.
  bool named = false;
  for (uint32_t c : down.root().children)
    named |= down.nodes()[c].key != kMissing && down.label(c).find(".py") != std::string::npos;
  EXPECT_TRUE(named);
  EXPECT_EQ(up.root().bytes, down.root().bytes);
  // Matching every allocation against a group reproduces the group's live bytes at the peak.
  uint32_t biggest = down.root().children.front();
  GroupMatcher match(s, Grouping::stack_top_down, down.path(biggest));
  uint64_t matched = 0;
  for (uint32_t id : live)
    if (match(r.allocations()[id])) matched += r.allocations()[id].size;
  EXPECT_EQ(matched, down.nodes()[biggest].bytes);
}

TEST_P(AttributionFixture, SegmentsAtTheEndMatchTheRecordedEndState) {
  Snapshot s = load_snapshot(test::data(GetParam()));
  Replay r(s, 0);
  uint32_t last = static_cast<uint32_t>(r.steps() - 1);
  auto segs = segments_at(s, r, last);
  std::map<uint64_t, uint64_t> want, got;
  for (const Segment& seg : s.segments_end) want[seg.addr] = seg.total_size;
  uint64_t allocated = 0;
  for (const SegmentAt& seg : segs) {
    if (seg.size) got[seg.addr] = seg.size;
    allocated += seg.allocated;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(allocated, r.after(last).allocated);
  EXPECT_EQ(segs.back().size == 0 ? segs.back().blocks.size() : 0u, 0u) << "every live block sits in a segment";
  // At the start, the segments the trace allocates do not exist yet.
  auto first = segments_at(s, r, kNoEvent);
  uint64_t reserved = 0;
  for (const SegmentAt& seg : first) reserved += seg.size;
  EXPECT_EQ(reserved, r.initial().reserved);
}

INSTANTIATE_TEST_SUITE_P(Torch, AttributionFixture,
                         ::testing::Values("torch_2layer_python.pickle", "torch_2layer_all.pickle"));

// Three blocks: two under forward > Linear > aten::addmm, one under backward with no module.
TEST(Attribution, ScopeGroupingsFollowParents) {
  Snapshot s;
  auto scope = [&](const char* n, uint32_t parent, ScopeKind k) {
    s.scopes.push_back(Scope{0, 100, s.strings.intern(n), parent, k, 0});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  };
  uint32_t fwd = scope("forward", 0, ScopeKind::phase);
  uint32_t mod = scope("Linear", fwd, ScopeKind::module);
  uint32_t addmm = scope("aten::addmm", mod, ScopeKind::op);
  uint32_t bwd = scope("backward", 0, ScopeKind::phase);
  uint32_t mm = scope("aten::mm", bwd, ScopeKind::op);
  std::vector<Allocation> allocs = {
      Allocation{.addr = 0x1000, .size = 100, .alloc_step = 0, .scope = addmm},
      Allocation{.addr = 0x2000, .size = 50, .alloc_step = 1, .scope = addmm},
      Allocation{.addr = 0x3000, .size = 7, .alloc_step = 2, .scope = mm},
  };
  std::vector<uint32_t> ids = {0, 1, 2};

  Attribution phase(s, allocs, ids, Grouping::phase);
  ASSERT_EQ(phase.root().children.size(), 2u);
  EXPECT_EQ(phase.label(phase.root().children[0]), "forward");
  EXPECT_EQ(phase.nodes()[phase.root().children[0]].bytes, 150u);
  EXPECT_EQ(phase.label(phase.root().children[1]), "backward");

  Attribution module(s, allocs, ids, Grouping::module);
  ASSERT_EQ(module.root().children.size(), 2u);
  EXPECT_EQ(module.label(module.root().children[0]), "Linear");
  EXPECT_EQ(module.label(module.root().children[1]), "<no module>");
  EXPECT_EQ(module.nodes()[module.root().children[1]].bytes, 7u);

  Attribution op(s, allocs, ids, Grouping::op);
  EXPECT_EQ(op.label(op.leaves()[0]), "aten::addmm");
  EXPECT_EQ(op.leaves()[0], op.leaves()[1]);
  EXPECT_EQ(op.nodes()[op.leaves()[2]].bytes, 7u);

  GroupMatcher in_forward(s, Grouping::phase, phase.path(phase.root().children[0]));
  EXPECT_TRUE(in_forward(allocs[0]));
  EXPECT_FALSE(in_forward(allocs[2]));
}

}  // namespace
}  // namespace memrec
