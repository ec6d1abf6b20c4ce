// Recorder overhead and output cost (docs/benchmarks.md, Recorder). Modes, measured in one process:
//   0 none              no recording
//   1 pytorch           the allocator's own recordHistory with torch::CapturedTraceback C++ context (CUDA only;
//                       what Python's _record_memory_history(stacks="all") records)
//   2 memrec            memrec::Recorder: stacks (automatic capture) + aten op scopes, no kernels
//   3 memrec+kernels    the same plus CUPTI kernels on the default steps (the first 3, then every 10th)
//   4 memrec-noops      stacks without op scopes (at::RecordFunction callbacks off)
//   5 memrec-events     no stacks, no op scopes: the cost of the event path alone
//   6 capture=unwind    stacks via _Unwind_Backtrace, no op scopes
//   7 capture=boost     stacks via Boost.Stacktrace, no op scopes
//   8 memrec+kernels/all  memrec+kernels with kernels on every step
//   9 capture=libunwind   stacks via libunwind's unw_backtrace, no op scopes
//  10 capture=torch     stacks via torch::unwind (libtorch >= 2.1), no op scopes
//  11 memrec-events/no-device-memory  memrec-events without CUPTI's memory activity and callbacks and NVML
// Run with --benchmark_enable_random_interleaving=true --benchmark_repetitions=N so modes alternate.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "memrec/format.h"
#include "memrec/recorder.h"
#include "memrec/workloads.h"
#include "thread_counters.h"

#ifdef MEMREC_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/profiler/combined_traceback.h>
#endif

namespace {

using memrec::workloads::Config;
using memrec::workloads::Workload;

const char* kModeNames[] = {"none",         "pytorch",      "memrec",         "memrec+kernels",
                            "memrec-noops", "memrec-events", "capture=unwind", "capture=boost",
                            "memrec+kernels/all", "capture=libunwind", "capture=torch",
                            "memrec-events/no-device-memory"};
const std::string kOut = (std::filesystem::temp_directory_path() / "memrec_bench.memrec").string();

bool on_cuda() { return memrec::workloads::cuda_available(); }

#ifdef MEMREC_WITH_CUDA
namespace alloc = c10::cuda::CUDACachingAllocator;
std::shared_ptr<c10::GatheredContext> gather_cpp() { return torch::CapturedTraceback::gather(false, false, true); }
void pytorch_history(bool on) {
  if (on) alloc::recordHistory(true, &gather_cpp, 100000, alloc::RecordContext::ALL, false, {});
  else alloc::recordHistory(false, nullptr, 0, alloc::RecordContext::NEVER, true, {});
}
#else
void pytorch_history(bool) {}
#endif

// Starts the mode's recording; returns false (and skips) when the mode cannot run here.
class Mode {
 public:
  Mode(benchmark::State& state, size_t buffer_events = 1 << 16) : mode_(static_cast<int>(state.range(0))) {
    state.SetLabel(kModeNames[mode_]);
    // Which run of the process this is: random interleaving shuffles all repetitions of all modes together, so a
    // repetition's neighbours in time are found by this (bench/paired_cost.py).
    static int runs = 0;
    state.counters["order"] = ++runs;
    if (mode_ == 1) {
      if (!on_cuda()) {
        state.SkipWithError("PyTorch's recordHistory needs CUDA");
        ok_ = false;
        return;
      }
      pytorch_history(true);
    } else if (mode_ >= 2) {
      memrec::RecorderOptions o;
      o.output = kOut;
      o.kernels = mode_ == 3 || mode_ == 8;
      if (mode_ == 8) o.kernel_every = 1;
      o.ops = mode_ <= 3 || mode_ == 8;
      o.stacks = mode_ != 5 && mode_ != 11;
      o.device_memory = mode_ != 11;
      if (mode_ == 6) o.capture = memrec::StackCapture::unwind_backtrace;
      if (mode_ == 7) o.capture = memrec::StackCapture::boost;
      if (mode_ == 9) o.capture = memrec::StackCapture::libunwind;
      if (mode_ == 10) o.capture = memrec::StackCapture::torch_unwind;
      if (!memrec::stack_capture_available(o.capture)) {
        state.SkipWithError("this capture is not available here");
        ok_ = false;
        return;
      }
      o.buffer_events = buffer_events;
      rec_ = std::make_unique<memrec::Recorder>(o);
      rec_->start();
    }
  }
  ~Mode() { stop(); }
  bool ok() const { return ok_; }
  memrec::Recorder* recorder() { return rec_.get(); }
  void stop() {
    if (mode_ == 1 && ok_) pytorch_history(false);
    if (rec_ && rec_->running()) rec_->stop();
  }
  void report(benchmark::State& state) {
    if (!rec_) return;
    stop();
    auto st = rec_->stats();
    state.counters["events"] = static_cast<double>(st.events);
    state.counters["dropped"] = static_cast<double>(st.dropped);
    state.counters["kernels"] = static_cast<double>(st.kernels);
  }

 private:
  int mode_;
  bool ok_ = true;
  std::unique_ptr<memrec::Recorder> rec_;
};

Config transformer12() {
  Config c;
  c.layers = 12;
  if (!on_cuda()) c = memrec::workloads::cpu_defaults(c);
  return c;
}

Workload& shared_transformer() {
  static std::unique_ptr<Workload> w = [] {
    auto w = Workload::create(transformer12());
    w->step(0);  // warm up kernels, the allocator's cache and the optimizer state
    return w;
  }();
  return *w;
}

// 1. Step time of the 12-layer transformer.
void BM_TransformerStep(benchmark::State& state) {
  Workload& w = shared_transformer();
  Mode mode(state);
  if (!mode.ok()) return;
  w.step(1);  // first recorded step pays one-time costs (unwinder caches, symbolizer init)
  for (auto _ : state) state.SetIterationTime(w.step(2) / 1e3);
  mode.report(state);
}
BENCHMARK(BM_TransformerStep)->DenseRange(0, 4)->Arg(8)->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);

