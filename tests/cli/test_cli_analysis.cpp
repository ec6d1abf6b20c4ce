// memrec stats / diff / export --format perfetto on real PyTorch pickles.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/fixtures.h"

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

TEST(CliStats, TextReportHasEverySection) {
  auto r = memrec("stats " + quote(kAll));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* section : {"peak allocated", "peak reserved", "live at the allocated peak", "top allocation sites by bytes",
                              "top allocation sites by count", "allocation sizes", "fragmentation"})
    EXPECT_NE(r.output.find(section), std::string::npos) << section << "\n" << r.output;
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
