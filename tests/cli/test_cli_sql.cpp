// memrec export --format sqlite, queried with the sqlite3 command: the queries of docs/sql.md, run as the doc gives
// them, answer what `memrec stats --json` says of the same real recordings.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/format.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::memrec;
using test::quote;
using test::TempDir;

// A recording of each kind: memrec's own (with owners, and with the CUDA allocator's segments) and PyTorch's pickle.
// adam_mlp_cpu.memrec is `memrec record` of tests/scripts/adam_mlp.py on the CPU (Debian's torch 1.13, at 469f2e6).
const std::vector<std::string> kRuns = {test::data("adam_mlp_cpu.memrec"), test::data("alloc_default.memrec"),
                                        test::data("torch_2layer_all.pickle")};

json stats_json(const std::string& run, const std::string& args) {
  auto r = memrec("stats " + quote(run) + " --json --top 100000 " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output);
}

// `text` as one shell word, whatever quotes it holds.
std::string shell_word(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The rows sqlite3 prints for `sql`, as JSON objects.
json query(const std::string& db, const std::string& sql) {
  auto r = test::run_command("sqlite3 -json " + quote(db) + " " + shell_word(sql));
  EXPECT_EQ(r.exit_code, 0) << sql << "\n" << r.output;
  return r.output.empty() ? json::array() : json::parse(r.output);
}

// The ```sql blocks of docs/sql.md, in order: peak, sites at the peak, blocks at an instant, owners, kernels.
std::vector<std::string> doc_queries() {
  std::ifstream in(test::source("docs/sql.md"));
  std::string text{std::istreambuf_iterator<char>(in), {}};
  std::vector<std::string> out;
  std::regex block("```sql\n([^`]*)```");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), block); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << text;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

