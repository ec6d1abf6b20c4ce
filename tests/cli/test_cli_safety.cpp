// No command overwrites its input: an output that is an input (the same path, a symbolic or a hard link) or
// another output is refused before any work, with one clear error, and every file stays byte for byte as it was.
// Export's format follows -o's extension or is asked for; write errors name the file the user gave.
#include <gtest/gtest.h>

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


size_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

// A recording and its pickle in a fresh folder.
struct Inputs {
  TempDir dir;
  std::string memrec_file = dir / "run.memrec", pickle = dir / "run.pickle";
  Inputs() {
    fs::copy_file(kFixture, pickle);
    EXPECT_EQ(memrec("import " + quote(pickle) + " -o " + quote(memrec_file)).exit_code, 0);
  }
};

void expect_refused(const std::string& args, const std::string& input, const std::string& why = "refusing to overwrite") {
  SCOPED_TRACE(args);
  const std::string before = read_bytes(input);
  CommandResult r = memrec(args);
  EXPECT_GT(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
  EXPECT_EQ(lines(r.output), 1u) << r.output;
  EXPECT_EQ(read_bytes(input), before);
}

TEST(CliSafety, OutputThatIsTheInputIsRefused) {
  Inputs in;
  const std::string m = quote(in.memrec_file), p = quote(in.pickle);
  expect_refused("export " + m + " --format pickle -o " + m, in.memrec_file);
  expect_refused("export " + m + " --format perfetto -o " + m, in.memrec_file);
  expect_refused("export " + p + " -o " + p, in.pickle);
  expect_refused("import " + p + " -o " + p, in.pickle);
  expect_refused("report " + m + " --no-screenshot -o " + m, in.memrec_file);
}

TEST(CliSafety, ViewScreenshotOverTheInputIsRefused) {
  Inputs in;
  const std::string before = read_bytes(in.memrec_file);
  CommandResult r = memrec("view " + quote(in.memrec_file) + " --screenshot " + quote(in.memrec_file));
  EXPECT_GT(r.exit_code, 0) << r.output;
  if (r.output.find("built without") == std::string::npos)
    EXPECT_NE(r.output.find("refusing to overwrite"), std::string::npos) << r.output;
  EXPECT_EQ(read_bytes(in.memrec_file), before);
}

TEST(CliSafety, LinksToTheInputAreRefused) {
  Inputs in;
  fs::create_symlink(in.memrec_file, in.dir / "soft.pickle");
  fs::create_hard_link(in.memrec_file, in.dir / "hard.pickle");
  fs::create_directory(in.dir / "sub");
  for (std::string out : {in.dir / "soft.pickle", in.dir / "hard.pickle", in.dir / "sub/../run.memrec"})
    expect_refused("export " + quote(in.memrec_file) + " -o " + quote(out), in.memrec_file);
  expect_refused("report " + quote(in.dir / "soft.pickle") + " --no-screenshot -o " + quote(in.memrec_file),
                 in.memrec_file);
}

TEST(CliSafety, ReportScreenshotIsAnInputToo) {
  Inputs in;
  std::ofstream(in.dir / "shot.png", std::ios::binary) << "\x89PNG\r\n\x1a\n";
  expect_refused("report " + quote(in.memrec_file) + " --screenshot " + quote(in.dir / "shot.png") + " -o " +
                     quote(in.dir / "shot.png"),
                 in.dir / "shot.png");
}

TEST(CliSafety, ExportFormatFollowsTheExtension) {
  Inputs in;
  ASSERT_EQ(memrec("export " + quote(in.memrec_file) + " -o " + quote(in.dir / "out.json")).exit_code, 0);
  EXPECT_EQ(read_bytes(in.dir / "out.json").substr(0, 1), "{");
  ASSERT_EQ(memrec("export " + quote(in.memrec_file) + " -o " + quote(in.dir / "out.pkl")).exit_code, 0);
  EXPECT_EQ(read_bytes(in.dir / "out.pkl").substr(0, 1), "\x80");
  CommandResult r = memrec("export " + quote(in.memrec_file) + " -o " + quote(in.dir / "out.bin"));
  EXPECT_GT(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--format"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(in.dir / "out.bin"));
}

TEST(CliSafety, MissingFolderFailsBeforeWork) {
  Inputs in;
  CommandResult r = memrec("export " + quote(in.memrec_file) + " -o " + quote(in.dir / "no/such/out.pickle"));
  EXPECT_GT(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  EXPECT_EQ(lines(r.output), 1u) << r.output;
}

// A write that fails names the file asked for and the system's reason, never the temporary file.
TEST(CliSafety, WriteErrorsNameTheFileAndTheReason) {
  Inputs in;
  const std::string full_disk = "trap \"\" XFSZ; ulimit -f 8;";
  struct Case {
    std::string args, out;
  };
  for (const Case& c : {Case{"import " + quote(in.pickle) + " -o ", in.dir / "big.memrec"},
                        Case{"export " + quote(in.memrec_file) + " -o ", in.dir / "big.pickle"},
                        Case{"export " + quote(in.memrec_file) + " -o ", in.dir / "big.json"},
                        Case{"report " + quote(in.memrec_file) + " --no-screenshot -o ", in.dir / "big.html"}}) {
    SCOPED_TRACE(c.args);
    CommandResult r = memrec_limited(c.args + quote(c.out), full_disk);
    EXPECT_GT(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(c.out), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find(".partial"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(c.out));
  }
}

}  // namespace
}  // namespace memrec
