// The timeline's level-of-detail answers checked against brute force over the replay of real PyTorch snapshots
// and a synthetic history long enough to use every pyramid level and checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "memrec/load.h"
#include "memrec/timeline.h"
#include "../../bench/synthetic.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

Envelope brute_envelope(const Replay& r, uint32_t first, uint32_t last) {
  Envelope e;
  uint32_t begin = first == kNoEvent ? 0 : first + 1, end = last == kNoEvent ? 0 : last + 1;
  for (uint32_t p = begin; p <= end; ++p) e.include(r.after(p == 0 ? kNoEvent : p - 1), p == 0 ? kNoEvent : p - 1);
  return e;
}

void expect_same(const Envelope& got, const Envelope& want) {
  EXPECT_EQ(got.allocated_max, want.allocated_max);
  EXPECT_EQ(got.reserved_min, want.reserved_min);
  EXPECT_EQ(got.reserved_max, want.reserved_max);
  EXPECT_EQ(got.peak_step, want.peak_step);
}

uint32_t brute_step_at(const Replay& r, int64_t t) {
  uint32_t step = kNoEvent;
  for (uint32_t k = 0; k < r.steps(); ++k)
    if (r.time_of(k) <= t) step = k;
  return step;
}

void check_against_replay(const Snapshot& s, int samples) {
  Replay r(s, devices_of(s).front());
  Timeline tl(r);
  uint32_t n = tl.steps();
  ASSERT_GT(n, 100u);
  for (uint32_t k = 1; k < n; ++k) ASSERT_LE(r.time_of(k - 1), r.time_of(k)) << "times must not go back";

  // The whole range gives the replay's own peak.
  Envelope all = tl.envelope_steps(kNoEvent, n - 1);
  EXPECT_EQ(all.allocated_max, r.peak_allocated().bytes);
  EXPECT_EQ(all.peak_step, r.peak_allocated().step);
  EXPECT_EQ(all.reserved_max, r.peak_reserved().bytes);

  std::mt19937 rng(7);
  std::vector<uint32_t> live;
  for (int i = 0; i < samples; ++i) {
    uint32_t a = rng() % n, b = rng() % n;
    if (a > b) std::swap(a, b);
    if (i % 3 == 0) b = std::min(n - 1, a + static_cast<uint32_t>(rng() % 40));  // short ranges: the scan path
    expect_same(tl.envelope_steps(a, b), brute_envelope(r, a, b));

    uint32_t step = i == 0 ? kNoEvent : rng() % n;
    tl.live_at(step, live);
    EXPECT_EQ(live, r.live_after(step)) << "step " << step;

    int64_t t = tl.begin_ns() + static_cast<int64_t>(rng() % (tl.end_ns() - tl.begin_ns() + 1));
    EXPECT_EQ(tl.step_at(t), brute_step_at(r, t));
  }
  EXPECT_EQ(tl.step_at(tl.begin_ns() - 1), kNoEvent);
  EXPECT_EQ(tl.step_at(tl.end_ns()), n - 1);
}

TEST(Timeline, MatchesReplayOnTorchPythonStacks) {
  check_against_replay(load_snapshot(test::data("torch_2layer_python.pickle")), 300);
}

TEST(Timeline, MatchesReplayOnTorchAllStacks) {
  check_against_replay(load_snapshot(test::data("torch_2layer_all.pickle")), 300);
}

