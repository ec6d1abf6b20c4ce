// Recording that survives its process being killed or interrupted, runs out of memory, is capped, or is hammered
// from several threads: on the CPU allocator, so CI runs all of it.
#include <gtest/gtest.h>

#include <c10/core/Allocator.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "../../recorder/src/clock.h"
#include "checks.h"
#include "common/process.h"
#include "memrec/format.h"
#include "memrec/recorder.h"

namespace memrec {
namespace {

using namespace std::chrono_literals;
using test::Child;
using test::TempDir;
using test::quote;
using test::run_command;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// `memrec run` of a small CPU transformer into `out`, as a shell command.
std::string cpu_run(const std::string& flags, const std::string& out) {
  return fmt::format("{} run transformer --layers 2 --device cpu {} -o {}", quote(MEMREC_BINARY), flags, quote(out));
}

// A CPU training run long enough to be stopped from outside.
Child long_run(const TempDir& dir, const std::string& out) {
  return Child({MEMREC_BINARY, "run", "transformer", "--layers", "2", "--device", "cpu", "--steps", "100000", "-o",
                out},
               dir / "log");
}

// Polls the growing recording (flushed every 0.5 s) until it holds scope "step N".
bool wait_for_step(const std::string& path, int n) {
  auto deadline = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
    try {
      if (test::has_scope(read_file(path), ScopeKind::step, fmt::format("step {}", n))) return true;
    } catch (const Error&) {  // not created yet
    }
  }
  return false;
}

TEST(CrashSafety, KilledRecordingIsReadableUpToTheLastFlush) {
  TempDir dir;
  const std::string out = dir / "killed.memrec";
  Child run = long_run(dir, out);
  ASSERT_TRUE(wait_for_step(out, 3)) << slurp(dir / "log");
  std::this_thread::sleep_for(1s);
  const int64_t killed_ns = detail::now_ns();
  run.signal(SIGKILL);
  ASSERT_EQ(run.wait(30s), 128 + SIGKILL);

  Snapshot s = read_file(out);
  EXPECT_FALSE(s.complete);
  ASSERT_FALSE(s.events.empty());
  int64_t last_ns = 0;
  for (const Event& e : s.events) last_ns = std::max(last_ns, e.time_ns);
  const double lost_s = (killed_ns - last_ns) / 1e9;
  std::cout << "events on disk: " << s.events.size() << ", last one " << lost_s << " s before the SIGKILL\n";
  EXPECT_LT(lost_s, 1.5) << "more than about a second of events lost";
  EXPECT_TRUE(test::has_scope(s, ScopeKind::step, "step 3"));

  auto info = run_command(quote(MEMREC_BINARY) + " info " + quote(out));
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("cut short"), std::string::npos) << info.output;
  auto stats = run_command(quote(MEMREC_BINARY) + " stats " + quote(out));
  EXPECT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_NE(stats.output.find("peak allocated"), std::string::npos) << stats.output;
}

class Interrupted : public ::testing::TestWithParam<int> {};

TEST_P(Interrupted, FinishesTheStepAndClosesTheFile) {
  const int sig = GetParam();
  TempDir dir;
  const std::string out = dir / "interrupted.memrec";
  Child run = long_run(dir, out);
  ASSERT_TRUE(wait_for_step(out, 2)) << slurp(dir / "log");
  run.signal(sig);
  ASSERT_EQ(run.wait(120s), 128 + sig) << slurp(dir / "log");

  const std::string log = slurp(dir / "log");
  EXPECT_NE(log.find("stopped by"), std::string::npos) << log;
  EXPECT_NE(log.find(out + " is complete"), std::string::npos) << log;
  EXPECT_NE(log.find("peak allocated"), std::string::npos) << log;
  Snapshot s = read_file(out);
  EXPECT_TRUE(s.complete);
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step) EXPECT_GE(sc.end_ns, sc.start_ns) << s.strings[sc.name] << " left open";
  EXPECT_TRUE(test::check_frees_match(s, 0).empty()) << "the model was not freed inside the recording";
}

INSTANTIATE_TEST_SUITE_P(Signals, Interrupted, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return info.param == SIGINT ? "sigint" : "sigterm"; });

TEST(CrashSafety, SecondInterruptQuitsAtOnce) {
  TempDir dir;
  const std::string out = dir / "twice.memrec";
  Child run = long_run(dir, out);
  ASSERT_TRUE(wait_for_step(out, 2)) << slurp(dir / "log");
  run.signal(SIGINT);
  std::this_thread::sleep_for(20ms);
  run.signal(SIGINT);
  ASSERT_EQ(run.wait(30s), 128 + SIGINT);
  EXPECT_NE(slurp(dir / "log").find("quitting now"), std::string::npos) << slurp(dir / "log");
  EXPECT_FALSE(read_file(out).events.empty());
}

