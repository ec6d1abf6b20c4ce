// --range T1..T2 and --steps A..B on stats, diff, export and report: each reads the same part of a real recording,
// says so once, and a bad range fails with one sentence. export --range writes a pickle memory_viz can draw, whose
// segments hold the blocks allocated before the range.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/format.h"
#include "memrec/range.h"

namespace memrec {
namespace {

using test::quote;
using test::TempDir;

// tests/data/alloc_default.memrec (a CUDA recording of examples/train.py, 10 steps) written by this memrec, so that
// it carries the index.
std::string indexed_recording(const TempDir& dir) {
  std::string path = dir / "run.memrec";
  write_file(read_file(test::data("alloc_default.memrec")), path);
  return path;
}

TEST(CliRange, StatsReadsThePartAndSaysSo) {
  TempDir dir;
  std::string run = indexed_recording(dir);
  auto r = test::memrec("stats " + quote(run) + " --steps 4..5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t json = r.output.find('{');
  ASSERT_NE(json, std::string::npos) << r.output;
  EXPECT_EQ(r.output.substr(0, json).find("memrec: note: " + run + ": only --steps 4..5 was read"), 0u) << r.output;
  nlohmann::json stats = nlohmann::json::parse(r.output.substr(json));
  Snapshot part = cut_range(read_file(run), *parse_range("", "4..5"), run);
  EXPECT_EQ(stats["events"].get<uint64_t>(), part.events.size());
  EXPECT_LT(part.events.size(), read_file(run).events.size() / 3);
}

TEST(CliRange, DiffComparesTheSamePartOfTwoRuns) {
  TempDir dir;
  std::string a = indexed_recording(dir), b = dir / "other.memrec";
  write_file(read_file(test::data("alloc_split64.memrec")), b);
  auto r = test::memrec("diff " + quote(a) + " " + quote(b) + " --range 2s..3s");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("only --range 2s..3s was read"), std::string::npos) << r.output;
}

// memory_viz draws every row of the exported range (tests/scripts/memory_viz_replay.py); its segments, the state
// at the range's end, hold blocks that no entry of its trace allocated: those allocated before the range.
TEST(CliRange, ExportWritesAPickleOfThePart) {
  TempDir dir;
  std::string run = indexed_recording(dir), out = dir / "part.pickle";
  auto r = test::memrec("export " + quote(run) + " --steps 6..6 -o " + quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto check = test::run_command(fmt::format("python3 {} {}", quote(test::source("tests/scripts/memory_viz_replay.py")),
                                             quote(out)));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  auto facts = test::run_command(fmt::format(R"(python3 -c "
import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
allocated = {{e['addr'] for e in d['device_traces'][0] if e['action'] == 'alloc'}}
before = [b for s in d['segments'] for b in s['blocks']
          if b['state'] == 'active_allocated' and b['address'] not in allocated]
print(len(d['device_traces'][0]), len(before))
" {})", quote(out)));
  ASSERT_EQ(facts.exit_code, 0) << facts.output;
  size_t entries = 0, before = 0;
  ASSERT_EQ(std::sscanf(facts.output.c_str(), "%zu %zu", &entries, &before), 2) << facts.output;
  EXPECT_EQ(entries, cut_range(read_file(run), *parse_range("", "6..6"), run).events.size());
  EXPECT_GT(before, 10u) << "the parameters and optimizer state, allocated before step 6";
}

TEST(CliRange, ReportOfThePart) {
  TempDir dir;
  std::string run = indexed_recording(dir), out = dir / "part.html";
  auto r = test::memrec("report " + quote(run) + " --steps 2..3 --no-screenshot -o " + quote(out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(test::read_bytes(out).find("only --steps 2..3 was read"), std::string::npos);
}

TEST(CliRange, BadRangesSayWhyInOneSentence) {
  TempDir dir;
  std::string run = indexed_recording(dir);
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {
           Case{"stats " + quote(run) + " --range 10ms", "--range wants T1..T2, two times after the start with T1 "
                                                         "before T2 (e.g. 10ms..25ms), got '10ms'"},
           Case{"export " + quote(run) + " --steps 5..2 -o " + quote(dir / "x.pickle"),
                "--steps wants A..B, two step numbers with A at most B (e.g. 3..5), got '5..2'"},
           Case{"stats " + quote(run) + " --range 1s..2s --steps 1..2",
                "--range and --steps both choose the part to read: give one of them"},
           Case{"stats " + quote(run) + " --steps 40..41", "asks for step 40, and the recording has steps 0 to 10"},
           Case{"stats " + quote(run) + " " + quote(run) + " --by rank --steps 1..2",
                "--steps 1..2 reads a part of one file; --by rank compares the ranks' whole runs"},
       }) {
    auto r = test::memrec(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << ": " << r.output;
  }
}

}  // namespace
}  // namespace memrec
