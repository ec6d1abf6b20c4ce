// Sites in the commands: stats --by stack leads with the site and --full-stack shows the whole stack; --internal
// and MEMREC_INTERNAL extend the internal list for stats, diff, info and report; inferred phases for PyTorch's
// snapshots in --by phase.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::memrec;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kAll = test::data("torch_2layer_all.pickle");
const std::string kPython = test::data("torch_2layer_python.pickle");
const std::string kRecording = test::data("transformer_2layer_cpu.memrec");

nlohmann::json json_of(const std::string& args, const std::string& env = "") {
  auto r = run_command(env + (env.empty() ? "" : " ") + quote(MEMREC_BINARY) + " " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(CliSites, StackRowsLeadWithTheSiteAndCarryTheFrames) {
  for (const std::string& file : {kAll, kRecording}) {
    auto j = json_of("stats " + quote(file) + " --by stack --top 8");
    for (const auto& row : j["live"]) {
      if (!row.contains("site")) continue;  // "<N more>"
      EXPECT_TRUE(row["key"].get<std::string>().starts_with(row["site"].get<std::string>())) << row["key"];
      size_t sites = 0;
      for (const auto& f : row["frames"]) sites += f["site"].get<bool>();
      EXPECT_EQ(sites, row["frames"].empty() ? 0u : 1u) << row["key"];
    }
    for (const auto& row : j["top_sites"]["by_bytes"])
      EXPECT_TRUE(row["key"].get<std::string>().starts_with(row["site"].get<std::string>())) << row["key"];
  }
}

TEST(CliSites, RecordingSitesAreTheWorkloadsCode) {
  auto j = json_of("stats " + quote(kRecording) + " --by stack --top 5");
  for (const auto& row : j["live"])
    if (row.contains("site")) EXPECT_NE(row["site"].get<std::string>().find("(workloads.cpp:"), std::string::npos) << row["key"];
}

// info's largest live allocations: each leads with its site, the scopes it was allocated in below it.
TEST(CliSites, InfoLeadsWithTheSite) {
  auto r = memrec("info " + quote(kRecording));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  size_t entries = 0;
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("largest live allocations") != std::string::npos) in_list = true;
    else if (in_list && line.find("  0x") != std::string::npos) {
      ++entries;
      EXPECT_NE(line.find("(workloads.cpp:"), std::string::npos) << line;
    } else if (in_list) {
      EXPECT_TRUE(line.starts_with(std::string(18, ' ') + "in step ")) << line;
    }
  }
  EXPECT_EQ(entries, 10u) << r.output;
}

TEST(CliSites, FullStackPrintsEveryFrameMarked) {
  auto j = json_of("stats " + quote(kAll) + " --by stack --top 3");
  auto r = memrec("stats " + quote(kAll) + " --by stack --top 3 --full-stack");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t frames = 0, user = 0;
  for (const auto& row : j["live"])
    if (row.contains("frames")) {
      frames += row["frames"].size();
      for (const auto& f : row["frames"]) user += f["user"].get<bool>() && !f["site"].get<bool>();
    }
  ASSERT_GT(frames, 20u);
  std::istringstream lines(r.output);
  size_t printed = 0, marked_site = 0, marked_user = 0;
  for (std::string line; std::getline(lines, line);) {
    bool frame_line = line.starts_with("              ");  // the frames sit under their row, past its numbers
    printed += frame_line && line.find("first of ") == std::string::npos;
    marked_site += line.starts_with("          site  ");
    marked_user += line.starts_with("          user  ");
  }
  EXPECT_EQ(printed + marked_site + marked_user, frames) << r.output;
  EXPECT_EQ(marked_user, user);
  EXPECT_GT(marked_site, 0u);
}

TEST(CliSites, FullStackWithAnotherGroupingIsRefused) {
  for (const char* by : {"op", "rank"}) {
    auto r = memrec("stats " + quote(kAll) + " --by " + by + " --full-stack");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("--full-stack goes with --by stack, not --by ") + by), std::string::npos) << r.output;
  }
}

// The script's own frames declared internal: its allocations fall back to the ops, for every command that shows
// sites, by flag and by environment.
TEST(CliSites, InternalPatternsReachEveryCommand) {
  const std::string script = "anchor_torch_recorder.py";
  auto keys = [](const nlohmann::json& rows) {
    std::string all;
    for (const auto& row : rows) all += row["key"].get<std::string>() + "\n";
    return all;
  };
  EXPECT_NE(keys(json_of("stats " + quote(kAll))["top_sites"]["by_bytes"]).find(script), std::string::npos);
  EXPECT_EQ(keys(json_of("stats " + quote(kAll) + " --internal " + script)["top_sites"]["by_bytes"]).find(script),
            std::string::npos);
  EXPECT_EQ(keys(json_of("stats " + quote(kAll), "MEMREC_INTERNAL=/nowhere/:" + script)["top_sites"]["by_bytes"])
                .find(script),
            std::string::npos);
  auto diff = json_of("diff " + quote(kAll) + " " + quote(kAll) + " --internal " + script + " --top 1000");
  EXPECT_EQ(keys(diff["rows"]).find(script), std::string::npos);

  auto info = memrec("info " + quote(kAll));
  auto info_internal = memrec("info " + quote(kAll) + " --internal " + script);
  EXPECT_NE(info.output.find(script), std::string::npos);
  EXPECT_EQ(info_internal.output.find(script), std::string::npos) << info_internal.output;

  TempDir dir;
  auto report = memrec("report " + quote(kAll) + " --no-screenshot --internal " + script + " -o " + quote(dir / "r.html"));
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::ifstream in(dir / "r.html");
  std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("Top allocation sites"), std::string::npos);
  EXPECT_EQ(html.find(script), std::string::npos);
}

// MEMREC_INTERNAL keeps "::" inside a pattern: a namespace prefix, here the recorded workload's own.
TEST(CliSites, EnvironmentPatternsKeepNamespaces) {
  auto plain = json_of("stats " + quote(kRecording) + " --by stack --top 5");
  auto hidden = json_of("stats " + quote(kRecording) + " --by stack --top 5", "MEMREC_INTERNAL='memrec::workloads:::/nowhere/'");
  size_t before = 0;
  for (const auto& row : plain["live"]) before += row.value("site", "").starts_with("memrec::workloads::");
  EXPECT_GT(before, 0u);
  for (const auto& row : hidden["live"]) EXPECT_FALSE(row.value("site", "").starts_with("memrec::workloads::")) << row["key"];
}

// PyTorch's snapshot has no phase scopes: --by phase shows the phases the frames infer, not one "<none>" row.
TEST(CliSites, PhasesOfAPyTorchSnapshot) {
  for (const std::string& file : {kAll, kPython}) {
    auto j = json_of("stats " + quote(file) + " --by phase --top 10");
    std::set<std::string> keys;
    uint64_t total = 0;
    for (const auto& row : j["live"]) keys.insert(row["key"].get<std::string>()), total += row["bytes"].get<uint64_t>();
    EXPECT_TRUE(keys.contains("forward")) << j["live"];
    EXPECT_EQ(total, j["at"]["allocated"].get<uint64_t>());
  }
}

}  // namespace
}  // namespace memrec
