// Categories, grouping, fragmentation and OOM explanation on histories whose answers are known by construction.
#include <gtest/gtest.h>

#include <numeric>

#include "analysis/history.h"
#include "memrec/analysis.h"

namespace memrec {
namespace {

constexpr uint64_t MiB = 1 << 20;

// A training step: parameters and an input before the phases, then forward, backward and optimizer phases.
struct TrainingStep : test::History {
  TrainingStep() {
    uint32_t fwd = scope(ScopeKind::phase, "forward", 100, 200);
    uint32_t bwd = scope(ScopeKind::phase, "backward", 200, 300);
    uint32_t opt = scope(ScopeKind::phase, "optimizer", 300, 400);
    uint32_t lin = scope(ScopeKind::module, "layers.1.linear1", 110, 150, fwd);
    uint32_t mm = scope(ScopeKind::op, "aten::mm", 120, 130, lin);
    uint32_t attn = scope(ScopeKind::module, "layers.0.self_attn", 150, 190, fwd);
    event(10, Action::alloc, 0x1000, 1000);                 // parameter
    event(20, Action::alloc, 0x2000, 2000);                 // input, freed after the step
    event(125, Action::alloc, 0x3000, 30000, mm);           // activation (freed in backward)
    event(160, Action::alloc, 0x4000, 4000, attn);          // activation, never freed in the trace
    event(170, Action::alloc, 0x5000, 500, attn);           // temporary
    free(180, 0x5000, 500);
    event(210, Action::alloc, 0x6000, 6000, bwd);           // gradient
    event(220, Action::alloc, 0x7000, 700, bwd);            // temporary
    free(230, 0x7000, 700);
    free(240, 0x3000, 30000);
    event(310, Action::alloc, 0x8000, 8000, opt);           // optimizer state
    event(320, Action::alloc, 0x9000, 900, opt);            // temporary
    free(330, 0x9000, 900);
    uint32_t fwd2 = scope(ScopeKind::phase, "forward", 600, 700);  // the next step: the input dies before it ends
    event(650, Action::alloc, 0xB000, 50, fwd2);
    free(660, 0x2000, 2000);
    Segment before{.addr = 0xA000, .total_size = 4096};
    before.blocks.push_back(Block{.addr = 0xA000, .size = 512, .requested_size = 100,
                                  .state = BlockState::active_allocated});
    s.segments_end.push_back(before);
  }
};

Category category_of(const Replay& r, const std::vector<Category>& c, uint64_t addr) {
  for (size_t i = 0; i < r.allocations().size(); ++i)
    if (r.allocations()[i].addr == addr) return c[i];
  ADD_FAILURE() << "no allocation at " << addr;
  return Category::unknown;
}

TEST(Analysis, CategoriesFollowPhasesAndLifetimes) {
  TrainingStep t;
  Replay r(t.s, 0);
  auto c = categorize(t.s, r);
  EXPECT_EQ(category_of(r, c, 0x1000), Category::parameter);
  EXPECT_EQ(category_of(r, c, 0x2000), Category::input);
  EXPECT_EQ(category_of(r, c, 0x3000), Category::activation);
  EXPECT_EQ(category_of(r, c, 0x4000), Category::activation);
  EXPECT_EQ(category_of(r, c, 0x5000), Category::temporary);
  EXPECT_EQ(category_of(r, c, 0x6000), Category::gradient);
  EXPECT_EQ(category_of(r, c, 0x7000), Category::temporary);
  EXPECT_EQ(category_of(r, c, 0x8000), Category::optimizer_state);
  EXPECT_EQ(category_of(r, c, 0x9000), Category::temporary);
  EXPECT_EQ(category_of(r, c, 0xA000), Category::unknown);
}

uint64_t total(const std::vector<Group>& groups) {
  return std::accumulate(groups.begin(), groups.end(), uint64_t{0},
                         [](uint64_t sum, const Group& g) { return sum + g.bytes; });
}

TEST(Analysis, GroupingAtThePeakSumsToLiveBytes) {
  TrainingStep t;
  Replay r(t.s, 0);
  uint32_t peak = r.peak_allocated().step;
  // Peak: after the gradient is allocated, before the activation is freed.
  EXPECT_EQ(r.peak_allocated().bytes, 100u + 1000 + 2000 + 30000 + 4000 + 6000 + 700);
  for (GroupBy by : {GroupBy::stack, GroupBy::op, GroupBy::module, GroupBy::phase, GroupBy::category,
                     GroupBy::layer})
    EXPECT_EQ(total(group_live(t.s, r, peak, by)), r.peak_allocated().bytes) << to_string(by);

  auto by_category = group_live(t.s, r, peak, GroupBy::category);
  ASSERT_GE(by_category.size(), 4u);
  EXPECT_EQ(by_category[0].key, "activation");
  EXPECT_EQ(by_category[0].bytes, 34000u);
  EXPECT_EQ(by_category[0].count, 2u);

  auto by_layer = group_live(t.s, r, peak, GroupBy::layer);
  EXPECT_EQ(by_layer[0].key, "layers.1");
  EXPECT_EQ(by_layer[0].bytes, 30000u);
  EXPECT_EQ(by_layer[0].by_category[static_cast<size_t>(Category::activation)], 30000u);
  auto by_phase_split = group_live(t.s, r, peak, GroupBy::phase);
  for (const Group& g : by_phase_split)
    EXPECT_EQ(std::accumulate(g.by_category.begin(), g.by_category.end(), uint64_t{0}), g.bytes) << g.key;
  auto by_op = group_live(t.s, r, peak, GroupBy::op);
  EXPECT_EQ(by_op[0].key, "aten::mm");
  auto by_phase = group_live(t.s, r, peak, GroupBy::phase);
  EXPECT_EQ(by_phase[0].key, "forward");
  EXPECT_EQ(by_phase[0].bytes, 34000u);
}

TEST(Analysis, FragmentationSplitsReservedMinusAllocated) {
  Snapshot s;
  auto add = [&](Action a, uint64_t addr, uint64_t size, uint16_t stream = 0) {
    s.events.push_back(Event{.time_ns = int64_t(s.events.size()), .addr = addr, .size = size, .stream = stream,
                             .action = a});
  };
  uint16_t side = s.intern_stream(0xBEEF);
  add(Action::segment_alloc, 0x100000, 2 * MiB);
  add(Action::alloc, 0x100000, 1000);            // rounded to 1024
  add(Action::alloc, 0x100400, 512);
  add(Action::alloc, 0x100600, 4096);
  add(Action::free_requested, 0x100600, 4096);   // pending: waits for another stream
  add(Action::segment_alloc, 0x400000, MiB);     // nothing in it: cached
  add(Action::segment_alloc, 0x800000, MiB, side);
  add(Action::alloc, 0x800000, 2048, side);
  Replay r(s, 0);
  uint32_t last = static_cast<uint32_t>(r.steps() - 1);
  Fragmentation f = fragmentation_after(s, r, last);
  EXPECT_EQ(f.reserved, 4 * MiB);
  EXPECT_EQ(f.allocated, 1000u + 512 + 2048);
  EXPECT_EQ(f.segments, 3u);
  EXPECT_EQ(f.rounding, 24u);
  EXPECT_EQ(f.pending_free, 4096u);
  EXPECT_EQ(f.cached_free, MiB);
  EXPECT_EQ(f.other_stream, MiB - 2048);
  EXPECT_EQ(f.split_free, 2 * MiB - 1024 - 512 - 4096);
  EXPECT_EQ(f.largest_free, 2 * MiB - 1024 - 512 - 4096);
  EXPECT_EQ(f.rounding + f.pending_free + f.split_free + f.other_stream + f.cached_free, f.reserved - f.allocated);
}

TEST(Analysis, OomFromFragmentationIsExplained) {
  Snapshot s;
  auto add = [&](Action a, uint64_t addr, uint64_t size) {
    s.events.push_back(Event{.time_ns = int64_t(s.events.size()), .addr = addr, .size = size, .action = a});
  };
  // Two 2 MiB segments, each with a block in the middle: 3 MiB cached in total, no free range of 1.5 MiB.
  add(Action::segment_alloc, 0x0, 2 * MiB);
  add(Action::alloc, MiB / 2, MiB / 2);
  add(Action::segment_alloc, 0x10000000, 2 * MiB);
  add(Action::alloc, 0x10000000 + MiB / 2, MiB / 2);
  add(Action::oom, 123 * MiB /* device free */, 3 * MiB / 2);
  Replay r(s, 0);
  auto ooms = explain_ooms(s, r);
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].requested, 3 * MiB / 2);
  EXPECT_EQ(ooms[0].device_free, 123 * MiB);
  EXPECT_EQ(ooms[0].totals.reserved, 4 * MiB);
  EXPECT_EQ(ooms[0].totals.allocated, MiB);
  EXPECT_EQ(ooms[0].fragmentation.largest_free, MiB);
  EXPECT_TRUE(ooms[0].caused_by_fragmentation);
  EXPECT_EQ(total(ooms[0].top_sites), MiB);

