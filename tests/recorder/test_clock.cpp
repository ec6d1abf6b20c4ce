// Time stamps: TSC ticks on the program's threads, turned into CLOCK_REALTIME ns by the drain. The line through the
// drain's pairs, and the times of a real recording against the clock read around each allocation.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "../../recorder/src/clock.h"
#include "memrec/recorder.h"
#include "memrec/workloads.h"

namespace memrec {
namespace {

using detail::TickLine;

TEST(TickLine, GoesThroughEachPairAndStraightBetween) {
  TickLine line;
  line.add_pair(1000, 5'000);
  line.add_pair(3000, 6'000);   // 0.5 ns a tick
  line.add_pair(4000, 8'000);   // 2 ns a tick
  EXPECT_EQ(line.to_ns(1000), 5'000);
  EXPECT_EQ(line.to_ns(3000), 6'000);
  EXPECT_EQ(line.to_ns(4000), 8'000);
  EXPECT_EQ(line.to_ns(2000), 5'500);
  EXPECT_EQ(line.to_ns(3500), 7'000);
  EXPECT_EQ(line.to_ns(500), 4'750);   // before the first pair: the first line
  EXPECT_EQ(line.to_ns(5000), 10'000);  // after the last: the last line
}

// In order across pairs; a wall clock set back (as CUPTI's times are) is followed from the pair after it on.
TEST(TickLine, InOrderAcrossPairsAndFollowsAClockSetBack) {
  TickLine line;
  line.add_pair(0, 1'000'000);
  line.add_pair(1'000, 1'000'400);
  line.add_pair(2'000, 900'000);    // the wall clock went back 100 µs
  line.add_pair(2'000, 9'000'000);  // no later than the last pair: ignored
  line.add_pair(3'000, 901'400);
  for (auto [from, to] : {std::pair{-100, 1'000}, {2'000, 4'000}}) {
    int64_t last = line.to_ns(from);
    for (int64_t t = from + 1; t < to; ++t) {
      int64_t ns = line.to_ns(t);
      ASSERT_GE(ns, last) << "tick " << t;
      last = ns;
    }
  }
  EXPECT_EQ(line.to_ns(2'000), 900'000);
  EXPECT_EQ(line.to_ns(2'500), 900'700);
}

TEST(TickLine, OneOrNoPairGivesNoRate) {
  TickLine line;
  EXPECT_EQ(line.to_ns(123), 0);
  line.add_pair(100, 7'000);
  EXPECT_EQ(line.to_ns(123), 7'000);
}

// Hours of drains: the first pair stays, so a stamp from long ago (an op open since the start) falls on the line
// from it to the oldest recent pair; recent stamps on their own lines.
TEST(TickLine, KeepsTheFirstPairAndTheRecentOnes) {
  TickLine line;
  for (int64_t i = 0; i <= 10'000; ++i) line.add_pair(i * 1'000, i * 2'000 + (i % 2) * 10);  // wobbles 10 ns
  EXPECT_EQ(line.to_ns(0), 0);
  EXPECT_EQ(line.to_ns(9'999'000), 19'998'000 + 10);
  EXPECT_EQ(line.to_ns(9'999'500), 19'999'000 + 5);
  EXPECT_NEAR(double(line.to_ns(5'000'000)), 10'000'000.0, 20.0);  // between the first pair and the recent ones
}

// Each allocation's time lies between the clock read just before and just after it, across many drains, and the
// scope it ran in holds every event. On the GPU the allocator's own stamp is used where it is a TSC read.
void check_times_around_allocations(bool cuda) {
  RecorderOptions o;
  o.cuda = cuda;
  o.stacks = false;
  o.ops = false;
  o.kernels = false;
  o.flush_ms = 5;  // many drains, so many pairs
  Recorder rec(o);
  rec.start();
  auto options = at::TensorOptions().device(cuda ? at::kCUDA : at::kCPU);
  std::map<uint64_t, std::pair<int64_t, int64_t>> around;  // bytes -> clock before and after
  {
    MEMREC_SCOPE("timed");
    for (int i = 0; i < 200; ++i) {
      int64_t before = detail::now_ns();
      at::Tensor t = at::empty({1024 + 128 * i}, options);  // 512 bytes apart: the CUDA allocator's rounding
      int64_t after = detail::now_ns();
      around[t.nbytes()] = {before, after};
      if (i % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(12));
    }
  }
  rec.stop();
  const Snapshot& s = rec.snapshot();
  EXPECT_EQ(s.metadata.at("recorder.stamps"), detail::tsc_trusted() ? "tsc" : "clock_gettime");
  constexpr int64_t kSlack = 1'000;  // each pair is read to within tens of ns; allow a pair read in a hiccup
  size_t checked = 0;
  for (const Event& e : s.events) {
    auto it = around.find(e.size);
    if (e.action != Action::alloc || it == around.end()) continue;
    ++checked;
    EXPECT_GE(e.time_ns, it->second.first - kSlack) << e.size << " bytes";
    EXPECT_LE(e.time_ns, it->second.second + kSlack) << e.size << " bytes";
  }
  EXPECT_EQ(checked, around.size());
  ASSERT_EQ(s.scopes.size(), 2u);  // the sentinel, then "timed"
  const Scope timed = s.scopes[1];
  for (const Event& e : s.events) {
    EXPECT_GE(e.time_ns, timed.start_ns);
    EXPECT_LE(e.time_ns, timed.end_ns);
  }
}

TEST(RecordedTimes, EachCpuAllocationBetweenTheClockReadsAroundIt) { check_times_around_allocations(false); }

TEST(RecordedTimes, EachCudaAllocationBetweenTheClockReadsAroundIt) {
  if (!workloads::cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_times_around_allocations(true);
}

}  // namespace
}  // namespace memrec
