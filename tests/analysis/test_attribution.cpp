// Grouping the live memory at an instant: exact sums at the peak of real PyTorch snapshots, exact trees on
// constructed histories with scopes and owners, folded stacks, and segments that match the recorded end state.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "analysis/history.h"
#include "common/fixtures.h"
#include "memrec/analysis.h"
#include "memrec/attribution.h"
#include "memrec/frames.h"
#include "memrec/load.h"
#include "memrec/sites.h"

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

// Matching every live block against the tree's largest first-level group gives that group's bytes.
void expect_matcher_finds_the_biggest(const Snapshot& s, const Replay& r, const Attribution& tree, Grouping g,
                                      const std::vector<uint32_t>& live) {
  uint32_t biggest = tree.root().children.front();
  GroupMatcher match(s, r, g, Frames::all, tree.path(biggest));
  uint64_t matched = 0;
  for (uint32_t id : live)
    if (match(id)) matched += r.allocations()[id].size;
  EXPECT_EQ(matched, tree.nodes()[biggest].bytes);
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
    Attribution at(s, r, live, static_cast<Grouping>(g));
    SCOPED_TRACE(std::string(to_string(at.grouping())));
    EXPECT_EQ(at.root().bytes, want);
    EXPECT_EQ(at.root().blocks, live.size());
    uint64_t top = 0;
    for (uint32_t c : at.root().children) top += at.nodes()[c].bytes;
    EXPECT_EQ(top, want) << "every block has a path, so the first level sums to the total";
    expect_consistent(at);
    // Every leaf's path is exactly the block's own path.
    GroupPaths paths(s, r, at.grouping());
    for (size_t i = 0; i < live.size(); ++i) ASSERT_EQ(at.path(at.leaves()[i]), paths.of(live[i]));
  }
}

TEST_P(AttributionFixture, StackTreesNameRealFrames) {
  Snapshot s = load_snapshot(test::data(GetParam()));
  Replay r(s, 0);
  std::vector<uint32_t> live = r.live_after(r.peak_allocated().step);
  Attribution down(s, r, live, Grouping::stack_top_down);
  Attribution up(s, r, live, Grouping::stack_bottom_up);
  // The recorded blocks have stacks: some first-level group must be a real frame with a file.
  bool named = false;
  for (uint32_t c : down.root().children)
    named |= down.nodes()[c].key != kMissing && down.label(c).find(".py") != std::string::npos;
  EXPECT_TRUE(named);
  EXPECT_EQ(up.root().bytes, down.root().bytes);
  // Matching every allocation against a group reproduces the group's live bytes at the peak.
  expect_matcher_finds_the_biggest(s, r, down, Grouping::stack_top_down, live);
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
  test::History h;
  uint32_t fwd = h.scope(ScopeKind::phase, "forward", 0, 100);
  uint32_t mod = h.scope(ScopeKind::module, "Linear", 0, 100, fwd);
  uint32_t addmm = h.scope(ScopeKind::op, "aten::addmm", 0, 100, mod);
  uint32_t bwd = h.scope(ScopeKind::phase, "backward", 0, 100);
  uint32_t mm = h.scope(ScopeKind::op, "aten::mm", 0, 100, bwd);
  h.event(10, Action::alloc, 0x1000, 100, addmm);
  h.event(20, Action::alloc, 0x2000, 50, addmm);
  h.event(30, Action::alloc, 0x3000, 7, mm);
  Replay r(h.s, 0);
  std::vector<uint32_t> ids = {0, 1, 2};

  Attribution phase(h.s, r, ids, Grouping::phase);
  ASSERT_EQ(phase.root().children.size(), 2u);
  EXPECT_EQ(phase.label(phase.root().children[0]), "forward");
  EXPECT_EQ(phase.nodes()[phase.root().children[0]].bytes, 150u);
  EXPECT_EQ(phase.label(phase.root().children[1]), "backward");

  Attribution module(h.s, r, ids, Grouping::module);
  ASSERT_EQ(module.root().children.size(), 2u);
  EXPECT_EQ(module.label(module.root().children[0]), "Linear");
  EXPECT_EQ(module.label(module.root().children[1]), "<no module>");
  EXPECT_EQ(module.nodes()[module.root().children[1]].bytes, 7u);

  Attribution op(h.s, r, ids, Grouping::op);
  EXPECT_EQ(op.label(op.leaves()[0]), "aten::addmm");
  EXPECT_EQ(op.leaves()[0], op.leaves()[1]);
  EXPECT_EQ(op.nodes()[op.leaves()[2]].bytes, 7u);

  GroupMatcher in_forward(h.s, r, Grouping::phase, Frames::all, phase.path(phase.root().children[0]));
  EXPECT_TRUE(in_forward(0));
  EXPECT_FALSE(in_forward(2));
}

