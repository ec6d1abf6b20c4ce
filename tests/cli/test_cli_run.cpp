// `memrec run` through the memrec binary: memrec links no libtorch and execs memrec-run; flag errors are one
// sentence; outputs and flags are checked before any work; its help gives this machine's defaults.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>

#include "common/process.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;
using test::CommandResult;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kFixture = test::data("torch_2layer_all.pickle");

using test::memrec;

bool run_built() { return memrec("--help").output.find("(unavailable: libtorch") == std::string::npos; }

// Exactly this one line, and a failing exit code.
void expect_error(const CommandResult& r, const std::string& sentence) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "memrec: error: " + sentence + "\n");
}

TEST(CliRun, MemrecLinksNoLibtorch) {
  auto r = run_command("ldd " + quote(MEMREC_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("libc.so"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("libtorch"), std::string::npos) << r.output;
}

// The start-up target for a small file is 40 MB (a memrec that loads libtorch takes 165 MB). Measured by a
// python3 parent, whose only child is memrec, so no other process's peak counts.
TEST(CliRun, InfoOfASmallFileStaysUnder40MB) {
#ifdef MEMREC_TEST_ASAN
  GTEST_SKIP() << "ASan's shadow memory and quarantine count in the RSS";
#endif
  TempDir dir;
  ASSERT_EQ(memrec("import " + quote(kFixture) + " -o " + quote(dir / "small.memrec")).exit_code, 0);
  auto r = run_command("python3 -c 'import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
                       "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' " +
                       quote(MEMREC_BINARY) + " info " + quote(dir / "small.memrec"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(std::stol(r.output), 40 * 1024) << "peak RSS in KB";
}

TEST(CliRun, RangeErrorsAreOneSentenceForEveryCommand) {
  expect_error(memrec("stats " + quote(kFixture) + " --top 0"), "--top must be an integer from 1 to 100000 (got 0)");
  if (!run_built()) GTEST_SKIP() << "memrec run is not in this build";
  expect_error(memrec("run transformer --layers 0"), "--layers must be a positive integer (got 0)");
  expect_error(memrec("run transformer --layers abc"), "--layers must be a positive integer (got abc)");
  expect_error(memrec("run transformer --warmup -1"), "--warmup must be a non-negative integer (got -1)");
  expect_error(memrec("run transformer --max-events -3"), "--max-events must be a non-negative integer (got -3)");
  expect_error(memrec("run transformer --buffer-mb 0"), "--buffer-mb must be a positive number (got 0)");
}

TEST(CliRun, ItsOwnAllocationFailureIsOneSentence) {
  if (!run_built()) GTEST_SKIP() << "memrec run is not in this build";
  TempDir dir;
  auto r = memrec("run transformer --device cpu --buffer-mb 1e9 -o " + quote(dir / "run.memrec"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("config: transformer"), std::string::npos) << r.output;  // stdout, before the buffer
  EXPECT_NE(r.output.find("memrec: error: not enough host memory for the recorder's event buffer (--buffer-mb "
                          "1e+09): ask for less with --buffer-mb\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run.memrec"));
}

// The checks come before the model is built: nothing printed about the run, nothing written.
TEST(CliRun, OutputsAreCheckedBeforeTheRun) {
  if (!run_built()) GTEST_SKIP() << "memrec run is not in this build";
  TempDir dir;
  const std::string run = "run transformer --device cpu --layers 1 --steps 1 -o " + quote(dir / "a.memrec");
  expect_error(memrec(run + " --pickle " + quote(dir / "none/a.pickle")),
               "cannot write " + dir / "none/a.pickle" + " (--pickle): folder " + dir / "none" + " does not exist");
  expect_error(memrec(run + " --pickle " + quote(dir / "a.memrec")),
               "-o and --pickle name the same file (" + dir / "a.memrec" + "): give each its own");
  auto relative = run_command("cd " + quote(dir.path) + " && " + quote(MEMREC_BINARY) +
                              " run mlp --device cpu --layers 1 --steps 1 -o ./b.memrec --pickle b.memrec");
  expect_error(relative, "-o and --pickle name the same file (b.memrec): give each its own");
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(CliRun, MlpRefusesHeads) {
  if (!run_built()) GTEST_SKIP() << "memrec run is not in this build";
  TempDir dir;
  expect_error(memrec("run mlp --device cpu --layers 1 --steps 1 --heads 2 -o " + quote(dir / "a.memrec")),
               "--heads is for the transformer: the mlp has no attention");
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(CliRun, HelpShowsThisMachinesDefaultsAndEverySize) {
  ASSERT_NE(memrec("--help").output.find("\n  run "), std::string::npos);
  if (!run_built()) GTEST_SKIP() << "memrec run is not in this build";
  auto r = memrec("run --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Usage: " + std::string(MEMREC_BINARY) + " run [OPTIONS] workload"), std::string::npos)
      << r.output;
  const bool cuda = r.output.find("where the auto device is CUDA") != std::string::npos;
  ASSERT_TRUE(cuda || r.output.find("where the auto device is the CPU") != std::string::npos) << r.output;
  for (auto [flag, on_cuda, on_cpu] : {std::tuple{"--d-model", 1024, 256}, {"--heads", 16, 4}, {"--ff", 4096, 1024},
                                       {"--seq", 256, 64}, {"--batch", 16, 8}, {"--steps", 5, 3}}) {
    const std::string line = r.output.substr(r.output.find(std::string("  ") + flag + " "));
    const std::string first = line.substr(0, line.find('\n'));
    EXPECT_NE(first.find(":POSITIVE=" + std::to_string(cuda ? on_cuda : on_cpu) + " "), std::string::npos) << first;
    EXPECT_NE(first.find("(CUDA " + std::to_string(on_cuda) + ", CPU " + std::to_string(on_cpu) + ")"),
              std::string::npos)
        << first;
  }
  EXPECT_NE(r.output.find("--layers INT:POSITIVE=12    layers (blocks) in the model"), std::string::npos) << r.output;
}

// Without memrec-run beside it, `memrec run` says what it is missing.
TEST(CliRun, RunNeedsMemrecRunBesideMemrec) {
  if (!run_built()) GTEST_SKIP() << "memrec run is not in this build";
  TempDir dir;
  fs::copy_file(MEMREC_BINARY, dir / "memrec");
  fs::permissions(dir / "memrec", fs::perms::owner_exec, fs::perm_options::add);
  auto r = run_command(quote(dir / "memrec") + " run transformer --device cpu -o " + quote(dir / "a.memrec"));
  expect_error(r, "'memrec run' needs " + dir / "memrec-run" + " beside memrec: No such file or directory");
}

}  // namespace
}  // namespace memrec
