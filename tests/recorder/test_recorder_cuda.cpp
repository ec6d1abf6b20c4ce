// The recorder against the CUDA caching allocator's own counters (run by scripts/gpu-check.sh on a GPU
// machine; skipped without CUDA).
#include <gtest/gtest.h>

#ifdef MEMREC_WITH_CUDA

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "memrec/format.h"
#include "memrec/pickle.h"
#include "memrec/recorder.h"
#include "memrec/replay.h"
#include "memrec/workloads.h"

namespace memrec {
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;
using Stats = alloc::DeviceStats;

constexpr int kAgg = 0;  // StatType::AGGREGATE

workloads::Config gpu_config(int layers) {
  workloads::Config c;
  c.layers = layers;
  c.steps = 3;
  return c;
}

// Running sum of `delta(e)` over device 0's events from `initial`; returns the peak.
template <class F>
int64_t replay_peak(const Snapshot& s, int64_t initial, F delta) {
  int64_t cur = initial, peak = initial;
  for (const Event& e : s.events) {
    if (e.device != 0) continue;
    cur += delta(e);
    peak = std::max(peak, cur);
  }
  return peak;
}

class CudaRecording : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!workloads::cuda_available()) return;
    auto w = workloads::Workload::create(gpu_config(2));
    rec_ = new Recorder(RecorderOptions{});
    rec_->start();
    alloc::resetPeakStats(0);
    before_ = alloc::getDeviceStats(0);
    for (int i = 0; i < 3; ++i) step_ms_.push_back(w->step(i));
    w.reset();
    try {  // an OOM must be recorded too
      (void)at::empty({int64_t(1) << 50}, at::TensorOptions().device(at::kCUDA));
    } catch (const c10::OutOfMemoryError&) {
    }
    after_ = alloc::getDeviceStats(0);
    rec_->stop();
  }
  static void TearDownTestSuite() { delete rec_; }
  void SetUp() override {
    if (!workloads::cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
  const Snapshot& s() { return rec_->snapshot(); }

  static inline Recorder* rec_ = nullptr;
  static inline Stats before_, after_;
  static inline std::vector<double> step_ms_;
};

TEST_F(CudaRecording, CountsMatchDeviceStats) {
  EXPECT_TRUE(rec_->cuda_active());
  EXPECT_EQ(s().dropped_events, 0u);
  std::map<Action, int64_t> n;
  for (const Event& e : s().events) n[e.action] += e.device == 0;
  EXPECT_EQ(n[Action::alloc], after_.allocation[kAgg].allocated - before_.allocation[kAgg].allocated);
  EXPECT_EQ(n[Action::free_requested], after_.allocation[kAgg].freed - before_.allocation[kAgg].freed);
  EXPECT_EQ(n[Action::segment_alloc] + n[Action::segment_map],
            after_.segment[kAgg].allocated - before_.segment[kAgg].allocated);
  EXPECT_EQ(n[Action::segment_free] + n[Action::segment_unmap], after_.segment[kAgg].freed - before_.segment[kAgg].freed);
  EXPECT_GE(n[Action::oom], 1);
  EXPECT_EQ(after_.num_ooms - before_.num_ooms, n[Action::oom]);
}

TEST_F(CudaRecording, PeaksMatchDeviceStats) {
  // Trace sizes are requested sizes: compare with requested_bytes; reserved follows segment events.
  int64_t requested = replay_peak(s(), before_.requested_bytes[kAgg].current, [](const Event& e) -> int64_t {
    if (e.action == Action::alloc) return int64_t(e.size);
    return e.action == Action::free_requested ? -int64_t(e.size) : 0;
  });
  EXPECT_EQ(requested, after_.requested_bytes[kAgg].peak);
  int64_t reserved = replay_peak(s(), before_.reserved_bytes[kAgg].current, [](const Event& e) -> int64_t {
    if (e.action == Action::segment_alloc || e.action == Action::segment_map) return int64_t(e.size);
    bool gone = e.action == Action::segment_free || e.action == Action::segment_unmap;
    return gone ? -int64_t(e.size) : 0;
  });
  EXPECT_EQ(reserved, after_.reserved_bytes[kAgg].peak);
  Replay r(s(), 0);
  EXPECT_EQ(int64_t(r.peak_reserved().bytes), after_.reserved_bytes[kAgg].peak);
  EXPECT_EQ(r.unmatched_frees(), 0u);
}

TEST_F(CudaRecording, LiveAtEndEqualsSnapshotBlocks) {
  auto live = test::check_frees_match(s(), 0);
  std::map<uint64_t, uint64_t> blocks;
  for (const Segment& seg : s().segments_end)
    for (const Block& b : seg.blocks)
      if (seg.device == 0 && b.state == BlockState::active_allocated) blocks[b.addr] = b.requested_size;
  EXPECT_EQ(live, blocks);
  EXPECT_TRUE(s().has_segments_start);
}

TEST_F(CudaRecording, KernelsInEveryStepAndInterleaved) {
  ASSERT_GT(s().kernels.size(), 0u);
  std::vector<Scope> steps;  // copies: rows come out of the packed table by value
  for (const Scope& sc : s().scopes)
    if (sc.kind == ScopeKind::step) steps.push_back(sc);
  ASSERT_EQ(steps.size(), 3u);
  for (const Kernel& k : s().kernels) EXPECT_GE(k.start_ns, steps[0].start_ns) << "kernel before the first step";
  for (size_t i = 0; i < steps.size(); ++i) {
    int64_t begin = steps[i].start_ns, end = i + 1 < steps.size() ? steps[i + 1].start_ns : INT64_MAX;
    int64_t first_alloc = INT64_MAX, last_alloc = INT64_MIN, first_kernel = INT64_MAX, last_kernel = INT64_MIN;
    size_t kernels = 0;
    for (const Kernel& k : s().kernels)
      if (k.start_ns >= begin && k.start_ns < end)
        ++kernels, first_kernel = std::min(first_kernel, k.start_ns), last_kernel = std::max(last_kernel, k.start_ns);
    for (const Event& e : s().events)
      if (e.action == Action::alloc && e.time_ns >= begin && e.time_ns < end)
        first_alloc = std::min(first_alloc, e.time_ns), last_alloc = std::max(last_alloc, e.time_ns);
    EXPECT_GT(kernels, 0u) << "step " << i;
    // Allocations and kernels of one step overlap in time: one clock, not two offset ones.
    EXPECT_LT(first_alloc, last_kernel) << "step " << i;
    EXPECT_LT(first_kernel, last_alloc) << "step " << i;
    EXPECT_LE(steps[i].start_ns, first_alloc);
  }
}

// Kernels on the first 2 steps, then every 4th (steps counted from 1): traced steps have kernels, the others none.
TEST(CudaKernelSteps, TracedStepsOnly) {
  if (!workloads::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto w = workloads::Workload::create(gpu_config(1));
  w->step(0);  // warm-up outside the recording
  RecorderOptions o;
  o.kernel_first_steps = 2, o.kernel_every = 4;
  Recorder rec(o);
  rec.start();
  constexpr int kSteps = 9;
  for (int i = 1; i <= kSteps; ++i) w->step(i);
  rec.stop();
  const Snapshot& s = rec.snapshot();
  std::vector<Scope> steps;
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step) steps.push_back(sc);
  ASSERT_EQ(steps.size(), size_t{kSteps});
  for (int n = 1; n <= kSteps; ++n) {
    int64_t begin = steps[n - 1].start_ns, end = n < kSteps ? steps[n].start_ns : INT64_MAX;
    size_t kernels = 0;
    for (const Kernel& k : s.kernels) kernels += k.start_ns >= begin && k.start_ns < end;
    bool traced = n <= 2 || n % 4 == 0;
    EXPECT_EQ(kernels > 0, traced) << "step " << n << ": " << kernels << " kernels";
  }
  EXPECT_EQ(s.metadata.at("recorder.kernel_steps"), "first 2, then every 4th");
  EXPECT_EQ(s.metadata.at("recorder.kernel_steps_traced"), "4 of 9");
}

// Tracing kernels takes no device memory from the program: CUPTI's buffers are in host memory. The device memory in
// use outside the caching allocator's segments stays what it was.
TEST(CudaKernelSteps, TracingAllocatesNothingOnTheDevice) {
  if (!workloads::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto w = workloads::Workload::create(gpu_config(1));
  w->step(0);
  auto used = [] {
    size_t free = 0, total = 0;
    EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
    return static_cast<int64_t>(total - free) - alloc::getDeviceStats(0).reserved_bytes[kAgg].current;
  };
  int64_t before = used();
  RecorderOptions o;
  o.kernel_every = 1;
  Recorder rec(o);
  rec.start();
  for (int i = 1; i <= 3; ++i) w->step(i);
  int64_t during = used();
  rec.stop();
  EXPECT_GT(rec.snapshot().kernels.size(), 0u);
  EXPECT_EQ(during, before) << "device memory used grew by " << (during - before) << " bytes while recording";
}

TEST_F(CudaRecording, StacksAndScopes) {
  test::check_frames(s());
  EXPECT_TRUE(test::has_scope(s(), ScopeKind::module, "layers.1.self_attn"));
  EXPECT_TRUE(test::has_scope(s(), ScopeKind::phase, "backward"));
  EXPECT_EQ(s().metadata.at("device.0.type"), "cuda");
  EXPECT_FALSE(s().metadata.at("allocator_settings").empty());
}

TEST_F(CudaRecording, PickleRoundTrip) {
  Snapshot back = import_pickle(export_pickle(s()));
  size_t allocs = 0, back_allocs = 0;
  for (const Event& e : s().events) allocs += e.action == Action::alloc;
  for (const Event& e : back.events) back_allocs += e.action == Action::alloc;
  EXPECT_EQ(allocs, back_allocs);
  EXPECT_EQ(back.segments_end.size(), s().segments_end.size());
}

// Expandable segments need the setting before CUDA starts: a separate `memrec run` process.
TEST(CudaRun, ExpandableSegments) {
  if (!workloads::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto dir = std::filesystem::temp_directory_path() / fmt::format("memrec_cuda_{}", ::getpid());
  std::filesystem::create_directories(dir);
  auto out = dir / "exp.memrec";
  std::string cmd = fmt::format("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True '{}' run transformer --layers 2 "
                                "--steps 2 -o '{}' > '{}' 2>&1", MEMREC_BINARY, out.string(), (dir / "log").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Snapshot s = read_file(out.string());
  size_t maps = 0, segment_allocs = 0;
  for (const Event& e : s.events) maps += e.action == Action::segment_map, segment_allocs += e.action == Action::segment_alloc;
  EXPECT_GT(maps, 0u);
  EXPECT_EQ(segment_allocs, 0u);
  EXPECT_EQ(s.dropped_events, 0u);
  test::check_frees_match(s, 0);
  bool expandable = false;
  for (const Segment& seg : s.segments_end) expandable |= seg.is_expandable;
  EXPECT_TRUE(expandable);
}

// Four threads allocate on two streams at once while the drain runs every 5 ms: the recorded counts equal the
// allocator's own statistics, per action and per stream.
TEST(CudaConcurrency, FourThreadsOnTwoStreamsMatchDeviceStats) {
  if (!workloads::cuda_available()) GTEST_SKIP() << "no CUDA device";
  constexpr int kThreads = 4, kBlocks = 20'000;
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  (void)at::empty({1}, cuda);  // the allocator exists before the recorder hooks it
  c10::cuda::CUDAStream streams[2] = {c10::cuda::getStreamFromPool(), c10::cuda::getStreamFromPool()};
  RecorderOptions o;
  o.kernels = false;
  o.buffer_events = 1 << 20;
  o.flush_ms = 5;
  Recorder rec(o);
  rec.start();
  const Stats before = alloc::getDeviceStats(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      c10::cuda::CUDAStreamGuard guard(streams[t % 2]);
      for (int i = 0; i < kBlocks; ++i) (void)at::empty({1024 * (1 + i % 64)}, cuda);
    });
  for (auto& t : threads) t.join();
  c10::cuda::device_synchronize();
  const Stats after = alloc::getDeviceStats(0);
  rec.stop();

  const Snapshot& s = rec.snapshot();
  ASSERT_EQ(s.dropped_events, 0u);
  std::map<Action, int64_t> n;
  std::map<uint64_t, int64_t> allocs_by_stream;
  for (const Event& e : s.events) {
    ++n[e.action];
    if (e.action == Action::alloc) ++allocs_by_stream[s.streams.at(e.stream)];
  }
  EXPECT_EQ(n[Action::alloc], kThreads * kBlocks);
  EXPECT_EQ(n[Action::alloc], after.allocation[kAgg].allocated - before.allocation[kAgg].allocated);
  EXPECT_EQ(n[Action::free_requested], after.allocation[kAgg].freed - before.allocation[kAgg].freed);
  EXPECT_EQ(n[Action::free_completed], n[Action::free_requested]);
  EXPECT_EQ(n[Action::segment_alloc], after.segment[kAgg].allocated - before.segment[kAgg].allocated);
  EXPECT_EQ(n[Action::segment_free], after.segment[kAgg].freed - before.segment[kAgg].freed);
  for (const auto& stream : streams)
    EXPECT_EQ(allocs_by_stream[reinterpret_cast<uint64_t>(stream.stream())], kThreads / 2 * kBlocks);
  std::map<uint64_t, uint64_t> live_at_start;  // e.g. cuBLAS workspaces of earlier tests
  for (const Segment& seg : s.segments_start)
    for (const Block& b : seg.blocks)
      if (seg.device == 0 && b.state == BlockState::active_allocated) live_at_start[b.addr] = b.requested_size;
  EXPECT_EQ(test::check_frees_match(s, 0), live_at_start);
}

}  // namespace
}  // namespace memrec

#else

TEST(CudaRecording, NotBuilt) { GTEST_SKIP() << "built without MEMREC_WITH_CUDA"; }

#endif
