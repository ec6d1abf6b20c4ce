// Opening a recording as `memrec view` does, without the window (which the GPU host cannot open): read the file,
// replay the device, build the timeline's level of detail and the lanes, counting each stage's wall and CPU time.
// Input: bench/synthetic.h histories with a training loop's scopes and kernels, as bench/viewer/bench_viewer.cpp
// opens them (target: 10M events in <= 3 s to the first frame, <= 48 resident bytes per event).
#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <map>

#include "machine.h"
#include "memrec/format.h"
#include "memrec/replay.h"
#include "memrec/timeline.h"
#include "synthetic.h"

namespace memrec {
namespace {

// Written once per size (Google Benchmark calls a benchmark several times) and removed at exit.
const std::string& recording(size_t events) {
  static struct Files : std::map<size_t, std::string> {
    ~Files() {
      for (const auto& [n, path] : *this) std::filesystem::remove(path);
    }
  } paths;
  if (!paths.count(events)) {
    Snapshot s = make_synthetic(events, 42);
    add_training_scopes_and_kernels(s);
    std::string path = std::filesystem::temp_directory_path() /
                       ("memrec_bench_load_" + std::to_string(getpid()) + "_" + std::to_string(events) + ".memrec");
    write_file(s, path);
    paths[events] = path;
  }
  return paths.at(events);
}

double seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Wall and CPU milliseconds a stage took, summed over the iterations. The lanes, which run beside the replay, count
// the CPU of their own thread; the stages on threads of their own, that of the process (the replay's takes in the
// lanes' beside it).
struct Stage {
  const char* name;
  clockid_t cpu_clock;
  double wall = 0, cpu = 0;
  template <class F> auto operator()(F f) {
    double w = seconds(CLOCK_MONOTONIC), c = seconds(cpu_clock);
    auto result = f();
    wall += (seconds(CLOCK_MONOTONIC) - w) * 1e3, cpu += (seconds(cpu_clock) - c) * 1e3;
    return result;
  }
};

size_t lanes_of(const Snapshot& s) {
  return kernel_lanes(s, 0).size() + scope_lanes(s, 0, last_event_time(s, 0)).size();
}

// Arguments: events, and threads (0: one per core; 1: one stage after the other on the caller's thread alone).
// As Document::open: the file read, then the lanes built beside the replay, and the timeline.
void BM_OpenForViewer(benchmark::State& state) {
  const std::string& path = recording(static_cast<size_t>(state.range(0)));
  auto threads = static_cast<unsigned>(state.range(1));
  size_t events = 0, packed = 0;
  Stage read{"read", CLOCK_PROCESS_CPUTIME_ID}, replay{"replay", CLOCK_PROCESS_CPUTIME_ID},
      timeline{"timeline", CLOCK_PROCESS_CPUTIME_ID}, lanes{"lanes", CLOCK_THREAD_CPUTIME_ID};
  for (auto _ : state) {
    Snapshot s = read([&] { return read_file(path, {.threads = threads}); });
    auto launch = threads == 1 ? std::launch::deferred : std::launch::async;
    auto lanes_beside = std::async(launch, [&] { return lanes([&] { return lanes_of(s); }); });
    Replay r = replay([&] { return Replay(s, 0, threads); });
    Timeline tl = timeline([&] { return Timeline(r, threads); });
    benchmark::DoNotOptimize(lanes_beside.get() + tl.steps());
    events = s.events.size();
    packed = s.events.memory_bytes() + s.kernels.memory_bytes() + s.scopes.memory_bytes();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
  state.counters["rows_bytes_per_event"] = static_cast<double>(packed) / static_cast<double>(events);
  for (const Stage* st : {&read, &replay, &timeline, &lanes}) {
    state.counters[std::string(st->name) + "_ms"] = st->wall / static_cast<double>(state.iterations());
    state.counters[std::string(st->name) + "_cpu_ms"] = st->cpu / static_cast<double>(state.iterations());
  }
}
BENCHMARK(BM_OpenForViewer)
    ->Args({1'000'000, 0})
    ->Args({10'000'000, 0})
    ->Args({10'000'000, 1})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace
}  // namespace memrec

MEMREC_BENCHMARK_MAIN()
