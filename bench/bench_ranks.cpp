// Many ranks at once, as `memrec stats --by rank` and `memrec view A B ...` read them (memrec/ranks.h): N rank
// files of E events each (bench/synthetic.h histories with a training loop's scopes, 8 distinct seeds copied as
// run.rank0..N-1.memrec). Targets: 64 ranks x 1M events in <= 10 s for stats on the GPU host (16 cores); 8 x 1M
// opened for the viewer in <= 3 s (the ranks' curves, then the furthest rank's replay, timeline and lanes).
// BM_OpenRanksForViewerSummaries: the same open of the 1,024 summarized ranks below, their curves from the summaries.
// BM_StatsByRankSummaries: 1,024 ranks of bench/rank_job.h's job at 100k and 1M events a rank, each file with its
// summary (8 ranks generated, the others copies whose summaries name their own rank, host and pid), compared as
// `stats --by rank` compares them: target 5 s on the 2-core machine whatever the length. BENCH_RANKS_KEEP=DIR
// writes them there and keeps them (for /usr/bin/time -v memrec stats --by rank DIR/*.memrec).
// BENCH_RANKS_THREADS caps the loader's threads (default: one per hardware thread).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "memrec/format.h"
#include "memrec/ranks.h"
#include "memrec/ranks_output.h"
#include "memrec/timeline.h"
#include "rank_job.h"
#include "synthetic.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;

// Written once per shape and removed at exit.
const std::vector<std::string>& rank_files(size_t ranks, size_t events) {
  static struct Dirs : std::map<std::pair<size_t, size_t>, std::vector<std::string>> {
    std::vector<fs::path> made;
    ~Dirs() {
      for (const fs::path& d : made) fs::remove_all(d);
    }
  } dirs;
  auto key = std::pair{ranks, events};
  if (dirs.count(key)) return dirs.at(key);
  fs::path dir = fs::temp_directory_path() /
                 ("memrec_bench_ranks_" + std::to_string(getpid()) + "_" + std::to_string(ranks) + "x" + std::to_string(events));
  fs::create_directories(dir);
  dirs.made.push_back(dir);
  std::vector<std::string> paths;
  for (size_t r = 0; r < ranks; ++r) {
    paths.push_back((dir / ("run.rank" + std::to_string(r) + ".memrec")).string());
    if (r < 8) {
      Snapshot s = make_synthetic(events, static_cast<uint32_t>(42 + r));
      add_training_scopes_and_kernels(s);
      write_file(s, paths.back());
    } else {
      fs::copy_file(paths[r % 8], paths.back());
    }
  }
  return dirs[key] = paths;
}

// A job's rank files with their summaries, written once per shape.
const std::vector<std::string>& summarized_rank_files(size_t ranks, size_t events) {
  static std::map<std::pair<size_t, size_t>, std::vector<std::string>> made;
  auto key = std::pair{ranks, events};
  if (made.count(key)) return made.at(key);
  const char* keep = std::getenv("BENCH_RANKS_KEEP");
  fs::path dir = keep ? fs::path(keep) : fs::temp_directory_path() / ("memrec_bench_summaries_" + std::to_string(getpid()));
  dir /= std::to_string(ranks) + "x" + std::to_string(events);
  fs::create_directories(dir);
  bench::RankJob job{.ranks = static_cast<int>(ranks), .events = events, .wide_rank = 3, .early_rank = 5};
  std::vector<std::string> paths;
  for (size_t r = 0; r < ranks; ++r) {
    paths.push_back((dir / ("job.rank" + std::to_string(r) + ".memrec")).string());
    if (r < 8) {
      Snapshot s = bench::make_rank(job, static_cast<int>(r));
      write_file(s, paths.back());
      write_summary(s, paths.back());
      continue;
    }
    fs::copy_file(paths[r % 8], paths.back(), fs::copy_options::overwrite_existing);
    nlohmann::json summary = nlohmann::json::parse(*read_summary(paths.back()));
    summary["rank"] = r;
    summary["host"] = "node-" + std::to_string(job.host_of(static_cast<int>(r)));
    attach_summary(paths.back(), summary.dump());
  }
  if (!keep) std::atexit([] { fs::remove_all(fs::temp_directory_path() / ("memrec_bench_summaries_" + std::to_string(getpid()))); });
  return made[key] = paths;
}