// A parameter allocated before any forward and its gradient allocated under another module's backward scope: the
// module tree files both under the owner's module, nested as that module's scopes are (Net > net.0).
TEST(Attribution, TheModuleTreeFilesOwnedBlocksUnderTheirModule) {
  test::History h;
  uint32_t net = h.scope(ScopeKind::module, "Net", 100, 200);
  h.scope(ScopeKind::module, "net.0", 110, 150, net);
  uint32_t net2 = h.scope(ScopeKind::module, "net.2", 150, 190, net);
  h.event(10, Action::alloc, 0x1000, 2048);             // net.0.weight
  h.event(160, Action::alloc, 0x2000, 4000, net2);      // an activation of net.2
  h.event(210, Action::alloc, 0x3000, 2048, net2);      // net.0.weight's gradient
  auto own = [&](uint64_t addr, const char* name, OwnerKind kind) {
    h.s.owners.push_back(Owner{.event = h.s.events.size(), .addr = addr, .size = 2048,
                               .name = h.s.strings.intern(name), .module = h.s.strings.intern("net.0"), .kind = kind});
  };
  own(0x1000, "net.0.weight", OwnerKind::parameter);
  own(0x3000, "net.0.weight.grad", OwnerKind::gradient);
  Replay r(h.s, 0);
  std::vector<uint32_t> ids = {0, 1, 2};
  Attribution module(h.s, r, ids, Grouping::module);
  ASSERT_EQ(module.root().children.size(), 1u);
  uint32_t top = module.root().children[0];
  EXPECT_EQ(module.label(top), "Net");
  EXPECT_EQ(module.nodes()[top].bytes, 8096u);
  ASSERT_EQ(module.nodes()[top].children.size(), 2u);
  uint32_t first = module.nodes()[top].children[0];
  EXPECT_EQ(module.label(first), "net.0");
  EXPECT_EQ(module.nodes()[first].bytes, 4096u);
  EXPECT_EQ(module.leaves()[0], first);
  EXPECT_EQ(module.leaves()[2], first);
  GroupMatcher in_net0(h.s, r, Grouping::module, Frames::all, module.path(first));
  EXPECT_TRUE(in_net0(2));
  EXPECT_FALSE(in_net0(1));
}

// Real C++ and Python stacks folded: every key is a user frame, an op or the site, no CPython or dispatcher row is
// left, and the folded tree holds the same bytes as the full one.
TEST(Attribution, FoldedStacksKeepTheUsersFramesAndTheSite) {
  Snapshot s = load_snapshot(test::data("torch_2layer_all.pickle"));
  Replay r(s, 0);
  std::vector<uint32_t> live = r.live_after(r.peak_allocated().step);
  Attribution all(s, r, live, Grouping::stack_top_down, Frames::all);
  Attribution folded(s, r, live, Grouping::stack_top_down, Frames::user);
  EXPECT_EQ(folded.root().bytes, all.root().bytes);
  EXPECT_LT(folded.nodes().size(), all.nodes().size());
  auto depth = [](const Attribution& at) {
    uint32_t d = 0;
    for (const GroupNode& n : at.nodes()) d = std::max(d, n.depth);
    return d;
  };
  EXPECT_LT(depth(folded), depth(all));
  std::set<uint32_t> sites;
  for (uint32_t id : live) sites.insert(site_frame(s, r.allocations()[id].stack));
  for (size_t n = 1; n < folded.nodes().size(); ++n) {
    uint32_t key = folded.nodes()[n].key;
    if (key == kMissing) continue;  // <no stack>
    bool op = s.strings[s.frames[key].function].find("at::_ops::") != std::string::npos;
    EXPECT_TRUE(is_user_frame(s, key) || sites.count(key) || op) << folded.label(static_cast<uint32_t>(n));
    EXPECT_EQ(folded.label(static_cast<uint32_t>(n)).find("PyCMethod_New"), std::string::npos);
  }
  size_t internal = 0;  // what folding takes away: interpreter, CPython and dispatcher frames
  for (size_t n = 1; n < all.nodes().size(); ++n)
    if (uint32_t key = all.nodes()[n].key; key != kMissing && !is_user_frame(s, key) && !sites.count(key)) ++internal;
  EXPECT_GT(internal, 100u);
}

}  // namespace
}  // namespace memrec

namespace memrec {
namespace {

// PyTorch's pickles have no op scopes: by op, a block is filed under the innermost aten op its C++ frames enter
// (stacks="all"), the tree under all of them outermost first, and without C++ frames (stacks="python") under none.
TEST(Attribution, ThePicklesOpsAreNamedByTheirCppFrames) {
  Snapshot s = load_snapshot(test::data("torch_2layer_all.pickle"));
  Replay r(s, 0);
  uint32_t peak = r.peak_allocated().step;
  std::vector<uint32_t> live = r.live_after(peak);
  std::map<std::string, uint64_t> flat;
  for (const Group& g : group_live(s, r, peak, GroupBy::op)) flat[g.key] = g.bytes;
  EXPECT_EQ(flat["aten::mm"], 6u << 20);
  EXPECT_GT(flat["aten::empty_strided"], 0u);
  Attribution tree(s, r, live, Grouping::op);
  std::map<std::string, uint64_t> leaves;
  for (size_t i = 0; i < live.size(); ++i) {
    const Allocation& a = r.allocations()[live[i]];
    std::vector<std::string> ops = stack_ops(s, a.stack);
    std::vector<std::string> path;
    for (uint32_t key : tree.path(tree.leaves()[i])) path.push_back(key_label(s, Grouping::op, key));
    EXPECT_EQ(path, ops.empty() ? std::vector<std::string>{"<no op>"} : ops);
    EXPECT_EQ(group_key(s, a, GroupBy::op, Category::unknown), ops.empty() ? "" : ops.back());
    leaves[path.back()] += a.size;
  }
  leaves.erase("<no op>");
  flat.erase("<none>");
  EXPECT_EQ(leaves, flat);
  expect_matcher_finds_the_biggest(s, r, tree, Grouping::op, live);

  Snapshot python = load_snapshot(test::data("torch_2layer_python.pickle"));
  Replay rp(python, 0);
  auto none = group_live(python, rp, rp.peak_allocated().step, GroupBy::op);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].key, "<none>");
}

}  // namespace
}  // namespace memrec
