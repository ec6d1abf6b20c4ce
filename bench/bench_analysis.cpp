// memrec stats / diff on large synthetic histories (target: <= 1 s each on 10M events), replay alone (on one
// thread per core, and on a given number), and growth against stats on a training loop that leaks (target: growth
// within 1.5x stats).
#include <benchmark/benchmark.h>

#include <map>

#include "memrec/growth_output.h"
#include "memrec/replay.h"
#include "memrec/stats_output.h"
#include "synthetic.h"
#include "synthetic_training.h"

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

// The steady training loop of synthetic_training.h with its steps named "step N" and every block of one stack kept
// for ever (at an address of its own): a leak in every step, which `memrec growth` finds.
Snapshot make_leaky_training(size_t events) {
  Snapshot s = make_training_history(events, 42);
  give_distinct_addresses(s);
  uint32_t leaking = 0, leaked = 0;
  PackedVector<Event> kept;
  for (Event e : s.events) {
    if (e.action == Action::alloc && leaking == 0) leaking = e.stack;
    if (e.stack == leaking && e.action == Action::alloc) e.addr = 0x7d0000000000ULL + (uint64_t(leaked++) << 28);
    else if (e.stack == leaking && (e.action == Action::free_requested || e.action == Action::free_completed)) continue;
    kept.push_back(e);
  }
  s.events = std::move(kept);
  std::vector<Scope> scopes;
  uint64_t step = 0;
  for (Scope sc : s.scopes) {
    if (sc.kind == ScopeKind::step) sc.name = s.strings.intern("step " + std::to_string(step++));
    scopes.push_back(sc);
  }
  s.scopes.assign(scopes);
  return s;
}

const Snapshot& leaky_training(size_t events) {
  static std::map<size_t, Snapshot> cache;
  if (!cache.count(events)) cache.emplace(events, make_leaky_training(events));
  return cache.at(events);
}

void BM_GrowthStats(benchmark::State& state) {  // stats on the history BM_Growth reads, for the ratio
  const Snapshot& s = leaky_training(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(stats_json(stats(s, StatsOptions{})).size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.events.size()));
}

void BM_Growth(benchmark::State& state) {
  const Snapshot& s = leaky_training(static_cast<size_t>(state.range(0)));
  GrowthResult g;
  for (auto _ : state) {
    g = growth(s, GrowthOptions{});
    benchmark::DoNotOptimize(growth_json(g).size());
  }
  state.counters["steps"] = static_cast<double>(g.steps.size());
  state.counters["growing"] = static_cast<double>(g.growing.size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.events.size()));
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
BENCHMARK(BM_GrowthStats)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Growth)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memrec

BENCHMARK_MAIN();