// Address space of this process before any test runs (before CUDA reserves its own): it maps the same libraries
// as memrec, so it is the baseline for an address-space limit.
const uint64_t g_baseline_kb = [] {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * (sysconf(_SC_PAGESIZE) / 1024);
}();

// The allocator past an address-space limit: the failing allocation is an oom event, the file is complete,
// stats explains it and the command fails with one message. Few threads and malloc arenas keep the run's own
// address space close to the baseline on many-core machines.
TEST(OutOfMemory, CpuRunRecordsAndExplainsIt) {
  TempDir dir;
  const std::string out = dir / "oom.memrec";
  auto r = run_command(fmt::format("ulimit -v {}; OMP_NUM_THREADS=2 MALLOC_ARENA_MAX=2 {}", g_baseline_kb + 1'500'000,
                                   cpu_run("--batch 8000 --steps 1", out)));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("memrec: error: out of memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("`memrec stats " + out + "`"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << "a backtrace leaked:\n" << r.output;

  Snapshot s = read_file(out);
  EXPECT_TRUE(s.complete);
  auto oom = std::find_if(s.events.begin(), s.events.end(), [](const Event& e) { return e.action == Action::oom; });
  ASSERT_NE(oom, s.events.end());
  EXPECT_GE(oom->size, 8000u * 64 * 256 * 4) << "not the activation-sized request";
  EXPECT_NE(oom->stack, 0u);
  auto stats = run_command(quote(MEMREC_BINARY) + " stats " + quote(out));
  EXPECT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_NE(stats.output.find("OOM at"), std::string::npos) << stats.output;
  EXPECT_NE(stats.output.find("who held the memory"), std::string::npos) << stats.output;
}

// A full disk while recording (a 100 KiB file size limit): one message naming the cause, exit 1, and a file
// that reads as the incomplete prefix it is.
TEST(CrashSafety, FullDiskWhileRecordingIsOneErrorAndAPrefix) {
  TempDir dir;
  const std::string out = dir / "full.memrec";
  auto r = run_command("ulimit -f 100; trap '' XFSZ; " + cpu_run("--steps 8", out));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("memrec: error: " + out + ": write failed: File too large"), std::string::npos) << r.output;
  EXPECT_FALSE(read_file(out).complete);
}

