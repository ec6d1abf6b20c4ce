// .memrec write and read throughput and size on a synthetic 1M-event training-loop history.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "memrec/format.h"
#include "synthetic_training.h"

namespace {

constexpr size_t kEvents = 1'000'000;

const memrec::Snapshot& history() {
  static const memrec::Snapshot s = memrec::make_training_history(kEvents, 42);
  return s;
}

std::string bench_path() {
  return (std::filesystem::temp_directory_path() / ("bench_format_" + std::to_string(getpid()) + ".memrec")).string();
}

void BM_Write(benchmark::State& state) {
  const memrec::Snapshot& s = history();
  std::string path = bench_path();
  for (auto _ : state) memrec::write_file(s, path);
  auto bytes = std::filesystem::file_size(path);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.events.size()));
  state.counters["bytes_per_event"] = static_cast<double>(bytes) / static_cast<double>(s.events.size());
  state.counters["file_MB"] = static_cast<double>(bytes) / 1e6;
  std::filesystem::remove(path);
}
BENCHMARK(BM_Write)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Read(benchmark::State& state) {
  const memrec::Snapshot& s = history();
  std::string path = bench_path();
  memrec::write_file(s, path);
  for (auto _ : state) {
    memrec::Snapshot r = memrec::read_file(path);
    benchmark::DoNotOptimize(r.events.size());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.events.size()));
  state.counters["bytes_per_event"] =
      static_cast<double>(std::filesystem::file_size(path)) / static_cast<double>(s.events.size());
  std::filesystem::remove(path);
}
BENCHMARK(BM_Read)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
