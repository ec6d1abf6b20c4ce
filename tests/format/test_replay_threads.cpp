// The replay cut into ranges on several threads gives what the one-thread pass gives, output by output: on the
// recordings in tests/data and on random histories that put every kind of cross-range case on few addresses.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "common/fixtures.h"
#include "memrec/format.h"
#include "memrec/pickle.h"
#include "memrec/replay.h"
#include "memrec/threads.h"

namespace memrec {
namespace {

void expect_same_peak(const Peak& a, const Peak& b) {
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.time_ns, b.time_ns);
}

// Every output of the pass: the totals after each step (the stored totals and the corrections they replay from),
// the peaks, each block's steps and its pre-existing fields, the segment steps, the counts, the owners.
void expect_same(const Replay& serial, const Replay& threaded) {
  ASSERT_EQ(serial.steps(), threaded.steps());
  EXPECT_EQ(serial.initial(), threaded.initial());
  std::vector<Totals> want;
  serial.for_each_after(0, serial.steps(), [&](uint32_t, const Totals& t) { want.push_back(t); });
  size_t differ = 0;
  threaded.for_each_after(0, threaded.steps(), [&](uint32_t step, const Totals& t) { differ += !(t == want[step]); });
  EXPECT_EQ(differ, 0u) << "steps whose totals differ";
  for (uint32_t step = 0; step < serial.steps(); step += 97) EXPECT_EQ(serial.after(step), threaded.after(step));
  expect_same_peak(serial.peak_allocated(), threaded.peak_allocated());
  expect_same_peak(serial.peak_reserved(), threaded.peak_reserved());
  EXPECT_EQ(serial.alloc_steps(), threaded.alloc_steps());
  EXPECT_EQ(serial.free_steps(), threaded.free_steps());
  EXPECT_EQ(serial.completed_steps(), threaded.completed_steps());
  EXPECT_EQ(serial.segment_steps(), threaded.segment_steps());
  EXPECT_EQ(serial.unmatched_frees(), threaded.unmatched_frees());
  EXPECT_EQ(serial.unresolved_owners(), threaded.unresolved_owners());
  EXPECT_EQ(serial.has_owners(), threaded.has_owners());
  for (uint32_t id = 0; id < serial.allocations().size(); ++id) {
    Allocation a = serial.allocation(id), b = threaded.allocation(id);
    EXPECT_TRUE(a.addr == b.addr && a.size == b.size && a.stack == b.stack && a.stream == b.stream) << "id " << id;
    EXPECT_EQ(serial.owner_of(id), threaded.owner_of(id)) << "id " << id;
    EXPECT_EQ(serial.owner_names(id), threaded.owner_names(id)) << "id " << id;
  }
}

void expect_same_on_threads(const Snapshot& s, unsigned most_threads) {
  for (uint8_t device : devices_of(s)) {
    Replay serial(s, device, 1);
    for (unsigned threads = 2; threads <= most_threads; ++threads) {
      SCOPED_TRACE("device " + std::to_string(device) + ", " + std::to_string(threads) + " threads");
      expect_same(serial, Replay(s, device, threads));
    }
  }
}

TEST(ReplayThreads, RecordingsReplayTheSameOnAnyNumberOfThreads) {
  size_t recordings = 0;
  for (const auto& entry : std::filesystem::directory_iterator(MEMREC_TEST_DATA)) {
    std::string path = entry.path().string();
    SCOPED_TRACE(path);
    if (entry.path().extension() == ".memrec") expect_same_on_threads(read_file(path), 9);
    else if (entry.path().extension() == ".pickle") expect_same_on_threads(import_pickle_file(path), 9);
    else continue;
    ++recordings;
  }
  EXPECT_GE(recordings, 10u);
}

// Random events on few addresses and sizes, so that ranges of a few dozen steps free blocks from earlier ranges and
// from before the recording, allocate over live blocks, split free_requested from free_completed, free with other
// sizes than allocated, and grow and shrink segments; owner rows name live, freed and unknown addresses.
Snapshot random_history(uint32_t seed, bool start_known) {
  std::mt19937 rng(seed);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  Snapshot s;
  static constexpr Action kActions[] = {Action::alloc,         Action::alloc,         Action::free_requested,
                                        Action::free_completed, Action::free_completed, Action::segment_alloc,
                                        Action::segment_free,  Action::segment_unmap, Action::oom};
  for (int64_t i = 0; i < 3000; ++i) {
    uint64_t addr = 0x100 * (1 + pick(16));
    s.events.push_back(Event{.time_ns = 1000 + 10 * i, .addr = addr, .size = 1 + pick(4) * 100, .stack = pick(5),
                             .stream = static_cast<uint16_t>(pick(2)), .action = kActions[pick(9)],
                             .device = static_cast<uint8_t>(pick(4) == 0)});
  }
  for (uint64_t event = 0; event < s.events.size(); event += 1 + pick(40)) {
    uint64_t at = pick(8) == 0 ? pick(static_cast<uint32_t>(event) + 1) : event;  // rows out of order, too
    s.owners.push_back(Owner{.event = at, .addr = 0x100 * (1 + pick(20)), .size = 64, .name = pick(3),
                             .device = static_cast<uint8_t>(pick(4) == 0)});
  }
  s.has_segments_start = start_known;
  Segment seg{.addr = 0x100, .total_size = 1 << 20};
  seg.blocks = {Block{.addr = 0x100, .requested_size = 30, .state = BlockState::active_allocated},
                Block{.addr = 0x200, .requested_size = 40, .state = BlockState::active_pending_free},
                Block{.addr = 0x300, .requested_size = 50, .state = BlockState::inactive},
                Block{.addr = 0x5000, .requested_size = 60, .state = BlockState::active_allocated}};
  (start_known ? s.segments_start : s.segments_end).push_back(seg);
  return s;
}

TEST(ReplayThreads, RandomHistoriesReplayTheSameOnAnyNumberOfThreads) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    for (bool start_known : {false, true}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (start_known ? ", start known" : ", start unknown"));
      Snapshot s = random_history(seed, start_known);
      Replay serial(s, 0, 1);
      ASSERT_GT(serial.unmatched_frees() + serial.allocations().size(), 0u);
      expect_same_on_threads(s, 17);
    }
  }
}

