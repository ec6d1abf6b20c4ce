// memrec stats / diff on large synthetic histories (target: <= 1 s each on 10M events), and replay alone (on one
// thread per core, and on a given number).
#include <benchmark/benchmark.h>

#include <map>

#include "memrec/replay.h"
#include "memrec/stats_output.h"
#include "synthetic.h"

namespace memrec {
namespace {

const Snapshot& history(size_t events, uint32_t seed = 7) {
  static std::map<std::pair<size_t, uint32_t>, Snapshot> cache;
  auto key = std::make_pair(events, seed);
  if (!cache.count(key)) cache.emplace(key, make_synthetic(events, seed));
  return cache.at(key);
}

void replay_on(benchmark::State& state, unsigned threads) {
  const Snapshot& s = history(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    Replay r(s, 0, threads);
    benchmark::DoNotOptimize(r.peak_allocated().bytes);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.events.size()));
}

void BM_Replay(benchmark::State& state) { replay_on(state, 0); }
// Arguments: events, and threads (1: the serial pass).
void BM_ReplayThreads(benchmark::State& state) { replay_on(state, static_cast<unsigned>(state.range(1))); }

void BM_Stats(benchmark::State& state) {
  const Snapshot& s = history(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(stats_json(stats(s, StatsOptions{})).size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.events.size()));
}

void BM_Diff(benchmark::State& state) {
  const Snapshot& a = history(static_cast<size_t>(state.range(0)), 7);
  const Snapshot& b = history(static_cast<size_t>(state.range(0)), 8);
  for (auto _ : state) benchmark::DoNotOptimize(diff_json(diff(a, b, StatsOptions{})).size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(a.events.size() * 2));
}

BENCHMARK(BM_Replay)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReplayThreads)
    ->Args({10'000'000, 1})
    ->Args({10'000'000, 2})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_Stats)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Diff)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memrec

BENCHMARK_MAIN();