struct Exported {
  TempDir dir;
  std::string db;
  explicit Exported(const std::string& run) : db(dir / "run.db") {
    auto r = memrec("export " + quote(run) + " -o " + quote(db));
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
};

// key -> {bytes, count} of stats' live rows, and of a query's rows (key column named `key`, NULL as "<none>").
using Groups = std::map<std::string, std::pair<uint64_t, uint64_t>>;
Groups stats_groups(const json& stats) {
  Groups out;
  for (const json& row : stats["live"]) out[row["key"]] = {row["bytes"], row["count"]};
  return out;
}
Groups query_groups(const json& rows, const std::string& key, const std::string& bytes = "bytes",
                    const std::string& count = "blocks") {
  Groups out;
  for (const json& row : rows) out[row[key].is_null() ? "<none>" : row[key].get<std::string>()] = {row[bytes], row[count]};
  return out;
}

TEST(CliSql, PeakAndCountsEqualStats) {
  const auto queries = doc_queries();
  ASSERT_EQ(queries.size(), 5u);
  for (const std::string& run : kRuns) {
    SCOPED_TRACE(run);
    Exported out(run);
    json stats = stats_json(run, "");
    json peak = query(out.db, queries[0]);
    ASSERT_EQ(peak.size(), 1u);
    EXPECT_EQ(peak[0]["allocated"], stats["peak_allocated"]["bytes"]);
    EXPECT_EQ(peak[0]["step"], stats["peak_allocated"]["event"]);
    EXPECT_EQ(peak[0]["since_start_ns"], stats["peak_allocated"]["time_ns"]);
    json reserved = query(out.db, "SELECT MAX(reserved) AS bytes FROM events WHERE device = 0");
    EXPECT_EQ(reserved[0]["bytes"], stats["peak_reserved"]["bytes"]);
    EXPECT_EQ(query(out.db, "SELECT COUNT(*) AS n FROM events WHERE device = 0")[0]["n"], stats["events"]);
    uint64_t recorded = 0;
    for (const json& bucket : stats["size_histogram"]) recorded += bucket["count"].get<uint64_t>();
    EXPECT_EQ(query(out.db, "SELECT COUNT(*) AS n FROM blocks WHERE device = 0 AND alloc_step >= 0")[0]["n"], recorded);
    json complete = query(out.db, "SELECT value FROM meta WHERE key = 'memrec.complete'");
    EXPECT_EQ(complete[0]["value"], stats["complete"].get<bool>() ? "1" : "0");
  }
}

TEST(CliSql, LiveBlocksGroupAsStatsGroupsThem) {
  const std::string sites_at_peak = doc_queries()[1];
  for (const std::string& run : kRuns) {
    SCOPED_TRACE(run);
    Exported out(run);
    EXPECT_EQ(query_groups(query(out.db, replaced(sites_at_peak, "LIMIT 10", "")), "site"),
              stats_groups(stats_json(run, "--by stack")));
    for (const char* by : {"op", "module", "phase", "category", "layer", "pool", "owner"}) {
      SCOPED_TRACE(by);
      std::string sql = replaced(replaced(replaced(sites_at_peak, "LIMIT 10", ""), "GROUP BY site", std::string("GROUP BY ") + by),
                                 "SELECT site", std::string("SELECT ") + by);
      EXPECT_EQ(query_groups(query(out.db, sql), by), stats_groups(stats_json(run, std::string("--by ") + by)));
    }
  }
}

TEST(CliSql, OwnersAtThePeakEqualStatsByOwner) {
  const std::string owners = doc_queries()[3];
  Exported out(kRuns[0]);
  Groups want = stats_groups(stats_json(kRuns[0], "--by owner"));
  ASSERT_GT(want.size(), 1u);  // this recording names its parameters, gradients and optimizer state
  EXPECT_EQ(query_groups(query(out.db, owners), "owner"), want);
  json kinds = query(out.db, "SELECT DISTINCT owner_kind FROM blocks WHERE owner_kind IS NOT NULL ORDER BY 1");
  EXPECT_GE(kinds.size(), 2u) << kinds;
}

// The instant query with a time half-way through the run: its blocks are those live at stats --at's instant.
TEST(CliSql, BlocksAtAnInstantSumToStatsAllocated) {
  const std::string instant = doc_queries()[2];
  for (const std::string& run : kRuns) {
    SCOPED_TRACE(run);
    Exported out(run);
    int64_t half = stats_json(run, "")["duration_ns"].get<int64_t>() / 2;
    json stats = stats_json(run, "--at " + std::to_string(half) + "ns");
    json rows = query(out.db, replaced(replaced(instant, "1500000000", std::to_string(half)), "LIMIT 10", ""));
    uint64_t bytes = 0;
    for (const json& row : rows) bytes += row["requested_size"].get<uint64_t>();
    EXPECT_EQ(bytes, stats["at"]["allocated"]);
    ASSERT_FALSE(rows.empty());
    EXPECT_GE(rows.front()["requested_size"], rows.back()["requested_size"]);
  }
}

// No test recording holds kernels: a kernel that spans the allocated peak of a small history, one that ends before.
TEST(CliSql, KernelsRunningAtThePeak) {
  TempDir dir;
  Snapshot s;
  s.events = {{.time_ns = 100, .addr = 0x1000, .size = 4096, .action = Action::alloc},
              {.time_ns = 200, .addr = 0x1000, .size = 4096, .action = Action::free_requested}};
  s.kernels = {{.start_ns = 10, .end_ns = 50, .name = s.strings.intern("before")},
               {.start_ns = 90, .end_ns = 150, .name = s.strings.intern("gemm")}};
  write_file(s, dir / "k.memrec");
  Exported out(dir / "k.memrec");
  json rows = query(out.db, doc_queries()[4]);
  ASSERT_EQ(rows.size(), 1u) << rows;
  EXPECT_EQ(rows[0]["name"], "gemm");
  EXPECT_EQ(rows[0]["duration_ns"], 60);
}

// Every table of docs/sql.md is there and holds the recording's rows.
TEST(CliSql, RawTablesHoldTheRecording) {
  const std::string run = kRuns[0];
  Snapshot s = read_file(run);
  Exported out(run);
  auto count = [&](const std::string& table) {
    return query(out.db, "SELECT COUNT(*) AS n FROM " + table)[0]["n"].get<uint64_t>();
  };
  EXPECT_EQ(count("events"), s.events.size());
  EXPECT_EQ(count("frames"), s.frames.size());
  EXPECT_EQ(count("scopes"), s.scopes.size() - 1);
  EXPECT_EQ(count("kernels"), s.kernels.size());
  EXPECT_EQ(count("segments"), s.segments_end.size() + (s.has_segments_start ? s.segments_start.size() : 0));
  EXPECT_EQ(count("stacks"), s.stacks.frame_ids().size());
  EXPECT_EQ(query(out.db, "SELECT value FROM meta WHERE key = 'torch_version'")[0]["value"], s.metadata.at("torch_version"));
}

TEST(CliSql, NeverOverwritesTheInputAndReplacesAnOldOutput) {
  TempDir dir;
  std::filesystem::copy_file(kRuns[0], dir / "run.memrec");
  const std::string before = test::read_bytes(dir / "run.memrec");
  auto refused = memrec("export " + quote(dir / "run.memrec") + " --format sqlite -o " + quote(dir / "run.memrec"));
  EXPECT_GT(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("refusing to overwrite"), std::string::npos) << refused.output;
  EXPECT_EQ(test::read_bytes(dir / "run.memrec"), before);
  std::ofstream(dir / "old.db") << "an old export";
  auto r = memrec("export " + quote(dir / "run.memrec") + " -o " + quote(dir / "old.db"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(sqlite)"), std::string::npos) << r.output;
  EXPECT_EQ(query(dir / "old.db", "SELECT COUNT(*) AS n FROM events")[0]["n"], read_file(dir / "run.memrec").events.size());
}

// A full disk: one line naming the file and the system's reason, and no file left behind.
TEST(CliSql, FullDiskLeavesNoFile) {
  TempDir dir;
  auto r = test::memrec_limited("export " + quote(kRuns[0]) + " -o " + quote(dir / "big.db"),
                                "trap \"\" XFSZ; ulimit -f 8;");
  EXPECT_GT(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(dir / "big.db"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path));
}

}  // namespace
}  // namespace memrec
