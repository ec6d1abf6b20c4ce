// PyTorch pickle export and import throughput on a synthetic 1M-entry history (bench/synthetic.h).
// Counters: items_per_second = trace entries per second; bytes_per_entry = pickle bytes / entries.
// bench/python_pickle.py times Python's pickle on the same data for comparison. Run all with:
//   MEMREC_BENCH_PICKLE=/tmp/synthetic.pickle bench_pickle && python3 bench/python_pickle.py /tmp/synthetic.pickle
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "memrec/pickle.h"
#include "synthetic.h"

namespace {

constexpr size_t kEntries = 1'000'000;

const memrec::Snapshot& history() {
  static const memrec::Snapshot s = memrec::make_synthetic(kEntries, 1);
  return s;
}

const std::vector<uint8_t>& exported() {
  static const std::vector<uint8_t> bytes = memrec::export_pickle(history());
  return bytes;
}

void set_counters(benchmark::State& state, size_t bytes) {
  auto entries = static_cast<int64_t>(history().events.size());
  state.SetItemsProcessed(state.iterations() * entries);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.counters["bytes_per_entry"] = double(bytes) / double(entries);
}

void BM_ExportPickle(benchmark::State& state) {
  size_t bytes = 0;
  for (auto _ : state) {
    auto out = memrec::export_pickle(history());
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, bytes);
}
BENCHMARK(BM_ExportPickle)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ImportPickle(benchmark::State& state) {
  for (auto _ : state) {
    auto s = memrec::import_pickle(exported());
    benchmark::DoNotOptimize(s.events.size());
  }
  set_counters(state, exported().size());
}
BENCHMARK(BM_ImportPickle)->Unit(benchmark::kMillisecond)->UseRealTime();

// Imports the pickle named by MEMREC_BENCH_IMPORT (e.g. a real PyTorch snapshot, whose frame lists are not shared).
void BM_ImportPickleFile(benchmark::State& state) {
  const char* path = std::getenv("MEMREC_BENCH_IMPORT");
  if (!path) return state.SkipWithError("set MEMREC_BENCH_IMPORT=<file> to import it");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t entries = 0;
  for (auto _ : state) entries = memrec::import_pickle(bytes).events.size();
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(entries));
  state.counters["bytes_per_entry"] = double(bytes.size()) / double(entries);
}
BENCHMARK(BM_ImportPickleFile)->Unit(benchmark::kMillisecond)->UseRealTime();

// Writes the synthetic history's pickle for bench/python_pickle.py when MEMREC_BENCH_PICKLE names a file.
void BM_WritePickleForPython(benchmark::State& state) {
  const char* path = std::getenv("MEMREC_BENCH_PICKLE");
  for (auto _ : state)
    if (path) memrec::export_pickle_file(history(), path);
  if (!path) state.SkipWithError("set MEMREC_BENCH_PICKLE=<file> to write the pickle");
}
BENCHMARK(BM_WritePickleForPython)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