// The cases the random histories must hold for the comparison to mean anything.
TEST(ReplayThreads, RandomHistoriesHoldTheCrossRangeCases) {
  Snapshot unknown = random_history(1, false), known = random_history(1, true);
  Replay r(unknown, 0, 1), k(known, 0, 1);
  auto range_of = [&](uint32_t step) {  // of 8
    unsigned part = 0;
    while (part < 7 && slice(r.steps(), part + 1, 8).first <= step) ++part;
    return part;
  };
  uint32_t before = 0, split = 0, born_before = 0;
  for (const Allocation& a : r.allocations()) {
    before += a.alloc_step == kNoEvent && a.free_step != kNoEvent;
    bool freed = a.free_step < kBeforeStart && a.completed_step != kNoEvent;
    split += freed && range_of(a.free_step) != range_of(a.completed_step);
    bool born = a.alloc_step != kNoEvent;
    born_before += born && a.free_step != kNoEvent && range_of(a.alloc_step) < range_of(a.free_step);
  }
  EXPECT_GT(before, 10u);       // blocks older than the recording freed all along
  EXPECT_GT(split, 5u);         // free_requested and free_completed in different ranges of 8
  EXPECT_GT(born_before, 10u);  // blocks freed in a later range than their alloc's
  EXPECT_GT(k.unmatched_frees(), 10u);
  EXPECT_GT(r.segment_steps().size(), 100u);
  EXPECT_TRUE(r.has_owners() && k.has_owners());
  EXPECT_GT(k.unresolved_owners(), 0u);
  uint32_t corrected = 0;
  Totals was = r.initial();
  r.for_each_after(0, r.steps(), [&](uint32_t step, const Totals& t) {
    Event e = r.event(step);
    corrected += (e.action == Action::free_requested || e.action == Action::free_completed) &&
                 was.allocated - t.allocated != e.size && was.active - t.active != e.size;
    was = t;
  });
  EXPECT_GT(corrected, 100u);  // frees whose change is not what their event says
}

}  // namespace
}  // namespace memrec
