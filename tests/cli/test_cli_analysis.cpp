// memrec stats / diff / export --format perfetto on real PyTorch pickles.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/histories.h"
#include "common/process.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::TempDir;

const std::string kAll = test::data("torch_2layer_all.pickle");
const std::string kPython = test::data("torch_2layer_python.pickle");

using test::memrec;

nlohmann::json json_of(const std::string& args) {
  auto r = memrec(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

nlohmann::json python_reference(const std::string& pickle) {
  auto r = run_command("python3 " + quote(test::source("tests/scripts/replay_reference.py")) +
                       " " + quote(pickle));
  return nlohmann::json::parse(r.output)[0];
}

std::string fmt_args(const char* cmd, const std::string& file, const char* by) {
  return std::string(cmd) + " " + quote(file) + " --by " + by + " --top 100000";
}

TEST(CliStats, LiveGroupsSumToThePeakForEveryGrouping) {
  auto want = python_reference(kAll);
  for (const char* by : {"stack", "op", "module", "phase", "category", "layer"}) {
    auto j = json_of(fmt_args("stats", kAll, by));
    EXPECT_EQ(j["peak_allocated"]["bytes"], want["allocated"]) << by;
    EXPECT_EQ(j["peak_reserved"]["bytes"], want["reserved"]) << by;
    uint64_t sum = 0;
    for (const auto& g : j["live"]) sum += g["bytes"].get<uint64_t>();
    EXPECT_EQ(sum, j["at"]["allocated"].get<uint64_t>()) << by;
    EXPECT_EQ(j["at"]["allocated"], want["allocated"]) << by;
  }
}

// The wording of every section, pinned once; the other tests check the numbers through --json.
TEST(CliStats, TextSaysEverySectionSo) {
  TempDir dir;
  write_file(test::oom_with_kernels(), dir / "oom.memrec");
  auto r = memrec("stats " + quote(dir / "oom.memrec") + " --kernels");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, R"(device 0: 3 events over 2 ns
peak allocated      1.00 MiB  at +1 ns (event 1)
peak reserved       2.00 MiB  at +0 ns (event 0)

live at the allocated peak (+1 ns): 1.00 MiB allocated, 2.00 MiB reserved, by stack:
      1.00 MiB 100.0%        1x  <no stack>

top allocation sites by bytes allocated over the run:
      1.00 MiB        1x  <no stack>
top allocation sites by count:
         1x     1.00 MiB  <no stack>

allocation sizes:
      1.00 MiB .. 2.00 MiB              1x     1.00 MiB

fragmentation (reserved - allocated = 1.00 MiB) in 1 segments:
  block rounding (512-byte granularity)                 0 B
  freed, waiting for other streams                      0 B
  free pieces of split segments                    1.00 MiB
  free pieces of other streams' segments                0 B
  cached, wholly free segments                          0 B
  largest contiguous free range                    1.00 MiB

who fragmented the reserved memory at its peak (+1 ns, 2.00 MiB reserved, 1.00 MiB free; replayed under (defaults), assumed):
     free held   blocks  their bytes  allocated               site
      1.00 MiB        1     1.00 MiB  +1 ns .. +1 ns          <no stack>
what other allocator settings would reserve at the peak (memrec whatif allocator --sweep):
      2.00 MiB  runs out (1 OOM)  expandable_segments:True
      2.00 MiB  runs out (1 OOM)  max_split_size_mb:64
      2.00 MiB  runs out (1 OOM)  max_split_size_mb:128
      2.00 MiB  runs out (1 OOM)  max_split_size_mb:256
      2.00 MiB  runs out (1 OOM)  max_split_size_mb:512
      2.00 MiB  runs out (1 OOM)  roundup_power2_divisions:4
      2.00 MiB  runs out (1 OOM)  roundup_power2_divisions:8
      2.00 MiB  runs out (1 OOM)  roundup_power2_divisions:[256:1,512:2,1024:8,>:8]
      2.00 MiB  runs out (1 OOM)  expandable_segments:True,roundup_power2_divisions:4

OOM at +2 ns: requested 4.00 MiB, the device had 512.00 KiB free; 1.00 MiB allocated, 2.00 MiB reserved
  not fragmentation: the program needed more memory than the device had
  who held the memory:
        1.00 MiB 100.0%        1x  <no stack>

top kernels by GPU time:
         total    count          avg          max  name
        400 ns        2       200 ns       300 ns  void gemm<float, 128>(float const*)
         50 ns        1        50 ns        50 ns  relu_kernel
)");
}

TEST(CliStats, FragmentationFieldsSumToReservedMinusAllocated) {
  auto f = json_of("stats " + quote(kAll))["fragmentation"];
  uint64_t parts = f["rounding"].get<uint64_t>() + f["pending_free"].get<uint64_t>() + f["split_free"].get<uint64_t>() +
                   f["other_stream"].get<uint64_t>() + f["cached_free"].get<uint64_t>();
  EXPECT_EQ(parts, f["reserved"].get<uint64_t>() - f["allocated"].get<uint64_t>());
  EXPECT_GT(f["segments"].get<uint64_t>(), 0u);
}

TEST(CliStats, AtATimeBeforeThePeakShowsLess) {
  auto peak = json_of("stats " + quote(kAll));
  auto early = json_of("stats " + quote(kAll) + " --at 0s");
  EXPECT_LT(early["at"]["allocated"].get<uint64_t>(), peak["at"]["allocated"].get<uint64_t>());
  EXPECT_GT(memrec("stats " + quote(kAll) + " --at yesterday").exit_code, 0);
  EXPECT_GT(memrec("stats " + quote(kAll) + " --by colour").exit_code, 0);
}

TEST(CliDiff, SameHistoryDiffersByNothingAndFramesMatchAcrossFiles) {
  auto same = json_of("diff " + quote(kAll) + " " + quote(kAll) + " --by stack");
  EXPECT_EQ(same["delta_peak_allocated"], 0);
  EXPECT_EQ(same["groups_changed"], 0);
  // Same run, recorded with Python frames vs C++ frames: same peak, different stacks.
  auto mixed = json_of("diff " + quote(kPython) + " " + quote(kAll) + " --by stack");
  EXPECT_EQ(mixed["delta_peak_allocated"], 0);
  EXPECT_GT(mixed["groups_changed"].get<int>(), 0);
}

TEST(CliDiff, TextSaysWhatChangedSo) {
  auto r = memrec("diff " + quote(kPython) + " " + quote(kAll) + " --top 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, R"(                            a            b         b - a
device                      0            0
peak allocated      95.63 MiB    95.63 MiB          +0 B
peak reserved       98.00 MiB    98.00 MiB          +0 B

live at each peak by stack, largest change first (15 groups changed):
     -12.05 MiB    12.05 MiB -> 0 B          step (anchor_torch_recorder.py:12) via _init_group
     +12.05 MiB          0 B -> 12.05 MiB    step (anchor_torch_recorder.py:12) via aten::zeros_like
      -6.03 MiB    71.03 MiB -> 65.00 MiB    <no stack>
      -6.03 MiB     6.03 MiB -> 0 B          make (anchor_torch_recorder.py:9) via <lambda>
)");
}

TEST(CliExport, PerfettoJsonParsesWithACounterPerEvent) {
  TempDir dir;
  auto r = memrec("export " + quote(kAll) + " --format perfetto -o " + quote(dir / "trace.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir / "trace.json");
  auto trace = nlohmann::json::parse(in);
  size_t counters = 0;
  for (const auto& e : trace["traceEvents"]) counters += e["ph"] == "C";
  EXPECT_EQ(counters, 1025u);
}

}  // namespace
}  // namespace memrec
