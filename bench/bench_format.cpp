// .memrec write and read throughput and size on a synthetic 1M-event training-loop history; reading one training
// step of a 10M-event one through the index.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "machine.h"
#include "memrec/format.h"
#include "memrec/range.h"
#include "synthetic_training.h"

namespace {

constexpr size_t kEvents = 1'000'000;

const memrec::Snapshot& history(size_t events = kEvents) {
  static std::map<size_t, memrec::Snapshot> made;
  if (!made.count(events)) made.emplace(events, memrec::make_training_history(events, 42));
  return made.at(events);
}

std::string bench_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("bench_format_" + std::to_string(getpid()) + name)).string();
}

void BM_Write(benchmark::State& state) {
  const memrec::Snapshot& s = history();
  std::string path = bench_path(".memrec");
  for (auto _ : state) memrec::write_file(s, path);
  auto bytes = std::filesystem::file_size(path);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.events.size()));
  state.counters["bytes_per_event"] = static_cast<double>(bytes) / static_cast<double>(s.events.size());
  state.counters["file_MB"] = static_cast<double>(bytes) / 1e6;
  std::filesystem::remove(path);
}
BENCHMARK(BM_Write)->Unit(benchmark::kMillisecond)->UseRealTime();

// Argument: the threads that decode (0: one per core; 1: the serial reader).
void BM_Read(benchmark::State& state) {
  const memrec::Snapshot& s = history();
  std::string path = bench_path(".memrec");
  memrec::write_file(s, path);
  for (auto _ : state) {
    memrec::Snapshot r = memrec::read_file(path, {.threads = static_cast<unsigned>(state.range(0))});
    benchmark::DoNotOptimize(r.events.size());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.events.size()));
  state.counters["bytes_per_event"] =
      static_cast<double>(std::filesystem::file_size(path)) / static_cast<double>(s.events.size());
  std::filesystem::remove(path);
}
BENCHMARK(BM_Read)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// One training step in the middle of a long run (`memrec stats --steps N..N`): the chunks it reads, of all.
void BM_ReadStep(benchmark::State& state) {
  const memrec::Snapshot& s = history(static_cast<size_t>(state.range(0)));
  std::string path = bench_path("_long.memrec");
  memrec::write_file(s, path);
  uint64_t steps = 0;
  for (uint32_t id = 1; id < s.scopes.size(); ++id) steps += s.scopes[id].kind == memrec::ScopeKind::step;
  // make_training_history names every step "step", so the step is given by its time: the middle one's.
  memrec::Range range{.kind = memrec::Range::Kind::time};
  int64_t start = s.events[0].time_ns, duration = s.events.back().time_ns - start;
  range.first = duration / 2, range.last = duration / 2 + duration / static_cast<int64_t>(std::max<uint64_t>(steps, 1));
  range.flag = "--range (one step)";
  memrec::RangeRead part;
  for (auto _ : state) {
    part = memrec::read_range(path, range);
    benchmark::DoNotOptimize(part.snapshot.events.size());
  }
  state.counters["events"] = static_cast<double>(part.snapshot.events.size());
  state.counters["chunks_read"] = static_cast<double>(part.chunks_read);
  state.counters["chunks"] = static_cast<double>(part.chunks_total);
  std::filesystem::remove(path);
}
BENCHMARK(BM_ReadStep)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

MEMREC_BENCHMARK_MAIN()
