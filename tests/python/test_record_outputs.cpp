// `memrec record`'s outputs: checked before the program runs, in the format their name says, and honest about
// what each process left (cut short, nothing recorded, a Python that cannot load memrec).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/process.h"
#include "memrec/load.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;
using test::quote;
using test::read_bytes;
using test::run_command;
using test::TempDir;

const std::string kMemrec = MEMREC_BINARY;
const std::string kPython = MEMREC_TEST_PYTHON;

// A Python program that allocates on the CPU, then runs `ending` (its last statement), written to dir/prog.py.
std::string program(const TempDir& dir, const std::string& ending = "") {
  std::string path = dir / "prog.py";
  std::ofstream(path) << "import os, signal, time, torch\n"
                         "open(os.path.join(os.path.dirname(__file__), 'ran'), 'w').close()\n"
                         "xs = [torch.ones(1000 * (i + 1)) for i in range(20)]\n"
                      << ending << "\n";
  return kPython + " " + quote(path);
}

test::CommandResult record(const std::string& options, const std::string& command) {
  return run_command(quote(kMemrec) + " record " + options + " -- " + command);
}

TEST(RecordOutputs, AnExistingOutputIsRefusedBeforeTheProgramRunsUnlessForced) {
  TempDir dir;
  std::string out = dir / "run.memrec";
  std::ofstream(out) << "precious";
  auto r = record("-o " + quote(out), program(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("exists"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
  EXPECT_EQ(read_bytes(out), "precious");
  EXPECT_FALSE(fs::exists(dir / "ran")) << "the program ran";

  r = record("--force -o " + quote(out), program(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(load_snapshot(out).events.size(), 20u);
}

TEST(RecordOutputs, TheRunningScriptIsNeverTheOutput) {
  TempDir dir;
  std::string script = dir / "train.py";
  std::ofstream(script) << "print('trained')\n";
  std::string before = read_bytes(script);
  auto r = record("-o " + quote(script), kPython + " " + quote(script));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(read_bytes(script), before);
  EXPECT_EQ(r.output.find("trained"), std::string::npos) << r.output;
}

TEST(RecordOutputs, AFolderIsRefused) {
  TempDir dir;
  fs::create_directory(dir / "adir");
  auto r = record("-o " + quote(dir / "adir"), program(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is a directory"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "ran"));
  EXPECT_TRUE(fs::is_empty(dir / "adir"));
}

// As root every folder is writable, so the check runs as nobody there.
TEST(RecordOutputs, AFolderTheUserCannotWriteToIsRefusedBeforeTheProgramRuns) {
  TempDir dir;
  fs::permissions(dir.path, fs::perms::all, fs::perm_options::add);  // nobody may write the program's marker
  fs::create_directory(dir / "ro");
  fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read |
                                  fs::perms::others_exec);
  std::string as_user = geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  std::string prog = dir / "touch.py";
  std::ofstream(prog) << "open(" << quote(dir / "ran") << ", 'w').close()\n";
  auto r = run_command(as_user + quote(kMemrec) + " record -o " + quote(dir / "ro/run.memrec") + " -- " + kPython +
                       " " + quote(prog));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is not writable"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "ran")) << "the program ran";
}

TEST(RecordOutputs, APickleNameGetsAPickle) {
  TempDir dir;
  std::string out = dir / "x.pickle";
  auto r = record("-o " + quote(out), program(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string bytes = read_bytes(out);
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(uint8_t(bytes[0]), 0x80) << "not a pickle";
  EXPECT_GE(load_snapshot(out).events.size(), 20u);
  for (const auto& entry : fs::directory_iterator(dir.path))  // nothing left behind but the program's files
    EXPECT_TRUE(entry.path().filename() == "x.pickle" || entry.path().filename() == "prog.py" ||
                entry.path().filename() == "ran") << entry.path();
}

TEST(RecordOutputs, AnUnknownExtensionIsRefused) {
  TempDir dir;
  auto r = record("-o " + quote(dir / "important.txt"), program(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(".memrec"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "ran"));
}

TEST(RecordOutputs, OsExitKeepsAWholeFile) {
  TempDir dir;
  std::string out = dir / "run.memrec";
  auto r = record("-o " + quote(out), program(dir, "os._exit(3)"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  Snapshot s = load_snapshot(out);
  EXPECT_TRUE(s.complete) << r.output;
  EXPECT_GE(s.events.size(), 20u);
  EXPECT_EQ(r.output.find("cut short"), std::string::npos) << r.output;
}

TEST(RecordOutputs, AKilledProcessIsReportedCutShortWithTheEventsKept) {
  TempDir dir;
  std::string out = dir / "run.memrec";
  // The program kills itself once the test saw the recorder flush its allocations to disk.
  std::string kill_when_told = "while not os.path.exists(" + quote(dir / "flushed") + "): time.sleep(0.01)\n"
                               "os.kill(os.getpid(), signal.SIGKILL)";
  program(dir, kill_when_told);
  test::Child child({kMemrec, "record", "-o", out, "--", kPython, dir / "prog.py"}, dir / "log");
  test::wait_for_events_on_disk(dir.path, "run", 20);
  std::ofstream(dir / "flushed").close();
  EXPECT_EQ(child.wait(std::chrono::seconds(60)), 128 + SIGKILL);
  std::string log = read_bytes(dir / "log");
  Snapshot s = load_snapshot(out);
  EXPECT_FALSE(s.complete);
  EXPECT_NE(log.find("cut short"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(s.events.size()) + " events kept"), std::string::npos) << log;
}

TEST(RecordOutputs, AProcessThatRecordedNothingLeavesNoFile) {
  TempDir dir;
  std::string out = dir / "run.memrec";
  auto r = record("-o " + quote(out), kPython + " -c 'import os, signal, torch; os.kill(os.getpid(), signal.SIGKILL)'");
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  EXPECT_NE(r.output.find("not written: the process recorded no allocations"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 0) << r.output;
}

TEST(RecordOutputs, PythonOptionsThatKeepMemrecOutAreNamed) {
  TempDir dir;
  for (const char* option : {"-I", "-E", "-S"}) {  // -S also hides torch from Debian's Python: it then fails alone too
    std::string command = kPython + " " + option + " -c 'import torch'";
    auto r = record("-o " + quote(dir / "run.memrec"), command);
    EXPECT_EQ(r.exit_code, run_command(command).exit_code) << option << ": " << r.output;
    EXPECT_NE(r.output.find(std::string(option) + " keeps Python from loading memrec"), std::string::npos)
        << option << ": " << r.output;
    EXPECT_EQ(r.output.find("no process imported torch"), std::string::npos) << r.output;
  }
}

TEST(RecordOutputs, NegativeMaxEventsIsRefused) {
  TempDir dir;
  auto r = record("--max-events -5 -o " + quote(dir / "run.memrec"), program(dir));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--max-events"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "ran"));
}

}  // namespace
}  // namespace memrec
