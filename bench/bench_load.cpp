// Opening a recording as `memrec view` does, without the window (which the GPU host cannot open): read the file,
// replay the device, build the timeline's level of detail and the lanes. Input: bench/synthetic.h histories with a
// training loop's scopes and kernels, as bench/viewer/bench_viewer.cpp opens them (target: 10M events in <= 3 s to
// the first frame, <= 48 resident bytes per event).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
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

// Arguments: events, and the threads that decode (0: one per core; 1: the serial reader).
void BM_OpenForViewer(benchmark::State& state) {
  const std::string& path = recording(static_cast<size_t>(state.range(0)));
  size_t events = 0, packed = 0;
  for (auto _ : state) {
    Snapshot s = read_file(path, {.threads = static_cast<unsigned>(state.range(1))});
    Replay r(s, 0);
    Timeline tl(r);
    auto kernels = kernel_lanes(s, 0);
    auto scopes = scope_lanes(s, 0, tl.end_ns());
    benchmark::DoNotOptimize(scopes.size() + kernels.size());
    events = s.events.size();
    packed = s.events.memory_bytes() + s.kernels.memory_bytes() + s.scopes.memory_bytes();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
  state.counters["rows_bytes_per_event"] = static_cast<double>(packed) / static_cast<double>(events);
}
BENCHMARK(BM_OpenForViewer)
    ->Args({1'000'000, 0})
    ->Args({10'000'000, 0})
    ->Args({10'000'000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace memrec

MEMREC_BENCHMARK_MAIN()
