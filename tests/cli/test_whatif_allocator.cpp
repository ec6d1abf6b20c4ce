// memrec whatif allocator on the fragmenting workload recorded on an H100 (PyTorch 2.11) under default settings
// (tests/data/alloc_default.memrec: examples/train.py --layers 8 --d-model 768 --seq 512 --seq-min 96, 10 steps),
// against the reserved peaks memory_stats() measured in plain runs of the same workload under each setting.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/allocator_whatif.h"
#include "memrec/load.h"

namespace memrec {
namespace {

using test::memrec;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kDefault = quote(test::data("alloc_default.memrec"));

nlohmann::json whatif(const std::string& args) {
  auto r = memrec("whatif allocator " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(CliWhatifAllocator, DefaultsToTheRecordedSettings) {
  auto j = whatif(kDefault);
  EXPECT_EQ(j["settings_source"], "recorded");
  EXPECT_EQ(j["settings"], "");
  EXPECT_EQ(j["predicted_reserved_peak"], j["recorded_reserved_peak"]);
  EXPECT_EQ(j["predicted_reserved_peak"], 10252976128u);  // the plain run's memory_stats() reserved peak
  EXPECT_EQ(j["segments"], 107);
  EXPECT_TRUE(j["notes"].empty());
  EXPECT_EQ(j["device_memory"]["total"], 85017493504u);  // the H100's, from the recording
}

// Measured on the H100: reserved_bytes.all.peak of a plain run (no recorder) under each setting.
TEST(CliWhatifAllocator, PredictsEachSettingWithinFivePercentOfTheMeasuredRun) {
  const std::pair<const char*, uint64_t> measured[] = {
      {"expandable_segments:True", 6696206336},
      {"max_split_size_mb:64", 21648900096},
      {"max_split_size_mb:256", 10252976128},
      {"garbage_collection_threshold:0.6,max_split_size_mb:128", 14134804480},
      {"roundup_power2_divisions:4", 7526678528},
  };
  for (const auto& [conf, want] : measured) {
    auto j = whatif(kDefault + " --alloc-conf " + quote(conf));
    double got = j["predicted_reserved_peak"].get<double>();
    EXPECT_LT(std::abs(got - static_cast<double>(want)) / static_cast<double>(want), 0.05) << conf << ": " << got;
    EXPECT_EQ(j["settings_source"], "--alloc-conf");
  }
}

TEST(CliWhatifAllocator, SweepListsSettingsBestFirst) {
  auto j = whatif(kDefault + " --sweep");
  auto rows = j["sweep"];
  ASSERT_GE(rows.size(), 8u);
  EXPECT_EQ(rows[0]["settings"], "expandable_segments:True");
  int own = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) EXPECT_LE(rows[i - 1]["predicted_reserved_peak"], rows[i]["predicted_reserved_peak"]);
    EXPECT_EQ(rows[i]["saving"].get<int64_t>(), j["sweep_baseline"].get<int64_t>() - rows[i]["predicted_reserved_peak"].get<int64_t>());
    EXPECT_EQ(rows[i]["own"], rows[i]["settings"] == j["recorded_settings"]) << rows[i].dump();
    own += rows[i]["own"].get<bool>();
  }
  EXPECT_EQ(own, 1);
}

// The wording, pinned once: a note, the table, and a sweep where some settings run out of memory.
TEST(CliWhatifAllocator, TextSaysEveryPartSo) {
  auto r = memrec("whatif allocator " + kDefault + " --device-memory 6.5GiB --sweep");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, R"(note: out of memory: 5 requests would not fit in the device's 6.50 GiB (--device-memory); the run stops at the first, and the predicted peaks go on past it as if the device had room
device 0: 6642 requests replayed through the caching allocator model under (defaults) (the run's own)
                               predicted      recorded
  peak reserved                 7.42 GiB      9.55 GiB
  peak allocated (blocks)       5.95 GiB
  segments at the peak                93
  cudaMalloc / map calls             125           106
  free at the peak              1.64 GiB
  OOMs                                 5             0

settings, best first (saving against the run's own settings, 7.42 GiB predicted):
      6.24 GiB    1.18 GiB   16.0%  expandable_segments:True
      6.50 GiB  942.00 MiB   12.4%  max_split_size_mb:64
      6.51 GiB    runs out (1 OOM)  expandable_segments:True,roundup_power2_divisions:4
      6.54 GiB    runs out (1 OOM)  max_split_size_mb:128
      6.83 GiB   runs out (3 OOMs)  roundup_power2_divisions:4
      7.42 GiB   runs out (5 OOMs)  (defaults)  (the run's)
      7.42 GiB   runs out (5 OOMs)  max_split_size_mb:256
      7.42 GiB   runs out (5 OOMs)  max_split_size_mb:512
      7.42 GiB   runs out (5 OOMs)  roundup_power2_divisions:[256:1,512:2,1024:8,>:8]
      7.58 GiB   runs out (6 OOMs)  roundup_power2_divisions:8
)");
}

TEST(CliWhatifAllocator, AnOomRunIsReplayedAgainstTheDevicesMemory) {
  auto j = whatif(quote(test::data("alloc_oom.memrec")));
  EXPECT_EQ(j["recorded_ooms"], 1);
  EXPECT_EQ(j["predicted_ooms"], 1);
  EXPECT_LT(j["device_memory"]["limit"], j["device_memory"]["total"]);
  // A device twice as large holds what the run asked for.
  auto big = whatif(quote(test::data("alloc_oom.memrec")) + " --device-memory 160GiB");
  EXPECT_EQ(big["predicted_ooms"], 0);
}

// 1 GiB cannot hold the run's 6 GiB of blocks: the prediction says it runs out instead of passing for a peak.
TEST(CliWhatifAllocator, APredictionThatRunsOutOfMemorySaysSo) {
  auto small = whatif(kDefault + " --device-memory 1GiB");
  EXPECT_GT(small["predicted_ooms"], 0u);
  EXPECT_EQ(small["fits"], false);
  EXPECT_EQ(small["notes"].size(), 1u) << small.dump();
  EXPECT_EQ(whatif(kDefault)["fits"], true);
  AllocatorWhatif w = allocator_whatif(load_snapshot(test::data("alloc_default.memrec")), 0, {.device_memory = 1ull << 30});
  EXPECT_EQ(w.notes, std::vector{AllocatorNote::out_of_memory});
  EXPECT_EQ(w.prediction.ooms, small["predicted_ooms"]);
}

// At 6.5 GiB some settings fit and some run out: those that run out come last, with no saving.
TEST(CliWhatifAllocator, SweepRanksSettingsThatRunOutOfMemoryLast) {
  auto rows = whatif(kDefault + " --device-memory 6.5GiB --sweep")["sweep"];
  size_t fitting = 0, short_of_memory = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    bool fits = rows[i]["predicted_ooms"] == 0;
    EXPECT_EQ(rows[i]["fits"], fits) << rows[i].dump();
    EXPECT_EQ(rows[i]["saving"].is_null(), !fits) << rows[i].dump();
    if (i) EXPECT_TRUE(fits <= rows[i - 1]["fits"].get<bool>()) << "row " << i << " fits after one that does not";
    (fits ? fitting : short_of_memory) += 1;
  }
  EXPECT_GT(fitting, 0u);
  EXPECT_GT(short_of_memory, 0u);
}

TEST(CliWhatifAllocator, SaysWhichSettingsItAssumed) {
  TempDir tmp;
  std::string pickle = tmp / "bare.pickle";
  auto made = run_command("/usr/bin/python3 -c " + quote(R"(import pickle, sys
t = [{"action": "segment_alloc", "addr": 1 << 30, "size": 20 << 20, "stream": 0, "time_us": 1, "frames": []},
     {"action": "alloc", "addr": 1 << 30, "size": 5 << 20, "stream": 0, "time_us": 2, "frames": []}]
pickle.dump({"segments": [], "device_traces": [t]}, open(sys.argv[1], "wb"), protocol=4))") + " " + quote(pickle));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto j = whatif(quote(pickle));
  EXPECT_EQ(j["settings_source"], "assumed");
  EXPECT_EQ(j["notes"].size(), 2u) << j.dump();
  EXPECT_EQ(j["predicted_reserved_peak"], 20u << 20);
  AllocatorWhatif w = allocator_whatif(load_snapshot(pickle), 0, {});
  EXPECT_EQ(w.source, SettingsSource::assumed);
  EXPECT_EQ(w.notes, (std::vector{AllocatorNote::assumed_defaults, AllocatorNote::memory_unknown}));
}

TEST(CliWhatifAllocator, BadSettingsAreOneSentence) {
  auto r = memrec("whatif allocator " + kDefault + " --alloc-conf max_split_size_mb:10");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "memrec: error: allocator settings 'max_split_size_mb:10': max_split_size_mb must be at least 20\n");
  r = memrec("whatif allocator " + kDefault + " --device-memory lots");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "memrec: error: --device-memory: expected a size like 80GiB or 85899345920, got 'lots'\n");
}

}  // namespace
}  // namespace memrec
