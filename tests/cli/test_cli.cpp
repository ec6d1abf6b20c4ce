// The memrec binary end to end: import/export/info on real PyTorch pickles, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/units.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::CommandResult;
using test::memrec;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kFixture = test::data("torch_2layer_all.pickle");


uint64_t python_peak(const std::string& pickle) {
  auto r = run_command("python3 " + quote(test::source("tests/scripts/replay_reference.py")) +
                       " " + quote(pickle));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output)[0]["allocated"].get<uint64_t>();
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// One clear line on stderr, a non-zero exit, no crash.
void expect_clean_failure(const CommandResult& r) {
  EXPECT_GT(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 3) << r.output;
}

TEST(Cli, InfoShowsThePeakOfARealPickle) {
  auto r = memrec("info " + quote(kFixture));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("peak allocated  " ), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(format_bytes(python_peak(kFixture))), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("alloc                     385"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("largest live allocations"), std::string::npos) << r.output;
}

TEST(Cli, ImportThenInfoAgrees) {
  TempDir dir;
  auto imported = memrec("import " + quote(kFixture) + " -o " + quote(dir / "run.memrec"));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  auto from_pickle = memrec("info " + quote(kFixture));
  auto from_memrec = memrec("info " + quote(dir / "run.memrec"));
  ASSERT_EQ(from_memrec.exit_code, 0) << from_memrec.output;
  EXPECT_EQ(from_pickle.output, from_memrec.output);
  EXPECT_LT(std::filesystem::file_size(dir / "run.memrec"), std::filesystem::file_size(kFixture) / 4);
}

TEST(Cli, ExportOpensInPythonWithTheSamePeak) {
  TempDir dir;
  ASSERT_EQ(memrec("import " + quote(kFixture) + " -o " + quote(dir / "run.memrec")).exit_code, 0);
  auto exported = memrec("export " + quote(dir / "run.memrec") + " -o " + quote(dir / "run.pickle"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(python_peak(dir / "run.pickle"), python_peak(kFixture));
}

// torch.compile's run (PyTorch 2.11) has split segments whose free blocks carry PyTorch's stale requested_size, one
// above its block's size: memory_viz's tools count size - requested_size as the block's gap, so it must not be negative.
TEST(Cli, ExportedBlocksRequestNoMoreThanTheirSize) {
  TempDir dir;
  const std::string compiled = test::data("torch_compile_graph.pickle");
  ASSERT_EQ(memrec("import " + quote(compiled) + " -o " + quote(dir / "run.memrec")).exit_code, 0);
  for (const std::string& input : {compiled, dir / "run.memrec"}) {
    auto exported = memrec("export " + quote(input) + " -o " + quote(dir / "out.pickle"));
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    auto r = run_command("/usr/bin/python3 -c " + quote(R"(import json, pickle, sys
blocks = [b for s in pickle.load(open(sys.argv[1], "rb"))["segments"] for b in s["blocks"]]
print(json.dumps({"inactive": sum(b["state"] == "inactive" for b in blocks),
                  "over": sum(b["requested_size"] > b["size"] for b in blocks)})))") + " " + quote(dir / "out.pickle"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto j = nlohmann::json::parse(r.output);
    EXPECT_GT(j["inactive"], 0) << input;
    EXPECT_EQ(j["over"], 0) << input;
  }
}

TEST(Cli, GarbageInputIsOneClearError) {
  TempDir dir;
  write(dir / "garbage.bin", "this is not a snapshot at all");
  expect_clean_failure(memrec("info " + quote(dir / "garbage.bin")));
  write(dir / "empty.bin", "");
  expect_clean_failure(memrec("info " + quote(dir / "empty.bin")));
  std::ifstream in(kFixture, std::ios::binary);
  std::string half(std::filesystem::file_size(kFixture) / 2, '\0');
  in.read(half.data(), static_cast<std::streamsize>(half.size()));
  write(dir / "half.pickle", half);
  expect_clean_failure(memrec("info " + quote(dir / "half.pickle")));
  expect_clean_failure(memrec("import " + quote(dir / "half.pickle") + " -o " + quote(dir / "x.memrec")));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.memrec"));
}

TEST(Cli, HostilePickleIsRejectedWithoutRunningAnything) {
  TempDir dir;
  std::string marker = dir / "pwned";
  // Protocol 0 GLOBAL + REDUCE calling os.system: the classic pickle exploit.
  write(dir / "evil.pickle", "\x80\x02" "cos\nsystem\n(S'touch " + marker + "'\ntR.");
  expect_clean_failure(memrec("info " + quote(dir / "evil.pickle")));
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(Cli, WrongFlagsAndPathsFailCleanly) {
  EXPECT_GT(memrec("info --no-such-flag " + quote(kFixture)).exit_code, 0);
  EXPECT_GT(memrec("info /no/such/file.memrec").exit_code, 0);
  EXPECT_GT(memrec("frobnicate").exit_code, 0);
  expect_clean_failure(memrec("import " + quote(kFixture) + " -o /no/such/dir/run.memrec"));
  expect_clean_failure(memrec("export " + quote(kFixture) + " -o /no/such/dir/run.pickle"));
}

}  // namespace
}  // namespace memrec