  add(Action::alloc, 0x20000000, MiB);
  add(Action::oom, 0, 8 * MiB);  // more than everything cached: not fragmentation
  Replay r2(s, 0);
  EXPECT_FALSE(explain_ooms(s, r2).at(1).caused_by_fragmentation);
}

TEST(Analysis, NaturalOrderComparesNumbersAsNumbers) {
  EXPECT_TRUE(natural_less("layers.2", "layers.10"));
  EXPECT_FALSE(natural_less("layers.10", "layers.2"));
  EXPECT_TRUE(natural_less("layers.2", "layers.2.self_attn"));
  EXPECT_TRUE(natural_less("a", "b"));
  EXPECT_FALSE(natural_less("layers.02", "layers.2"));
  EXPECT_FALSE(natural_less("layers.2", "layers.02"));
}

TEST(Analysis, KernelStatsSumGpuTimePerName) {
  Snapshot s;
  auto kernel = [&](const char* name, int64_t start, int64_t end, uint8_t device = 0) {
    s.kernels.push_back(Kernel{.start_ns = start, .end_ns = end, .name = s.strings.intern(name), .device = device});
  };
  kernel("gemm", 0, 100);
  kernel("softmax", 100, 130);
  kernel("gemm", 200, 260);
  kernel("gemm", 0, 999, 1);  // another device
  auto stats = kernel_stats(s, 0);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].name, "gemm");
  EXPECT_EQ(stats[0].count, 2u);
  EXPECT_EQ(stats[0].total_ns, 160);
  EXPECT_EQ(stats[0].max_ns, 100);
  EXPECT_EQ(stats[1].name, "softmax");
}

}  // namespace
}  // namespace memrec
