// Several threads allocate and free libtorch CPU tensors at once under one recording, each inside scopes of its
// own. The recording keeps each thread's order, pairs every alloc with its free and puts every event in the scopes
// its thread had open; with a buffer too small on purpose, what was kept plus what was dropped is exactly what the
// threads did, by action.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <array>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "checks.h"
#include "memrec/recorder.h"

namespace memrec {
namespace {

using namespace std::chrono_literals;

constexpr int kThreads = 4, kBatches = 40, kPerBatch = 250, kSizes = 8;
constexpr uint64_t kBlocks = uint64_t{kThreads} * kBatches * kPerBatch;

// Thread t's i-th block of a batch: its size tells the thread (size % 1024) and i % kSizes (size / 1024 - 1).
int64_t block_size(int t, int i) { return 1024 * (1 + i % kSizes) + t; }
int thread_of(uint64_t size) { return static_cast<int>(size % 1024); }

std::string batch_name(int t, int b) { return fmt::format("t{}.b{}", t, b); }

// Inside scope "thread t", batch after batch in scopes "t<t>.b<b>": two blocks alive at a time, each freed by the
// next-but-one allocation or at the end of its batch.
void allocate_in_scopes(int t) {
  ScopeGuard thread_scope(fmt::format("thread {}", t));
  for (int b = 0; b < kBatches; ++b) {
    ScopeGuard batch(batch_name(t, b));
    std::array<at::Tensor, 2> held;
    for (int i = 0; i < kPerBatch; ++i) held[i % 2] = at::empty({block_size(t, i)}, at::kByte);
  }
}

struct ThreadsRun {
  Snapshot snapshot;
  RecorderStats stats;
};

// The CPU allocator's events alone, drained every `flush_ms`.
RecorderOptions cpu_events(int flush_ms) {
  RecorderOptions o;
  o.cuda = false;
  o.stacks = false;
  o.quiet = true;
  o.flush_ms = flush_ms;
  return o;
}

ThreadsRun record_threads(size_t buffer_events, int flush_ms, bool ops) {
  RecorderOptions o = cpu_events(flush_ms);
  o.ops = ops;
  o.buffer_events = buffer_events;
  Recorder rec(o);
  rec.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(allocate_in_scopes, t);
  for (auto& t : threads) t.join();
  rec.stop();
  return {rec.snapshot(), rec.stats()};
}

// The scope named `name` that encloses scope `id` (or is it), or 0.
uint32_t enclosing(const Snapshot& s, uint32_t id, const std::string& name) {
  while (id != 0 && s.strings[s.scopes[id].name] != name) id = s.scopes[id].parent;
  return id;
}

TEST(RecorderThreads, EachThreadsOrderAndScopesAreKept) {
  ThreadsRun run = record_threads(size_t{1} << 20, 5, /*ops=*/true);
  const Snapshot& s = run.snapshot;
  ASSERT_EQ(run.stats.dropped, 0u);
  ASSERT_EQ(run.stats.scopes_dropped, 0u);
  EXPECT_EQ(run.stats.cpu_allocs, kBlocks);
  EXPECT_TRUE(test::check_frees_match(s, 0).empty()) << "blocks left without their free";

  std::map<uint64_t, int> batch_of;  // live address -> the batch its thread allocated it in
  std::array<int, kThreads> allocs{};
  std::array<int64_t, kThreads> last_ns{};
  std::map<std::pair<int, Action>, uint64_t> count;
  for (const Event& e : s.events) {
    const int t = thread_of(e.size);
    ASSERT_LT(t, kThreads) << "an event of a size no thread allocates: " << e.size;
    ++count[{t, e.action}];
    EXPECT_GE(e.time_ns, last_ns[t]) << "thread " << t << "'s events out of its order";
    last_ns[t] = e.time_ns;
    if (e.action == Action::alloc) {
      const int i = allocs[t]++;
      ASSERT_EQ(int64_t(e.size), block_size(t, i % kPerBatch)) << "thread " << t << "'s alloc " << i << " out of order";
      batch_of[e.addr] = i / kPerBatch;
    }
    const int b = batch_of.at(e.addr);
    const uint32_t batch = enclosing(s, e.scope, batch_name(t, b));
    ASSERT_NE(batch, 0u) << to_string(e.action) << " of thread " << t << " outside its batch " << b;
    EXPECT_TRUE(s.scopes[batch].start_ns <= e.time_ns && e.time_ns <= s.scopes[batch].end_ns) << batch_name(t, b);
    if (e.action == Action::free_completed) batch_of.erase(e.addr);
  }
  for (int t = 0; t < kThreads; ++t)
    for (Action a : {Action::alloc, Action::free_requested, Action::free_completed})
      EXPECT_EQ((count[{t, a}]), uint64_t{kBatches} * kPerBatch) << "thread " << t << " " << to_string(a);

  // One scope per thread and batch, each closed, each batch inside its thread's scope.
  std::map<std::string, int> named;
  for (uint32_t id = 1; id < s.scopes.size(); ++id) {
    const Scope& sc = s.scopes[id];
    EXPECT_GE(sc.end_ns, sc.start_ns) << "scope " << id << " left open";
    if (sc.kind == ScopeKind::annotation) ++named[s.strings[sc.name]];
  }
  EXPECT_EQ(named.size(), size_t{kThreads} * (kBatches + 1));
  for (int t = 0; t < kThreads; ++t)
    for (int b = 0; b < kBatches; ++b) EXPECT_EQ(named[batch_name(t, b)], 1) << batch_name(t, b);
}

TEST(RecorderThreads, WhatDidNotFitIsCountedExactly) {
  ThreadsRun run = record_threads(512, 500, /*ops=*/false);  // 512 records for 120k events and 164 scopes a drain
  const Snapshot& s = run.snapshot;
  const RecorderStats& st = run.stats;
  ASSERT_GT(st.dropped, 0u) << "the buffer was meant to overflow";
  EXPECT_EQ(st.dropped, st.dropped_buffer_full);
  EXPECT_EQ(s.dropped_events, st.dropped);
  EXPECT_EQ(st.cpu_allocs, kBlocks);

  std::map<Action, uint64_t> kept;
  std::array<int64_t, kThreads> last_ns{};
  for (const Event& e : s.events) {
    ++kept[e.action];
    const int t = thread_of(e.size);
    ASSERT_LT(t, kThreads);
    EXPECT_GE(e.time_ns, last_ns[t]) << "thread " << t << "'s events out of its order";
    last_ns[t] = e.time_ns;
  }
  auto dropped = [&](Action a) { return st.dropped_by_action[size_t(a)]; };
  EXPECT_EQ(kept[Action::alloc] + dropped(Action::alloc), kBlocks);
  // A free whose alloc was dropped matches no block: counted as unmatched, not as an event.
  EXPECT_EQ(kept[Action::free_requested] + kept[Action::free_completed] + dropped(Action::free_requested) +
                dropped(Action::free_completed) + st.cpu_unmatched_frees,
            2 * kBlocks);
  EXPECT_EQ(st.dropped, dropped(Action::alloc) + dropped(Action::free_requested) + dropped(Action::free_completed));

  // Every scope opened was kept or dropped; a kept one whose close was dropped stays open.
  uint64_t left_open = 0;
  for (uint32_t id = 1; id < s.scopes.size(); ++id) left_open += s.scopes[id].end_ns < 0;
  EXPECT_EQ(s.scopes.size() - 1 + st.scopes_dropped - left_open, uint64_t{kThreads} * (kBatches + 1));
}

// A thread that allocates once and then waits: its record is taken by the next drains, not held until it
// allocates again.
TEST(RecorderThreads, AnIdleThreadsRecordsAreDrained) {
  Recorder rec(cpu_events(20));
  rec.start();
  std::promise<void> allocated, done;
  std::thread idle([&] {
    at::Tensor kept = at::empty({4096}, at::kByte);
    allocated.set_value();
    done.get_future().wait();
  });
  allocated.get_future().wait();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (rec.stats().events == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(rec.stats().events, 1u) << "the idle thread's alloc was not drained";
  done.set_value();
  idle.join();
  rec.stop();
  EXPECT_EQ(rec.stats().events, 3u);
}

}  // namespace
}  // namespace memrec