// 2. Allocation-heavy loop: at::empty({1024}) alloc + free pairs.
void BM_AllocPair(benchmark::State& state) {
  auto opts = at::TensorOptions().device(on_cuda() ? at::kCUDA : at::kCPU);
  benchmark::DoNotOptimize(at::empty({1024}, opts));
  Mode mode(state, 1 << 20);  // 200k pairs make 600k events: buffer them between drains
  if (!mode.ok()) return;
  memrec::bench::ThreadCounters counters;
  counters.start();
  for (auto _ : state) benchmark::DoNotOptimize(at::empty({1024}, opts));
  auto counted = counters.stop();
  if (counted.instructions > 0) {
    // This thread's only: the drain thread's work is not the program's.
    state.counters["instructions"] = benchmark::Counter(double(counted.instructions), benchmark::Counter::kAvgIterations);
    state.counters["cycles"] = benchmark::Counter(double(counted.cycles), benchmark::Counter::kAvgIterations);
  }
  mode.report(state);
}
BENCHMARK(BM_AllocPair)->DenseRange(0, 7)->DenseRange(9, 11)->Iterations(200000)->Unit(benchmark::kNanosecond);

// 2b. One capture_stack call alone, `depth` frames below the benchmark's own (20/40/80), per method.
__attribute__((noinline)) int descend(int depth, memrec::StackCapture c, benchmark::State& state) {
  if (depth > 0) {
    int n = descend(depth - 1, c, state);
    benchmark::DoNotOptimize(n);  // keeps the call a real call, not a jump
    return n;
  }
  uint64_t pcs[256];
  int n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(n = memrec::capture_stack(c, pcs, 256));
  return n;
}

void BM_Capture(benchmark::State& state) {
  auto c = static_cast<memrec::StackCapture>(state.range(0));
  state.SetLabel(std::string(memrec::to_string(c)));
  if (!memrec::stack_capture_available(c)) {
    state.SkipWithError("this capture is not available here");
    return;
  }
  int frames = descend(static_cast<int>(state.range(1)), c, state);
  state.counters["frames"] = frames;
  double total = static_cast<double>(frames) * static_cast<double>(state.iterations());
  state.counters["per_frame"] = benchmark::Counter(total, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Capture)->ArgsProduct({{1, 2, 3, 4}, {20, 40, 80}})->MinTime(0.1)->Unit(benchmark::kNanosecond);

// 3 + 4. Symbolize + write: the time stop() takes after a recorded 12-layer run (final drain, symbolization of
// new frames, end state, file close), all symbolization time, a full rewrite of the file, and bytes per event.
void BM_SnapshotWrite(benchmark::State& state) {
  Workload& w = shared_transformer();
  for (auto _ : state) {
    memrec::RecorderOptions o;
    o.output = kOut;
    memrec::Recorder rec(o);
    rec.start();
    for (int i = 0; i < 3; ++i) w.step(i);
    auto t0 = std::chrono::steady_clock::now();
    rec.stop();
    double stop_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto st = rec.stats();
    const memrec::Snapshot& recorded = rec.snapshot();  // the file read back: not part of the rewrite's time
    t0 = std::chrono::steady_clock::now();
    memrec::write_file(recorded, kOut + ".rewrite");
    double write_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double bytes = static_cast<double>(std::filesystem::file_size(kOut));
    state.counters["stop_ms"] = stop_ms;
    state.counters["symbolize_ms_total"] = st.symbolize_ms;
    state.counters["write_file_ms"] = write_ms;
    state.counters["unique_frames"] = static_cast<double>(st.unique_frames);
    state.counters["events"] = static_cast<double>(st.events);
    state.counters["kernels"] = static_cast<double>(st.kernels);
    state.counters["bytes_per_event"] = bytes / static_cast<double>(st.events);
    state.counters["dropped"] = static_cast<double>(st.dropped);
    std::filesystem::remove(kOut + ".rewrite");
  }
}
BENCHMARK(BM_SnapshotWrite)->Iterations(1)->Unit(benchmark::kMillisecond);

#ifdef MEMREC_WITH_CUDA
// 3, PyTorch's side: symbolizing the C++ tracebacks recordHistory kept for the same 3 steps (what
// torch.cuda.memory._snapshot() does before _dump_snapshot can write them).
void BM_PytorchSymbolize(benchmark::State& state) {
  Workload& w = shared_transformer();
  for (auto _ : state) {
    pytorch_history(true);
    for (int i = 0; i < 3; ++i) w.step(i);
    alloc::SnapshotInfo info = alloc::snapshot();
    pytorch_history(false);
    std::vector<torch::CapturedTraceback*> tbs;
    for (auto& trace : info.device_traces)
      for (auto& te : trace)
        if (auto* tb = dynamic_cast<torch::CapturedTraceback*>(te.context_.get())) tbs.push_back(tb);
    auto t0 = std::chrono::steady_clock::now();
    auto sym = torch::symbolize(tbs);
    state.counters["symbolize_ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    state.counters["tracebacks"] = static_cast<double>(tbs.size());
    state.counters["unique_frames"] = static_cast<double>(sym.all_frames.size());
  }
}
BENCHMARK(BM_PytorchSymbolize)->Iterations(1)->Unit(benchmark::kMillisecond);
#endif

}  // namespace

BENCHMARK_MAIN();
