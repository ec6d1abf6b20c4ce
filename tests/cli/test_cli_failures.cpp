// The memrec binary when the system says no: a full disk, paths that are directories or unreadable,
// device files as input, and a pickle bomb under a memory limit. Each must end in one clear error and a
// non-zero exit, and leave no partial output behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/process.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;
using test::CommandResult;
using test::memrec;
using test::memrec_limited;
using test::read_bytes;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kFixture = test::data("torch_2layer_all.pickle");


// Files may grow to `kib` KiB; a longer write fails with EFBIG instead of killing the process with SIGXFSZ.
std::string disk_full_after(int kib) { return "trap \"\" XFSZ; ulimit -f " + std::to_string(kib) + ";"; }

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }


// One clear line on stderr naming the cause, a non-zero exit, no crash.
void expect_clean_failure(const CommandResult& r, const std::string& cause) {
  EXPECT_GT(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(cause), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CliFailures, FullDiskDuringImportLeavesNoFile) {
  TempDir dir;
  auto r = memrec_limited("import " + quote(kFixture) + " -o " + quote(dir / "run.memrec"), disk_full_after(8));
  expect_clean_failure(r, "File too large");
  EXPECT_TRUE(names_in(dir.path.string()).empty());  // neither run.memrec nor its temporary
}

TEST(CliFailures, FullDiskDuringExportLeavesNoFile) {
  TempDir dir;
  ASSERT_EQ(memrec("import " + quote(kFixture) + " -o " + quote(dir / "run.memrec")).exit_code, 0);
  for (std::string format : {"pickle", "perfetto"}) {
    SCOPED_TRACE(format);
    auto r = memrec_limited("export " + quote(dir / "run.memrec") + " --format " + format + " -o " + quote(dir / "out"),
                    disk_full_after(8));
    EXPECT_GT(r.exit_code, 0) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(names_in(dir.path.string()), (std::vector<std::string>{"run.memrec", "run.memrec.summary.json"}));
  }
}

TEST(CliFailures, FailedWriteKeepsTheOldOutput) {
  TempDir dir;
  write(dir / "run.memrec", "the previous recording");
  auto r = memrec_limited("import " + quote(kFixture) + " -o " + quote(dir / "run.memrec"), disk_full_after(8));
  expect_clean_failure(r, "File too large");
  EXPECT_EQ(read_bytes(dir / "run.memrec"), "the previous recording");
}

TEST(CliFailures, OutputThatIsADirectoryIsRefused) {
  TempDir dir;
  fs::create_directory(dir / "out");
  expect_clean_failure(memrec("import " + quote(kFixture) + " -o " + quote(dir / "out")), "is a directory");
  EXPECT_TRUE(fs::is_directory(dir / "out"));
  EXPECT_TRUE(names_in(dir / "out").empty());
  EXPECT_EQ(names_in(dir.path.string()), std::vector<std::string>{"out"});
}

TEST(CliFailures, UnreadableInputIsAClearError) {
  TempDir dir;
  fs::copy_file(kFixture, dir / "run.pickle");
  ASSERT_EQ(chmod((dir / "run.pickle").c_str(), 0), 0);
  if (access((dir / "run.pickle").c_str(), R_OK) == 0) GTEST_SKIP() << "running as root: mode 000 stays readable";
  expect_clean_failure(memrec("info " + quote(dir / "run.pickle")), "cannot open " + dir / "run.pickle");
  expect_clean_failure(memrec("import " + quote(dir / "run.pickle") + " -o " + quote(dir / "x.memrec")),
                       "Permission denied");
  EXPECT_FALSE(fs::exists(dir / "x.memrec"));
}

TEST(CliFailures, InputThatIsADirectoryIsRefused) {
  TempDir dir;
  for (std::string cmd : {"info ", "export ", "import "}) {
    auto r = memrec(cmd + quote(dir.path.string()) + " -o " + quote(dir / "x"));
    EXPECT_GT(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("directory"), std::string::npos) << r.output;
    EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 2) << r.output;
  }
  EXPECT_TRUE(names_in(dir.path.string()).empty());
}

TEST(CliFailures, DevNullInputIsAnEmptyFile) {
  TempDir dir;
  expect_clean_failure(memrec("info /dev/null"), "neither a .memrec file nor a pickle");
  expect_clean_failure(memrec("import /dev/null -o " + quote(dir / "x.memrec")), "no PROTO");
  EXPECT_TRUE(names_in(dir.path.string()).empty());
}

// 2^60 leaves from 60 memoized lists, each [previous, previous]: 500 bytes that would expand to exabytes.
std::string memo_bomb() {
  std::string p = "\x80\x04" "]\x94" "0";  // [] as memo 0
  for (char i = 1; i <= 60; ++i) p += std::string("(h") + char(i - 1) + "h" + char(i - 1) + "l\x94" "0";
  return p + "}(\x8c\x08segments]\x8c\x0d" "device_traces]\x8c\x12" "allocator_settings" "h" + char(60) + "u.";
}

TEST(CliFailures, PickleBombStaysWithinAMemoryLimit) {
#ifdef MEMREC_TEST_ASAN
  GTEST_SKIP() << "ASan reserves terabytes of address space: no ulimit -v fits it";
#endif
  TempDir dir;
  write(dir / "bomb.pickle", memo_bomb());
  const std::string limit = "ulimit -v 1000000;";  // 1 GB of address space
  expect_clean_failure(memrec_limited("info " + quote(dir / "bomb.pickle"), limit), "expand beyond");
  expect_clean_failure(memrec_limited("import " + quote(dir / "bomb.pickle") + " -o " + quote(dir / "x.memrec"), limit),
                       "expand beyond");
  EXPECT_EQ(names_in(dir.path.string()), std::vector<std::string>{"bomb.pickle"});
}

// 3 GB that start like no pickle (or a pickle of an unknown protocol), as a sparse file: refused from their first
// bytes, within 1 GB of address space, not after reading them whole.
TEST(CliFailures, ALargeFileThatIsNoPickleIsRefusedFromItsFirstBytes) {
#ifdef MEMREC_TEST_ASAN
  GTEST_SKIP() << "ASan reserves terabytes of address space: no ulimit -v fits it";
#endif
  TempDir dir;
  write(dir / "big.bin", "BIG DATA");
  write(dir / "big.pickle", "\x80\x09");
  for (const char* name : {"big.bin", "big.pickle"}) fs::resize_file(dir / name, 3'000'000'000);
  const std::string limit = "ulimit -v 1000000;";
  expect_clean_failure(memrec_limited("import " + quote(dir / "big.bin") + " -o " + quote(dir / "x.memrec"), limit), "no PROTO");
  expect_clean_failure(memrec_limited("import " + quote(dir / "big.pickle") + " -o " + quote(dir / "x.memrec"), limit),
                       "protocol 9");
  expect_clean_failure(memrec_limited("info " + quote(dir / "big.pickle"), limit), "protocol 9");
  EXPECT_EQ(names_in(dir.path.string()), (std::vector<std::string>{"big.bin", "big.pickle"}));
}

}  // namespace
}  // namespace memrec
