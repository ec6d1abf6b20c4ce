// memrec whatif scale on two synthetic training histories (bench/synthetic_training.h) of 1M events each, the second
// with a third of the allocations twice as large, as a run at twice the size would have them (target: fitting and
// predicting <= 3 s on the H100 host): matching and fitting with one prediction, and --fit.
#include <benchmark/benchmark.h>

#include <vector>

#include "memrec/scale.h"
#include "synthetic_training.h"

namespace memrec {
namespace {

// The history with the allocations of every third stack twice as large: a run of the same program at size 2.
Snapshot doubled(const Snapshot& s) {
  Snapshot out = s;
  std::vector<Event> events(s.events.begin(), s.events.end());
  for (Event& e : events)
    if (e.stack % 3 == 0 && !is_segment_grow(e.action) && !is_segment_shrink(e.action)) e.size *= 2;
  out.events.assign(events);
  return out;
}

struct Runs {
  Snapshot one = make_training_history(1'000'000, 11);
  Snapshot two = doubled(one);
  std::vector<ScaleRun> runs{{"one", &one, 0, 1}, {"two", &two, 0, 2}};
};

const Runs& runs() {
  static Runs r;
  return r;
}

void BM_ScalePredict(benchmark::State& state) {
  const Runs& r = runs();
  for (auto _ : state) benchmark::DoNotOptimize(scale_whatif(r.runs, {.predict = {8}}).predictions.size());
}

void BM_ScaleFit(benchmark::State& state) {
  const Runs& r = runs();
  ScaleWhatif at8 = scale_whatif(r.runs, {.predict = {8}});
  ScaleWhatifOptions o{.fit = true, .device_memory = *at8.predictions[0].peak_reserved * 5};
  for (auto _ : state) benchmark::DoNotOptimize(scale_whatif(r.runs, o).fit->largest);
}

BENCHMARK(BM_ScalePredict)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScaleFit)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memrec

BENCHMARK_MAIN();
