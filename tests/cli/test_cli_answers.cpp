// Every answer is right or an error: which device a command shows, what `--at` shows when the time is
// past the end or between events, and how `whatif --layers` names its layers.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/stats_output.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kAll = test::data("torch_2layer_all.pickle");

using test::memrec;

json json_of(const std::string& args) {
  auto r = memrec(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json::object();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// kAll as PyTorch writes a run on cuda:1: device_traces = [[], trace].
std::string on_device_1(const TempDir& dir) {
  std::string out = dir / "device1.pickle";
  auto r = run_command("/usr/bin/python3 " + quote(test::source("tests/scripts/on_device.py")) + " " +
                       quote(kAll) + " " + quote(out) + " 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

// Three transformer layers recorded on device 1 only: each layer's forward allocates a 1000-byte activation and a
// 100-byte output; the backward frees each layer's output and then its activation, last layer first.
std::string three_layers_on_device_1(const TempDir& dir) {
  Snapshot s;
  auto scope = [&](ScopeKind kind, const std::string& name, int64_t start, int64_t end, uint32_t parent) {
    s.scopes.push_back(Scope{start, end, s.strings.intern(name), parent, kind, 1});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  };
  auto event = [&](int64_t t, Action a, uint64_t addr, uint64_t size, uint32_t in) {
    s.events.push_back(Event{.time_ns = t, .addr = addr, .size = size, .scope = in, .action = a, .device = 1});
  };
  uint32_t forward = scope(ScopeKind::phase, "forward", 100, 400, 0);
  scope(ScopeKind::phase, "backward", 400, 700, 0);
  for (int l = 0; l < 3; ++l) {
    int64_t start = 100 + 100 * l;
    uint32_t layer = scope(ScopeKind::module, "layers." + std::to_string(l), start, start + 100, forward);
    event(start + 10, Action::alloc, 0x1000 * (l + 1), 1000, layer);
    event(start + 90, Action::alloc, 0x1000 * (l + 1) + 0x800, 100, layer);
  }
  auto free = [&](int64_t t, uint64_t addr, uint64_t size) {
    event(t, Action::free_requested, addr, size, 0);
    event(t, Action::free_completed, addr, size, 0);
  };
  for (int l = 2; l >= 0; --l) {
    int64_t start = 400 + 100 * (2 - l);
    free(start + 10, 0x1000 * (l + 1) + 0x800, 100);
    free(start + 50, 0x1000 * (l + 1), 1000);
  }
  std::string path = dir / "three_layers.memrec";
  write_file(s, path);
  return path;
}

TEST(CliDevices, EveryCommandDefaultsToTheDeviceWithEvents) {
  TempDir dir;
  std::string file = on_device_1(dir);
  auto info = memrec("info " + quote(file));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("device 1: 1025 events"), std::string::npos) << info.output;

  json stats = json_of("stats " + quote(file));
  EXPECT_EQ(stats["device"], 1);
  EXPECT_EQ(stats["events"], 1025);
  EXPECT_EQ(stats["peak_allocated"], json_of("stats " + quote(kAll))["peak_allocated"]);

  json diff = json_of("diff " + quote(file) + " " + quote(kAll));
  EXPECT_EQ(diff["a"]["device"], 1);
  EXPECT_EQ(diff["b"]["device"], 0);
  EXPECT_EQ(diff["delta_peak_allocated"], 0);
  EXPECT_EQ(diff["groups_changed"], 0);

  std::string html = dir / "report.html";
  auto report = memrec("report " + quote(file) + " -o " + quote(html) + " --no-screenshot");
  ASSERT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(read_text(html).find("device 1: 1025 events"), std::string::npos);

  json whatif = json_of("whatif checkpoint " + quote(three_layers_on_device_1(dir)));
  EXPECT_EQ(whatif["device"], 1);
  EXPECT_EQ(whatif["layers"], json({"layers.0", "layers.1", "layers.2"}));
}

TEST(CliDevices, AnUnknownDeviceIsAnErrorInEveryCommand) {
  TempDir dir;
  std::string device1 = on_device_1(dir), layers = three_layers_on_device_1(dir);
  std::string html = dir / "report.html";
  for (const std::string& args :
       {"stats " + quote(kAll) + " --device 3", "stats " + quote(device1) + " --device 0",
        "diff " + quote(kAll) + " " + quote(device1) + " --device 0", "whatif checkpoint " + quote(layers) + " --device 0",
        "report " + quote(kAll) + " -o " + quote(html) + " --no-screenshot --device 3"}) {
    auto r = memrec(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("the recording has nothing on device"), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_FALSE(std::ifstream(html).good()) << "no report for a device the file does not have";
}

TEST(CliAt, PastTheEndShowsTheLastEventAndSaysSo) {
  json whole = json_of("stats " + quote(kAll));
  uint64_t last = whole["events"].get<uint64_t>() - 1;
  Snapshot s = load_snapshot(kAll);
  Replay r(s, 0);
  for (const char* at : {"5s", "8000000000s"}) {
    json j = json_of("stats " + quote(kAll) + " --at " + at);
    EXPECT_EQ(j["at"]["event"], last) << at;
    EXPECT_EQ(j["at"]["time_ns"], whole["duration_ns"]) << at;
    EXPECT_GT(j["at"]["allocated"].get<uint64_t>(), 0u) << at;
    InstantShown shown = find_instant(r, parse_at(at));
    EXPECT_EQ(shown.moved, InstantShown::Moved::past_end) << at;
    EXPECT_EQ(shown.asked_ns, parse_at(at)) << at;
    EXPECT_EQ(shown.duration_ns, whole["duration_ns"]) << at;
    EXPECT_EQ(j["at"]["note"], instant_note(shown)) << at;
    auto text = memrec("stats " + quote(kAll) + " --at " + at);
    EXPECT_TRUE(text.output.starts_with("note: " + instant_note(shown) + "\n")) << text.output;
  }
}

TEST(CliAt, ATimeTooLargeToCountIsAnError) {
  TempDir dir;
  std::string png = dir / "x.png";
  for (const std::string& cmd : {"stats " + quote(kAll), "view " + quote(kAll) + " --screenshot " + quote(png)}) {
    auto r = memrec(cmd + " --at 9223372036854775ms");
    if (r.output.find("is unavailable") != std::string::npos) continue;  // a build without the viewer
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("--at 9223372036854775ms is too large"), std::string::npos) << r.output;
  }
}

TEST(CliAt, ATimeBetweenEventsNamesTheEventItShows) {
  json j = json_of("stats " + quote(kAll) + " --at 40us");
  EXPECT_EQ(j["at"]["requested_ns"], 40000);
  EXPECT_LE(j["at"]["time_ns"].get<int64_t>(), 40000);
  EXPECT_EQ(j["at"]["note"], "");
  auto text = memrec("stats " + quote(kAll) + " --at 40us");
  std::string want = "live at +40.0 us (the state after event " + std::to_string(j["at"]["event"].get<int64_t>()) + ", at +";
  EXPECT_NE(text.output.find(want), std::string::npos) << text.output;
}

TEST(CliWhatif, LayersAreNamedInTheOrderGivenAndDuplicatesAreRefused) {
  TempDir dir;
  std::string file = three_layers_on_device_1(dir);
  json two = json_of("whatif checkpoint " + quote(file) + " --device 1 --layers 2,0");
  EXPECT_EQ(two["layers"], json::array({"layers.2", "layers.0"}));
  EXPECT_EQ(two["device"], 1);
  EXPECT_EQ(json_of("whatif checkpoint " + quote(file) + " --device 1 --layers layers.1")["layers"], json::array({"layers.1"}));
  for (const char* twice : {"0,0", "1,layers.1"}) {
    auto r = memrec("whatif checkpoint " + quote(file) + " --device 1 --layers " + twice);
    EXPECT_EQ(r.exit_code, 1) << twice << "\n" << r.output;
    EXPECT_NE(r.output.find("layer layers." + std::string(twice).substr(0, 1) + " is given twice"), std::string::npos)
        << r.output;
  }
}

// The wording, whole (the facts are checked on CheckpointPrediction and in JSON).
TEST(CliWhatif, Text) {
  auto r = memrec("whatif checkpoint " + quote(test::data("transformer_2layer_cpu.memrec")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "checkpointing 2 layers (layers.0, layers.1), 152 activation blocks freed after forward and recomputed:\n"
            "  recorded peak allocated      52.11 MiB\n"
            "  predicted peak allocated     40.11 MiB  at +1.505 s\n"
            "  saving                       12.01 MiB  (23.0%)\n");
}

}  // namespace
}  // namespace memrec
