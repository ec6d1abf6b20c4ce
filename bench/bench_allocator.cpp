// memrec whatif allocator on large synthetic histories (target: replaying 10M events through the model <= 2 s):
// the model's replay alone (the event replay it reads is built once), and the whole prediction with it.
#include <benchmark/benchmark.h>

#include <map>

#include "memrec/allocator_whatif.h"
#include "synthetic.h"

namespace memrec {
namespace {

const Snapshot& history(size_t events) {
  static std::map<size_t, Snapshot> cache;
  if (!cache.count(events)) cache.emplace(events, make_synthetic(events, 7));
  return cache.at(events);
}

void run(benchmark::State& state, const char* conf, bool with_replay) {
  const Snapshot& s = history(static_cast<size_t>(state.range(0)));
  AllocConf c = parse_alloc_conf(conf);
  DeviceCapacity memory{.total = 80ull << 30, .limit = 80ull << 30};
  Replay once(s, 0);
  for (auto _ : state) {
    if (with_replay) {
      Replay r(s, 0);
      benchmark::DoNotOptimize(predict_allocator(s, r, c, memory).reserved_peak);
    } else {
      benchmark::DoNotOptimize(predict_allocator(s, once, c, memory).reserved_peak);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.events.size()));
}

void BM_AllocatorModel(benchmark::State& state) { run(state, "", false); }
void BM_AllocatorModelExpandable(benchmark::State& state) { run(state, "expandable_segments:True", false); }
void BM_AllocatorWhatif(benchmark::State& state) { run(state, "", true); }

BENCHMARK(BM_AllocatorModel)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocatorModelExpandable)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllocatorWhatif)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memrec

BENCHMARK_MAIN();