unsigned threads() {
  const char* t = std::getenv("BENCH_RANKS_THREADS");
  return t ? static_cast<unsigned>(std::atoi(t)) : 0;
}

void BM_StatsByRank(benchmark::State& state) {
  const auto& paths = rank_files(static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1)));
  for (auto _ : state) {
    RankSet set = load_ranks(paths, {.threads = threads()});
    benchmark::DoNotOptimize(ranks_json(set, 15).size());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_StatsByRank)->Args({8, 1'000'000})->Args({64, 1'000'000})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StatsByRankSummaries(benchmark::State& state) {
  const auto& paths = summarized_rank_files(static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1)));
  for (auto _ : state) {
    RankSet set = load_ranks(paths, {.threads = threads()});
    if (set.read_whole) state.SkipWithError("a rank was read whole");
    benchmark::DoNotOptimize(ranks_text(set, 15).size());
  }
}
BENCHMARK(BM_StatsByRankSummaries)->Args({1024, 100'000})->Args({1024, 1'000'000})->Unit(benchmark::kMillisecond)->UseRealTime();

// The process's peak resident memory (VmHWM) in MB; reset_peak_rss() starts it again from the current RSS.
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) / 1024;
  return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// What `memrec view A B ...` does before its first frame (viewer/src/ranks_view.cpp open_ranks, Document::open):
// the ranks with their curves, then the furthest rank read whole with its replay, timeline and lanes. Counters:
// ranks_ms, the ranks alone; open_ms, the furthest rank; peak_rss_mb, the process's peak while opening.
void open_for_viewer(benchmark::State& state, const std::vector<std::string>& paths, bool summarized) {
  double ranks_ms = 0, open_ms = 0;
  reset_peak_rss();
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    RankSet set = load_ranks(paths, {.curve = true, .threads = threads()});
    auto loaded = std::chrono::steady_clock::now();
    if (summarized && set.read_whole) state.SkipWithError("a rank was read whole");
    Snapshot s = read_file(set.ranks[set.furthest.value_or(0)].path);
    Replay r(s, 0);
    Timeline tl(r);
    auto kernels = kernel_lanes(s, 0);
    auto scopes = scope_lanes(s, 0, tl.end_ns());
    benchmark::DoNotOptimize(kernels.size() + scopes.size());
    ranks_ms += std::chrono::duration<double, std::milli>(loaded - start).count();
    open_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - loaded).count();
  }
  state.counters["ranks_ms"] = benchmark::Counter(ranks_ms, benchmark::Counter::kAvgIterations);
  state.counters["open_ms"] = benchmark::Counter(open_ms, benchmark::Counter::kAvgIterations);
  state.counters["peak_rss_mb"] = peak_rss_mb();
}

// Files without summaries: every rank read whole for its curve.
void BM_OpenRanksForViewer(benchmark::State& state) {
  open_for_viewer(state, rank_files(static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1))), false);
}
BENCHMARK(BM_OpenRanksForViewer)->Args({8, 1'000'000})->Unit(benchmark::kMillisecond)->UseRealTime();

// 1,024 ranks of bench/rank_job.h's job with their summaries: the curves come from the summaries, and only the
// furthest rank is read whole. Target (the ranks): 5 s on the 2-core machine whatever the length.
void BM_OpenRanksForViewerSummaries(benchmark::State& state) {
  open_for_viewer(state, summarized_rank_files(static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1))), true);
}
BENCHMARK(BM_OpenRanksForViewerSummaries)->Args({1024, 100'000})->Args({1024, 1'000'000})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace memrec

BENCHMARK_MAIN();