TEST(Timeline, MatchesReplayOnSyntheticHistory) {
  check_against_replay(make_synthetic(60'000, 3), 60);
}

// A timeline built on `threads` threads answers as the one built on the caller's alone: every level-0 bucket, ranges
// that climb the pyramid, the live set at every position a checkpoint can be at, and the sampled times.
void expect_same_on_threads(const Snapshot& s, unsigned threads) {
  for (uint8_t device : devices_with_events(s)) {
    Replay r(s, device);
    Timeline one(r, 1), many(r, threads);
    uint32_t n = r.steps();
    ASSERT_EQ(many.end_ns(), one.end_ns());
    EXPECT_EQ(last_event_time(s, device), one.end_ns()) << "device " << +device;
    for (uint32_t pos = 0; pos <= n; pos += 32) {  // bucket k covers positions [32k, 32k + 32): steps from 32k - 1
      uint32_t first = pos == 0 ? kNoEvent : pos - 1, last = std::min(pos + 30, n - 1);
      expect_same(many.envelope_steps(first, last), one.envelope_steps(first, last));
    }
    std::mt19937 rng(5);
    for (int i = 0; i < 200; ++i) {
      uint32_t a = rng() % n, b = rng() % n;
      if (a > b) std::swap(a, b);
      expect_same(many.envelope_steps(a, b), one.envelope_steps(a, b));
    }
    std::vector<uint32_t> got, want;
    for (uint32_t pos = 0; pos <= n; pos += 256) {  // checkpoints sit every 2^k >= 256 positions
      uint32_t step = pos == 0 ? kNoEvent : pos - 1;
      many.live_at(step, got), one.live_at(step, want);
      ASSERT_EQ(got, want) << "device " << +device << " step " << step;
    }
    for (uint32_t step = 0; step < n; step += 7) EXPECT_EQ(many.step_at(r.time_of(step)), one.step_at(r.time_of(step)));
  }
}

TEST(Timeline, SameOnThreadsForRealRecordings) {
  for (const char* name : {"gpt2_compile_h100.memrec", "alloc_default.memrec", "alloc_expandable.memrec",
                           "transformer_2layer_cpu.memrec", "torch_2layer_all.pickle"}) {
    SCOPED_TRACE(name);
    Snapshot s = load_snapshot(test::data(name));
    for (unsigned threads : {2u, 3u, 16u}) expect_same_on_threads(s, threads);
  }
}

TEST(Timeline, SameOnThreadsForALongHistory) {
  Snapshot s = make_synthetic(300'000, 9);
  expect_same_on_threads(s, 7);
  expect_same_on_threads(s, 0);
}

TEST(Timeline, StackRowsAddUpToTheAllocatedBytes) {
  Snapshot s = load_snapshot(test::data("torch_2layer_python.pickle"));
  Replay r(s, 0);
  Timeline tl(r);
  uint32_t peak = r.peak_allocated().step;
  uint64_t bytes = r.after(peak).allocated;
  std::vector<uint32_t> rows(400), scratch;
  double per_row = static_cast<double>(bytes) / 300;  // the stack should fill 300 of 400 rows
  tl.stack_rows(peak, per_row, rows, scratch);
  auto filled = std::count_if(rows.begin(), rows.end(), [](uint32_t id) { return id != kNone; });
  EXPECT_EQ(filled, 300);
  // Rows follow allocation order bottom-up, and the block at an offset is the one its row shows.
  std::vector<uint32_t> live = r.live_after(peak);
  EXPECT_EQ(rows.front(), live.front());
  EXPECT_EQ(tl.allocation_at(peak, bytes - 1), live.back());
  for (int row : {0, 37, 150, 299})
    EXPECT_EQ(tl.allocation_at(peak, static_cast<uint64_t>((row + 0.5) * per_row)), rows[row]);
  EXPECT_EQ(tl.allocation_at(peak, bytes), kNone);
}

TEST(Timeline, LaneColumnsFindTheItemUnderEachColumn) {
  Snapshot s;
  uint32_t name = s.strings.intern("gemm");
  // Two kernels on stream 1: [100, 200) and [400, 1000); one on stream 0 on another device.
  s.kernels.push_back(Kernel{.start_ns = 400, .end_ns = 1000, .name = name, .stream = 1});
  s.kernels.push_back(Kernel{.start_ns = 100, .end_ns = 200, .name = name, .stream = 1});
  s.kernels.push_back(Kernel{.start_ns = 0, .end_ns = 5000, .name = name, .stream = 0, .device = 1});
  auto lanes = kernel_lanes(s, 0);
  ASSERT_EQ(lanes.size(), 1u);
  EXPECT_EQ(lanes[0].ids, (std::vector<uint32_t>{1, 0}));
  std::vector<uint32_t> cols(12);
  lanes[0].columns(0, 0, 100, cols);  // columns [0,100), [100,200), ...
  std::vector<uint32_t> want = {kNone, 1, kNone, kNone, 0, 0, 0, 0, 0, 0, kNone, kNone};
  EXPECT_EQ(cols, want);
}

TEST(Timeline, LaneColumnsMatchBruteForceAtEveryZoom) {
  std::mt19937 rng(11);
  Snapshot s;
  int64_t t = 0;
  for (uint32_t i = 0; i < 5000; ++i) {
    int64_t start = t += rng() % 300;
    t += 1 + rng() % 200;
    s.kernels.push_back(Kernel{.start_ns = start, .end_ns = t});
  }
  Lane lane = kernel_lanes(s, 0).at(0);
  ASSERT_GT(lane.ids.size(), 10 * Lane::kSample);  // searches cross many samples
  for (double dt : {0.7, 13.0, 450.0, 9000.0, 400000.0}) {
    int64_t origin = static_cast<int64_t>(rng() % 100000) - 5000, first = static_cast<int64_t>(rng() % 50) - 25;
    std::vector<uint32_t> got(300);
    lane.columns(origin, first, dt, got);
    // Columns computed on their own, as a view does for the ones that scrolled in, give the same answers.
    std::vector<uint32_t> tail(100);
    lane.columns(origin, first + 200, dt, tail);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), got.begin() + 200)) << "dt " << dt;
    auto edge = [&](int64_t column) { return origin + static_cast<int64_t>(std::floor(static_cast<double>(column) * dt)); };
    for (size_t i = 0; i < got.size(); ++i) {
      int64_t column = first + static_cast<int64_t>(i);
      int64_t c0 = edge(column), c1 = std::max(edge(column + 1), c0 + 1);
      uint32_t want = kNone;
      for (size_t k = 0; k < lane.ids.size(); ++k)
        if (s.kernels[k].start_ns < c1 && s.kernels[k].end_ns > c0) want = lane.ids[k];  // the last one reaching in
      ASSERT_EQ(got[i], want) << "dt " << dt << " column " << i;
    }
  }
}

TEST(Timeline, ScopeLanesSplitNestedScopesByDepth) {
  Snapshot s;
  auto add = [&](int64_t a, int64_t b, const char* n, uint32_t parent, ScopeKind k) {
    s.scopes.push_back(Scope{a, b, s.strings.intern(n), parent, k, 0});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  };
  uint32_t fwd = add(0, 100, "forward", 0, ScopeKind::phase);
  uint32_t lin = add(10, 50, "aten::linear", fwd, ScopeKind::op);
  add(20, 40, "aten::addmm", lin, ScopeKind::op);
  add(60, -1, "aten::relu", fwd, ScopeKind::op);  // still open: ends at the timeline's end
  auto lanes = scope_lanes(s, 0, 500);
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes[0].title, "phase");
  EXPECT_EQ(lanes[1].title, "op");
  EXPECT_EQ(lanes[1].ids, (std::vector<uint32_t>{2, 4}));
  EXPECT_EQ(lanes[1].end(1), 500);
  EXPECT_EQ(lanes[2].title, "op 2");
  EXPECT_EQ(lanes[2].ids, (std::vector<uint32_t>{3}));
}

}  // namespace
}  // namespace memrec
