// memrec top in a real terminal: tmux runs it in a 120x40 pane, the test types keys and reads the pane back.
// What it shows is checked against `memrec stats --json` and the replay of the same file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/format.h"
#include "memrec/replay.h"
#include "memrec/units.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

// A tmux server of the test's own (its own socket, no user config) running one command in a 120x40 pane. The
// command is followed by "EXITED <code>" so the pane says how it ended.
class Tmux {
 public:
  explicit Tmux(const std::string& command) {
    static int sessions = 0;
    socket_ = "memrec-test-" + std::to_string(getpid()) + "-" + std::to_string(++sessions);
    std::string shell = command + "; echo EXITED $?; sleep 60";
    auto r = run_command(tmux("new-session -d -x 120 -y 40 -s top " + quote(shell)));
    if (r.exit_code != 0) throw std::runtime_error("tmux failed: " + r.output);
  }
  ~Tmux() { run_command(tmux("kill-server")); }

  std::string pane() const { return run_command(tmux("capture-pane -p -t top")).output; }
  void keys(const std::string& keys) const { run_command(tmux("send-keys -t top " + keys)); }
  // The pane once it shows `text`; fails the test after 20 s.
  std::string wait_for(const std::string& text) const {
    for (int i = 0; i < 200; ++i) {
      std::string p = pane();
      if (p.find(text) != std::string::npos) return p;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "the pane never showed '" << text << "':\n" << pane();
    return pane();
  }

 private:
  std::string tmux(const std::string& args) const { return "tmux -f /dev/null -L " + socket_ + " " + args; }
  std::string socket_;
};

std::string top_command(const std::string& args) { return quote(MEMREC_BINARY) + " top " + args; }

nlohmann::json stats(const std::string& file, const std::string& args = "") {
  auto r = test::memrec("stats " + quote(file) + " --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

// The pane's line that starts with `prefix`, or "".
std::string line_of(const std::string& pane, const std::string& prefix) {
  std::istringstream in(pane);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(prefix)) return line;
  return "";
}

// The line saying which instant is shown: "at +1.505 s (event 1442), the allocated peak: ..."
std::string instant_line(const std::string& pane) { return line_of(pane, "at +"); }

// adam_mlp_cpu.memrec names its owners; transformer_2layer_cpu.memrec runs 4 s, so its writer flushed many chunks.
const std::string kOwners = test::data("adam_mlp_cpu.memrec");
const std::string kRun = test::data("transformer_2layer_cpu.memrec");

TEST(Top, ShowsThePeakStatsFindsAndStepsThroughTime) {
  nlohmann::json peak = stats(kOwners)["peak_allocated"];
  std::string peak_text = "peak " + format_bytes(peak["bytes"].get<uint64_t>());
  Tmux t(top_command(quote(kOwners)));
  std::string pane = t.wait_for(peak_text);
  EXPECT_NE(line_of(pane, "allocated").find(peak_text + " at +"), std::string::npos) << pane;
  EXPECT_NE(line_of(pane, "allocated").find("(event " + peak["event"].dump() + ")"), std::string::npos) << pane;
  EXPECT_NE(instant_line(pane).find("the allocated peak"), std::string::npos) << pane;
  // The largest group at the peak, by site, then by owner after `o`.
  auto first_row = [](const char* by) {  // the bytes of the largest group, right-aligned as the view prints them
    std::string bytes = format_bytes(stats(kOwners, std::string("--by ") + by)["live"][0]["bytes"].get<uint64_t>());
    return std::string(12 - bytes.size(), ' ') + bytes;
  };
  EXPECT_NE(pane.find("site at this instant\n" + first_row("stack")), std::string::npos) << pane;
  t.keys("o");
  pane = t.wait_for("owner at this instant");
  EXPECT_NE(pane.find("owner at this instant\n" + first_row("owner")), std::string::npos) << pane;

  // Five columns back in time: an earlier instant, whose allocated bytes are the replay's after that event.
  t.keys("Left Left Left Left Left");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  pane = t.pane();
  std::smatch m;
  std::string line = instant_line(pane);
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(\(event (\d+)\): (.+) allocated)"))) << pane;
  uint32_t step = std::stoul(m[1]);
  EXPECT_LT(step, peak["event"].get<uint32_t>());
  Snapshot s = read_file(kOwners);
  EXPECT_EQ(m[2], format_bytes(Replay(s, 0).after(step).allocated)) << line;
  t.keys("p");
  EXPECT_NE(instant_line(t.wait_for("the allocated peak")).find("(event " + peak["event"].dump() + ")"), std::string::npos);
  t.keys("q");
  t.wait_for("EXITED 0");
}

// The recording's bytes up to a chunk boundary that holds some of its events but not all, as a writer still running
// leaves it: the reader takes any prefix up to its last whole chunk, so one of the eighths does.
std::string part_of(const std::string& bytes, size_t& events) {
  size_t all = read_buffer({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}).events.size();
  for (size_t eighth = 4; eighth < 8; ++eighth) {
    std::string part = bytes.substr(0, bytes.size() * eighth / 8);
    events = read_buffer({reinterpret_cast<const uint8_t*>(part.data()), part.size()}).events.size();
    if (events > 0 && events < all) return part;
  }
  throw std::runtime_error("no prefix of the recording holds part of its events");
}

TEST(Top, FollowShowsTheFileAsItGrows) {
  test::TempDir dir;
  const std::string path = dir / "run.memrec", bytes = test::read_bytes(kRun);
  Tmux t(top_command("--follow " + quote(path)));
  t.wait_for("waiting for the file");
  size_t partial = 0;
  std::ofstream(path, std::ios::binary) << part_of(bytes, partial);
  std::string pane = t.wait_for(std::to_string(partial) + " events over");
  EXPECT_EQ(line_of(pane, "memrec top").find("the file is complete"), std::string::npos) << pane;
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes.substr(test::read_bytes(path).size());
  pane = t.wait_for(std::to_string(read_file(kRun).events.size()) + " events over");
  EXPECT_NE(line_of(pane, "memrec top").find("following (the file is complete)"), std::string::npos) << pane;
  EXPECT_NE(line_of(pane, "allocated").find("peak " + format_bytes(stats(kRun)["peak_allocated"]["bytes"].get<uint64_t>())),
            std::string::npos) << pane;
  t.keys("q");
  t.wait_for("EXITED 0");
}

// Eight steps of 1 MiB kept for ever, each beside a 1 MiB temporary, on a device of 100 MiB: step k starts with k MiB
// and peaks at k + 2 MiB, so at the slope the first step past 100 MiB is step 99.
TEST(Top, FollowShowsTheSlopeAcrossSteps) {
  test::TempDir dir;
  constexpr uint64_t kMiB = 1 << 20;
  Snapshot s;
  s.metadata["device.0.total_memory"] = std::to_string(100 * kMiB);
  std::vector<Scope> scopes{Scope{}};
  for (int64_t k = 0; k < 8; ++k) {
    int64_t t0 = 1000 + k * 1000;
    scopes.push_back(Scope{t0, t0 + 1000, s.strings.intern("step " + std::to_string(k)), 0, ScopeKind::step, 0});
    uint64_t temporary = 0x100000000ull + uint64_t(k) * 4 * kMiB, kept = temporary + 2 * kMiB;
    s.events.push_back(Event{.time_ns = t0 + 100, .addr = temporary, .size = kMiB, .action = Action::alloc});
    s.events.push_back(Event{.time_ns = t0 + 200, .addr = kept, .size = kMiB, .action = Action::alloc});
    s.events.push_back(Event{.time_ns = t0 + 300, .addr = temporary, .size = kMiB, .action = Action::free_requested});
  }
  s.scopes.assign(scopes);
  write_file(s, dir / "leak.memrec");
  Tmux t(top_command("--follow " + quote(dir / "leak.memrec")));
  std::string pane = t.wait_for("following (the file is complete)");
  EXPECT_EQ(line_of(pane, "growth across steps: "), "growth across steps: +1.00 MiB a step, full at step 99") << pane;
  t.keys("q");
  t.wait_for("EXITED 0");
}

TEST(Top, RefusesToRunWithoutATerminal) {
  auto r = test::memrec("top " + quote(kRun) + " < /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("draws in a terminal"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace memrec