TEST(BoundedMemory, MaxEventsKeepsAPrefixAndSaysSo) {
  TempDir dir;
  const std::string out = dir / "capped.memrec";
  auto r = run_command(cpu_run("--steps 2 --max-events 3000", out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("WARNING: the recording is incomplete"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("over --max-events"), std::string::npos) << r.output;

  Snapshot s = read_file(out);
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.events.size(), 3000u);
  EXPECT_GT(s.dropped_events, 0u);
  EXPECT_EQ(s.metadata.at("recorder.dropped.over_max_events"), std::to_string(s.dropped_events));
  const int64_t capped_ns = std::stoll(s.metadata.at("recorder.capped_at_ns"));
  for (const Scope& sc : s.scopes) EXPECT_LE(sc.start_ns, capped_ns) << "a scope opened after the cap was kept";
  auto info = run_command(quote(MEMREC_BINARY) + " info " + quote(out));
  EXPECT_NE(info.output.find(fmt::format("{} dropped events", s.dropped_events)), std::string::npos) << info.output;
}

TEST(BoundedMemory, BufferMbCountsWhatDidNotFit) {
  TempDir dir;
  const std::string out = dir / "small-buffer.memrec";
  auto r = run_command(cpu_run("--steps 2 --buffer-mb 0.02", out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("with the buffer full"), std::string::npos) << r.output;
  Snapshot s = read_file(out);
  EXPECT_GT(s.dropped_events, 0u);
  EXPECT_EQ(s.metadata.at("recorder.dropped.buffer_full"), std::to_string(s.dropped_events));
}

RecorderOptions bare_cpu_options() {
  RecorderOptions o;
  o.cuda = false;
  o.stacks = false;
  return o;
}

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Allocates and frees `n` blocks straight from libtorch's CPU allocator (through the recording wrapper), pausing
// now and then so the drain usually keeps up with the default buffer.
void allocate_blocks(int n, size_t bytes) {
  c10::Allocator* a = c10::GetAllocator(c10::DeviceType::CPU);
  for (int i = 0; i < n; ++i) {
    (void)a->allocate(bytes);
    if (i % 1000 == 999) std::this_thread::sleep_for(1ms);
  }
}

// Each event the wrapper produced was kept, dropped and counted, or (a free whose alloc was dropped) matched no
// block; returns the events kept by action.
std::map<Action, uint64_t> check_balance(const Snapshot& s, const RecorderStats& st, uint64_t blocks) {
  std::map<Action, uint64_t> kept;
  for (const Event& e : s.events) ++kept[e.action];
  auto dropped = [&](Action a) { return st.dropped_by_action[size_t(a)]; };
  EXPECT_EQ(st.cpu_allocs, blocks);
  EXPECT_EQ(kept[Action::alloc] + dropped(Action::alloc), blocks);
  EXPECT_EQ(kept[Action::free_requested] + kept[Action::free_completed] + dropped(Action::free_requested) +
                dropped(Action::free_completed) + st.cpu_unmatched_frees,
            2 * blocks);
  EXPECT_EQ(s.dropped_events, st.dropped);
  if (st.dropped == 0) EXPECT_TRUE(test::check_frees_match(s, 0).empty());
  return kept;
}

struct CappedRun {
  uint64_t grew = 0;  // resident bytes the recording added
  Snapshot snapshot;
  RecorderStats stats;
};

CappedRun record_blocks(uint64_t max_events, int blocks) {
  RecorderOptions o = bare_cpu_options();
  o.max_events = max_events;
  CappedRun run;
  const uint64_t before = resident_bytes();
  Recorder rec(o);
  rec.start();
  allocate_blocks(blocks, 64);
  rec.stop();
  run.grew = resident_bytes() - std::min(before, resident_bytes());
  run.snapshot = rec.snapshot();
  run.stats = rec.stats();
  return run;
}

TEST(BoundedMemory, MaxEventsBoundsTheRecordersMemory) {
  constexpr int kBlocks = 400'000;  // 1.2M events: about 12 MB when kept (this loop's events pack to ~10 bytes)
  CappedRun capped = record_blocks(10'000, kBlocks);
  CappedRun full = record_blocks(0, kBlocks);
  std::cout << "resident growth: capped at 10k events " << capped.grew / 1e6 << " MB, uncapped "
            << full.grew / 1e6 << " MB (" << full.snapshot.events.size() << " events)\n";
  check_balance(capped.snapshot, capped.stats, kBlocks);
  check_balance(full.snapshot, full.stats, kBlocks);
  EXPECT_LE(capped.snapshot.events.size(), 10'000u);
  EXPECT_GE(capped.stats.dropped_over_cap, 3u * kBlocks - 10'000 - capped.stats.dropped_buffer_full);
  // At 2M events/s the drain may fall behind and drop (counted above); enough must be kept to compare.
  ASSERT_GT(full.snapshot.events.size(), 600'000u) << "the drain fell far behind: the comparison means little";
  EXPECT_GT(full.grew, 5 * full.snapshot.events.size());
  EXPECT_LT(capped.grew, full.grew / 5);
}

// Four threads hammer the allocator at once, each with its own block size, while the drain runs: nothing is
// lost uncounted or duplicated. With a buffer that holds everything and a drain every 5 ms, nothing may drop;
// with the default buffer, 4 producers on 2 cores outrun the drain and the drops must balance exactly.
struct Hammer {
  size_t buffer_events;
  int flush_ms;
};
class Concurrency : public ::testing::TestWithParam<Hammer> {};

TEST_P(Concurrency, FourThreadsLoseAndDuplicateNothing) {
  constexpr int kThreads = 4, kBlocks = 50'000;
  RecorderOptions o = bare_cpu_options();
  o.buffer_events = GetParam().buffer_events;
  o.flush_ms = GetParam().flush_ms;
  Recorder rec(o);
  rec.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(allocate_blocks, kBlocks, 1000 + 8 * t);
  for (auto& t : threads) t.join();
  rec.stop();
  const Snapshot& s = rec.snapshot();
  RecorderStats st = rec.stats();
  std::cout << s.events.size() << " events kept, " << st.dropped << " dropped\n";
  check_balance(s, st, kThreads * kBlocks);
  if (o.buffer_events >= 3 * kThreads * kBlocks) ASSERT_EQ(st.dropped, 0u);
  std::map<std::pair<uint64_t, Action>, int> count;
  for (const Event& e : s.events) ++count[{e.size, e.action}];
  for (int t = 0; t < kThreads; ++t)
    for (Action a : {Action::alloc, Action::free_requested, Action::free_completed}) {
      if (st.dropped == 0)
        EXPECT_EQ((count[{1000 + 8 * t, a}]), kBlocks) << "thread " << t << " " << to_string(a);
      else
        EXPECT_LE((count[{1000 + 8 * t, a}]), kBlocks) << "thread " << t << " " << to_string(a);
    }
}

INSTANTIATE_TEST_SUITE_P(Buffers, Concurrency, ::testing::Values(Hammer{1 << 20, 5}, Hammer{1 << 16, 500}),
                         [](const auto& info) { return info.param.flush_ms == 5 ? "roomy" : "default"; });

}  // namespace
}  // namespace memrec
