// Replay on histories whose answers are known by construction.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "memrec/replay.h"

namespace memrec {
namespace {

struct History {
  Snapshot s;
  int64_t now = 1000;
  History& add(Action a, uint64_t addr, uint64_t size, uint8_t device = 0) {
    s.events.push_back(Event{.time_ns = now += 10, .addr = addr, .size = size, .action = a, .device = device});
    return *this;
  }
};

Segment segment(uint64_t addr, uint64_t total, std::vector<Block> blocks) {
  Segment seg{.addr = addr, .total_size = total};
  seg.blocks = std::move(blocks);
  return seg;
}

TEST(Replay, TotalsFollowAllocatorRules) {
  History h;
  h.add(Action::segment_alloc, 0x1000, 1024)
      .add(Action::alloc, 0x1000, 100)
      .add(Action::alloc, 0x2000, 200)
      .add(Action::free_requested, 0x1000, 100)  // allocated drops here...
      .add(Action::alloc, 0x3000, 50)
      .add(Action::free_completed, 0x1000, 100)  // ...active only here
      .add(Action::free_requested, 0x2000, 200)
      .add(Action::free_completed, 0x2000, 200)
      .add(Action::segment_free, 0x1000, 1024);
  Replay r(h.s, 0);
  ASSERT_EQ(r.steps(), 9u);
  EXPECT_EQ(r.after(2), (Totals{300, 300, 1024}));
  EXPECT_EQ(r.after(3), (Totals{200, 300, 1024}));
  EXPECT_EQ(r.after(4), (Totals{250, 350, 1024}));
  EXPECT_EQ(r.after(5), (Totals{250, 250, 1024}));
  EXPECT_EQ(r.after(8), (Totals{50, 50, 0}));
  EXPECT_EQ(r.peak_allocated().bytes, 300u);
  EXPECT_EQ(r.peak_allocated().step, 2u);
  EXPECT_EQ(r.peak_allocated().time_ns, h.s.events[2].time_ns);
  EXPECT_EQ(r.peak_reserved().bytes, 1024u);
  EXPECT_EQ(r.peak_reserved().step, 0u);
  EXPECT_EQ(r.unmatched_frees(), 0u);

  auto live = r.live_after(4);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(r.allocations()[live[0]].addr, 0x2000u);
  EXPECT_EQ(r.allocations()[live[1]].addr, 0x3000u);
}

TEST(Replay, RewindsTheEndStateToFindBlocksLiveBeforeRecording) {
  History h;
  // 0x9000 was allocated before recording and freed during it; 0x8000 lives throughout.
  h.add(Action::alloc, 0x1000, 64)
      .add(Action::free_requested, 0x9000, 512)
      .add(Action::free_completed, 0x9000, 512)
      .add(Action::segment_alloc, 0x50000, 4096);
  h.s.segments_end.push_back(segment(0x8000, 8192, {Block{.addr = 0x8000, .size = 1024, .requested_size = 1000,
                                                          .state = BlockState::active_allocated}}));
  h.s.segments_end.push_back(segment(0x50000, 4096, {Block{.addr = 0x1000, .size = 512, .requested_size = 64,
                                                           .state = BlockState::active_allocated}}));
  Replay r(h.s, 0);
  EXPECT_EQ(r.initial(), (Totals{1000 + 512, 1000 + 512, 8192}));
  EXPECT_EQ(r.after(0).allocated, 1000u + 512 + 64);
  EXPECT_EQ(r.after(3), (Totals{1064, 1064, 8192 + 4096}));
  EXPECT_EQ(r.peak_allocated().bytes, 1576u);
  EXPECT_EQ(r.unmatched_frees(), 0u);
  auto before = r.live_after(kNoEvent);
  EXPECT_EQ(before.size(), 2u);
}

TEST(Replay, PendingFreeAtStartIsActiveButNotAllocated) {
  History h;
  h.add(Action::free_completed, 0x7000, 256);
  h.s.segments_end.push_back(segment(0x7000, 2048, {}));
  Replay r(h.s, 0);
  EXPECT_EQ(r.initial(), (Totals{0, 256, 2048}));
  EXPECT_TRUE(r.live_after(kNoEvent).empty());
  EXPECT_EQ(r.after(0), (Totals{0, 0, 2048}));
}

TEST(Replay, SegmentsAtStartAreUsedWhenKnown) {
  History h;
  h.add(Action::free_requested, 0x100, 10).add(Action::free_completed, 0x100, 10);
  h.s.has_segments_start = true;
  h.s.segments_start.push_back(segment(0, 4096, {Block{.addr = 0x100, .size = 512, .requested_size = 10,
                                                        .state = BlockState::active_allocated}}));
  Replay r(h.s, 0);
  EXPECT_EQ(r.initial(), (Totals{10, 10, 4096}));
  EXPECT_EQ(r.after(1), (Totals{0, 0, 4096}));
}

TEST(Replay, DevicesAreReplayedSeparately) {
  History h;
  h.add(Action::alloc, 0x10, 100, 0).add(Action::alloc, 0x10, 7, 1).add(Action::alloc, 0x20, 5, 1);
  EXPECT_EQ(devices_of(h.s), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(Replay(h.s, 0).peak_allocated().bytes, 100u);
  Replay r1(h.s, 1);
  EXPECT_EQ(r1.peak_allocated().bytes, 12u);
  EXPECT_EQ(r1.steps(), 2u);
}

TEST(Replay, UnknownFreesAreCountedNotFatalWhenStartIsKnown) {
  History h;
  h.s.has_segments_start = true;
  h.add(Action::free_requested, 0x500, 10).add(Action::alloc, 0x600, 20);
  Replay r(h.s, 0);
  EXPECT_EQ(r.unmatched_frees(), 1u);
  EXPECT_EQ(r.peak_allocated().bytes, 20u);
}

// The replay stores totals only every few steps and replays the rest from the events: compare every step with a
// plain replay over a history full of the cases where a step's change differs from what its event says.
TEST(Replay, TotalsMatchAPlainReplayAtEveryStep) {
  History h;
  h.s.has_segments_start = true;
  h.s.segments_start.push_back(segment(0, 1 << 20, {Block{.addr = 0x100, .requested_size = 30, .state = BlockState::active_allocated},
                                                    Block{.addr = 0x200, .requested_size = 40, .state = BlockState::active_pending_free}}));
  std::mt19937 rng(3);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  for (int i = 0; i < 2000; ++i) {
    static constexpr Action kActions[] = {Action::alloc, Action::alloc, Action::free_requested, Action::free_completed,
                                          Action::segment_alloc, Action::segment_free, Action::oom};
    uint64_t addr = 0x100 * (1 + pick(12));  // few addresses: double allocs, frees of unknown or freed blocks
    h.add(kActions[pick(7)], addr, 1 + pick(1000), static_cast<uint8_t>(pick(5) == 0));  // sizes rarely match
  }
  for (uint8_t device : {0, 1}) {
    Totals t = device == 0 ? Totals{30, 70, 1 << 20} : Totals{};
    std::map<uint64_t, std::pair<uint64_t, bool>> live;  // addr -> size, free requested
    if (device == 0) live = {{0x100, {30, false}}, {0x200, {40, true}}};
    Replay r(h.s, device);
    ASSERT_EQ(r.initial(), t);
    uint32_t step = 0;
    uint64_t peak = t.allocated;
    for (const Event& e : h.s.events) {
      if (e.device != device) continue;
      auto it = live.find(e.addr);
      if (e.action == Action::alloc) {
        live[e.addr] = {e.size, false};
        t.allocated += e.size, t.active += e.size;
      } else if (e.action == Action::segment_alloc) {
        t.reserved += e.size;
      } else if (e.action == Action::segment_free) {
        t.reserved -= e.size;
      } else if (it != live.end() && (e.action == Action::free_requested || e.action == Action::free_completed)) {
        auto& [size, requested] = it->second;
        if (!requested) t.allocated -= size, requested = true;
        if (e.action == Action::free_completed) t.active -= size, live.erase(it);
      }
      peak = std::max(peak, t.allocated);
      ASSERT_EQ(r.after(step), t) << "step " << step;
      ++step;
    }
    EXPECT_EQ(r.steps(), step);
    EXPECT_EQ(r.peak_allocated().bytes, peak);
    std::vector<Totals> walked;
    r.for_each_after(5, 77, [&](uint32_t k, const Totals& at) {
      walked.push_back(at);
      EXPECT_EQ(at, r.after(k));
    });
    EXPECT_EQ(walked.size(), 72u);
  }
}

}  // namespace
}  // namespace memrec
