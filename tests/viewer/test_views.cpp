// The flame graph, the segment history and the status bar in `memrec view --screenshot --view ...`, checked
// against a plain replay computed here (each block's life from Replay::allocations(), summed by hand), and the
// flags that aim a screenshot.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/process.h"
#include "memrec/attribution.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/sites.h"
#include "memrec/viewer.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

using test::keep_for_readme;
using test::quote;
using test::Shot;

// The blocks live right after `step`, by looking at every block's life.
std::vector<uint32_t> brute_live(const Replay& r, uint32_t step) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < r.allocations().size(); ++i)
    if (r.allocations()[i].live_after(step)) ids.push_back(i);
  return ids;
}

// Bytes per outermost (top-down) or innermost (bottom-up) frame label, "<no stack>" for blocks without one; of
// every frame, or of the user's frames and the site (the viewer's default).
std::map<std::string, uint64_t> by_first_frame(const Snapshot& s, const Replay& r, const std::vector<uint32_t>& ids,
                                               bool top_down, bool every) {
  std::map<std::string, uint64_t> out;
  for (uint32_t id : ids) {
    Allocation a = r.allocations()[id];
    auto all = s.stacks[a.stack];
    std::vector<uint32_t> frames = every ? std::vector<uint32_t>(all.begin(), all.end()) : user_frames(s, a.stack);
    std::string key = frames.empty() ? "<no stack>" : frame_label(s, top_down ? frames.back() : frames.front());
    out[key] += a.size;
  }
  return out;
}

struct FlameCase {
  std::string fixture, group_by;
  bool top_down;
  bool every = false;  // --every-frame
};

class FlameShot : public ::testing::TestWithParam<FlameCase> {};

TEST_P(FlameShot, TopBoxesHoldTheLiveBytesOfTheirFrame) {
  const FlameCase& c = GetParam();
  test::TempDir dir;
  Shot shot = test::screenshot(test::data(c.fixture), "--view flame --size 1280x720 --group-by " + c.group_by +
                                                         (c.every ? " --every-frame" : ""), dir);
  ASSERT_TRUE(shot.layout.contains("flame")) << shot.output;
  Snapshot s = load_snapshot(test::data(c.fixture));
  Replay r(s, 0);
  auto live = brute_live(r, r.peak_allocated().step);
  uint64_t live_bytes = 0;
  for (uint32_t id : live) live_bytes += r.allocations()[id].size;
  auto want = by_first_frame(s, r, live, c.top_down, c.every);

  const auto& F = shot.layout["flame"];
  double fx = F["x"].get<double>(), fy = F["y"].get<double>(), w = F["w"].get<double>(), row = F["row_h"].get<double>();
  ASSERT_GT(w, 400);
  std::map<std::string, uint64_t> got;
  double right = 0;
  for (const auto& b : F["boxes"]) {
    auto bytes = b["bytes"].get<uint64_t>();
    double x0 = b["x0"].get<double>(), x1 = b["x1"].get<double>();
    if (b["depth"] == 0) {
      EXPECT_EQ(bytes, live_bytes);
      EXPECT_EQ(b["blocks"].get<size_t>(), live.size());
      EXPECT_NEAR(x1 - x0, w, 0.5);
    }
    if (b["depth"] != 1) continue;
    got[b["label"].get<std::string>()] = bytes;
    // As wide as its share, side by side from the left, and painted: the box's top row is not the background.
    EXPECT_NEAR(x1 - x0, w * static_cast<double>(bytes) / static_cast<double>(live_bytes), 0.5);
    EXPECT_NEAR(x0, right, 0.5);
    right = x1;
    if (x1 - x0 >= 4) {
      uint32_t px = shot.image.at(static_cast<int>(fx + (x0 + x1) / 2), static_cast<int>(fy + row + 1));
      uint32_t bg = shot.image.at(static_cast<int>(fx - 3), static_cast<int>(fy + row + 1));  // the panel, left of it
      EXPECT_NE(px, bg) << b["label"];
    }
  }
  // Every frame wide enough to draw is there with its replayed bytes; the ones left out are under a pixel.
  for (const auto& [label, bytes] : want) {
    if (w * static_cast<double>(bytes) / static_cast<double>(live_bytes) < 1) continue;
    ASSERT_TRUE(got.count(label)) << label;
    EXPECT_EQ(got[label], bytes) << label;
  }
  EXPECT_EQ(got.size(), std::count_if(want.begin(), want.end(), [&](const auto& kv) {
              return w * static_cast<double>(kv.second) / static_cast<double>(live_bytes) >= 1;
            }));
  if (c.fixture == "torch_2layer_python.pickle" && !c.every)
    keep_for_readme(dir, std::string("viewer_flame_") + (c.top_down ? "top_down" : "bottom_up") + ".png");
}

INSTANTIATE_TEST_SUITE_P(Torch, FlameShot,
                         ::testing::Values(FlameCase{"torch_2layer_python.pickle", "stack", true},
                                           FlameCase{"torch_2layer_python.pickle", "stack-bottom-up", false},
                                           FlameCase{"torch_2layer_all.pickle", "stack", true},
                                           FlameCase{"torch_2layer_all.pickle", "stack", true, true},
                                           FlameCase{"torch_compile_graph.pickle", "stack-bottom-up", false}));

// Only the range is read, and the flame graph holds the bytes allocated in it.
TEST(FlameShotRange, RootHoldsTheBytesAllocatedInTheRange) {
  test::TempDir dir;
  Shot shot = test::screenshot(test::data("torch_2layer_python.pickle"), "--range 15ms..25ms --size 1280x720", dir);
  ASSERT_TRUE(shot.layout.contains("flame")) << shot.output;
  EXPECT_EQ(shot.layout["view"], "flame");
  Snapshot s = load_snapshot(test::data("torch_2layer_python.pickle"));
  Replay r(s, 0);
  int64_t begin = r.time_of(0);
  uint64_t bytes = 0, blocks = 0;
  for (Allocation a : r.allocations()) {
    if (a.alloc_step == kNoEvent) continue;
    int64_t t = r.time_of(a.alloc_step) - begin;
    if (t >= 15'000'000 && t <= 25'000'000) bytes += a.size, ++blocks;
  }
  ASSERT_GT(blocks, 0u);
  const auto& root = shot.layout["flame"]["boxes"][0];
  EXPECT_EQ(root["bytes"].get<uint64_t>(), bytes);
  EXPECT_EQ(root["blocks"].get<uint64_t>(), blocks);
  keep_for_readme(dir, "viewer_flame_range.png");
}

// --at counts from the recording's start, so with it the whole file is read: the range's bytes are the same.
TEST(FlameShotRange, WithAtTheWholeFileShowsTheSameBytes) {
  test::TempDir dir;
  std::string file = test::data("torch_2layer_python.pickle");
  Shot part = test::screenshot(file, "--range 15ms..25ms --view modules --size 1280x720", dir);
  Shot whole = test::screenshot(file, "--range 15ms..25ms --view modules --at 16ms --size 1280x720", dir);
  ASSERT_TRUE(part.layout.contains("modules")) << part.output;
  ASSERT_TRUE(whole.layout.contains("modules")) << whole.output;
  EXPECT_NE(part.output.find("only --range 15ms..25ms was read"), std::string::npos) << part.output;
  EXPECT_EQ(whole.output.find("only --range"), std::string::npos) << whole.output;
  EXPECT_EQ(part.layout["modules"]["boxes"][0]["bytes"], whole.layout["modules"]["boxes"][0]["bytes"]);
}

TEST(SegmentsShot, BarsShowTheReplayedBlocksAtTheirAddresses) {
  test::TempDir dir;
  Shot shot = test::screenshot(test::data("torch_2layer_python.pickle"), "--view segments --at 10ms --size 1280x720", dir);
  ASSERT_TRUE(shot.layout.contains("segments")) << shot.output;
  Snapshot s = load_snapshot(test::data("torch_2layer_python.pickle"));
  Replay r(s, 0);
  auto step = static_cast<uint32_t>(shot.layout["instant_step"].get<int64_t>());
  auto live = brute_live(r, step);
  const auto& bars = shot.layout["segments"]["bars"];
  ASSERT_GT(bars.size(), 3u);
  double bar_h = shot.layout["segments"]["bar_h"].get<double>();
  int checked_blocks = 0, checked_free = 0;
  for (const auto& bar : bars) {
    auto addr = bar["addr"].get<uint64_t>(), size = bar["size"].get<uint64_t>();
    // The blocks filed in this segment are the live blocks inside its range.
    std::set<uint32_t> want, got;
    for (uint32_t id : live)
      if (r.allocations()[id].addr >= addr && r.allocations()[id].addr < addr + size) want.insert(id);
    for (const auto& id : bar["blocks"]) got.insert(id.get<uint32_t>());
    EXPECT_EQ(got, want) << "segment 0x" << std::hex << addr;
    double x = bar["x"].get<double>(), y = bar["y"].get<double>() + bar_h / 2, w = bar["w"].get<double>();
    auto pixel = [&](uint64_t at) {
      return shot.image.at(static_cast<int>(x + static_cast<double>(at - addr) * w / static_cast<double>(size)), static_cast<int>(y));
    };
    if (y >= shot.image.height - 30) continue;  // scrolled out of the panel
    // Each block wide enough to see is painted in its band color at its address; free space in the segment color.
    uint64_t covered_to = addr, widest_gap = 0, gap_at = 0;
    std::vector<uint32_t> sorted(want.begin(), want.end());
    std::sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t b) { return r.allocations()[a].addr < r.allocations()[b].addr; });
    for (uint32_t id : sorted) {
      Allocation a = r.allocations()[id];
      if (a.addr > covered_to && a.addr - covered_to > widest_gap) widest_gap = a.addr - covered_to, gap_at = covered_to;
      covered_to = std::max(covered_to, a.addr + a.size);
      if (static_cast<double>(a.size) * w / static_cast<double>(size) < 6) continue;
      EXPECT_EQ(pixel(a.addr + a.size / 2), viewer::band_color(a.stack, id)) << "block " << id;
      ++checked_blocks;
    }
    if (addr + size - covered_to > widest_gap) widest_gap = addr + size - covered_to, gap_at = covered_to;
    if (static_cast<double>(widest_gap) * w / static_cast<double>(size) >= 6) {
      EXPECT_EQ(pixel(gap_at + widest_gap / 2), want.empty() ? viewer::kFreeSegmentColor : viewer::kInactiveSplitColor)
          << "segment 0x" << std::hex << addr;
      ++checked_free;
    }
  }
  EXPECT_GT(checked_blocks, 3);
  EXPECT_GT(checked_free, 0);
  keep_for_readme(dir, "viewer_segments.png");
}

// The attribution panel by every key: its rows sum to the live bytes and blocks a plain replay finds at the peak;
// the site rows hold each site's replayed bytes.
TEST(AttributionShot, EveryKeySumsToTheLiveMemory) {
  Snapshot s = load_snapshot(test::data("torch_2layer_all.pickle"));
  Replay r(s, 0);
  auto live = brute_live(r, r.peak_allocated().step);
  uint64_t live_bytes = 0;
  std::map<std::string, uint64_t> by_site;
  for (uint32_t id : live) {
    Allocation a = r.allocations()[id];
    live_bytes += a.size;
    by_site[allocation_site(s, a.stack)] += a.size;
  }
  for (const char* key : {"", "site", "category", "layer", "pool", "stack", "stack-bottom-up", "op", "module", "phase"}) {
    test::TempDir dir;
    std::string flag = *key ? std::string("--group-by ") + key : "";
    Shot shot = test::screenshot(test::data("torch_2layer_all.pickle"), "--size 1024x600 " + flag, dir);
    ASSERT_TRUE(shot.layout.contains("attribution")) << shot.output;
    const auto& A = shot.layout["attribution"];
    EXPECT_EQ(A["grouping"].get<std::string>().substr(0, 4), std::string(*key ? key : "site").substr(0, 4));
    uint64_t bytes = 0, blocks = 0;
    for (const auto& row : A["rows"]) {
      bytes += row["bytes"].get<uint64_t>();
      blocks += row["blocks"].get<uint64_t>();
      if (A["grouping"] == "site") EXPECT_EQ(row["bytes"].get<uint64_t>(), by_site[row["key"].get<std::string>()]) << row["key"];
    }
    EXPECT_EQ(bytes, live_bytes) << key;
    EXPECT_EQ(blocks, live.size()) << key;
  }
}

// tests/data/mlp_sequential_cpu.memrec (an nn.Sequential trained with Adam, its parameters, gradients and Adam
// state owned): the module view at the peak holds every live byte, its category split sums to each box, and what it
// files under no module is exactly `stats --by module`'s <none>: owned blocks sit under their module in both.
TEST(ModulesShot, BoxesSplitByCategoryAndAgreeWithStats) {
  test::TempDir dir;
  std::string fixture = test::data("mlp_sequential_cpu.memrec");
  Shot shot = test::screenshot(fixture, "--view modules --size 1280x720", dir);
  ASSERT_TRUE(shot.layout.contains("modules")) << shot.output;
  EXPECT_EQ(shot.layout["view"], "modules");
  auto stats = test::run_command(quote(MEMREC_BINARY) + " stats " + quote(fixture) + " --by module --json --top 1000");
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  nlohmann::json S = nlohmann::json::parse(stats.output);
  uint64_t none = 0, live = 0;
  for (const auto& g : S["live"]) {
    live += g["bytes"].get<uint64_t>();
    if (g["key"] == "<none>") none = g["bytes"].get<uint64_t>();
  }
  std::map<std::string, uint64_t> top;
  uint64_t parameters = 0;
  for (const auto& b : shot.layout["modules"]["boxes"]) {
    uint64_t split = 0;
    for (const auto& [category, bytes] : b["by_category"].items()) split += bytes.get<uint64_t>();
    EXPECT_EQ(split, b["bytes"].get<uint64_t>()) << b["label"];
    if (b["depth"] == 0) EXPECT_EQ(b["bytes"].get<uint64_t>(), live);
    if (b["depth"] == 1) top[b["label"].get<std::string>()] = b["bytes"].get<uint64_t>();
    if (b["depth"] == 2 && b["by_category"].contains("parameter")) parameters += b["by_category"]["parameter"].get<uint64_t>();
  }
  EXPECT_EQ(top["<no module>"], none);
  ASSERT_TRUE(top.count("Sequential")) << shot.layout["modules"].dump();
  EXPECT_GT(parameters, 0u) << "the layers' boxes hold their parameters";
  keep_for_readme(dir, "viewer_modules.png");
}

// The module view of GPT-2 under torch.compile (recorded on an H100): the compiled code's blocks nest by module as
// eager code's do, so each of the twelve layers has its box inside `transformer`.
TEST(ModulesShot, CompiledCodeNestsByModule) {
  test::TempDir dir;
  Shot shot = test::screenshot(test::data("gpt2_compile_h100.memrec"), "--view modules --size 1280x720", dir);
  ASSERT_TRUE(shot.layout.contains("modules")) << shot.output;
  std::set<std::string> layers;
  for (const auto& b : shot.layout["modules"]["boxes"]) {
    std::string label = b["label"];
    if (label.starts_with("transformer.h.") && label.find('.', 14) == std::string::npos) {
      layers.insert(label);
      EXPECT_GT(b["by_category"].value("activation", uint64_t{0}), uint64_t{400} << 20) << label;
    }
  }
  EXPECT_EQ(layers.size(), 12u) << shot.layout["modules"].dump().substr(0, 2000);
  keep_for_readme(dir, "viewer_modules_compiled.png");
}

// --view timeline --range: the plot spans the range (its columns cover T1..T2 to within a column).
TEST(TimelineShotRange, TheTimelineSpansTheRange) {
  test::TempDir dir;
  Shot shot = test::screenshot(test::data("torch_2layer_python.pickle"),
                               "--view timeline --range 15ms..25ms --size 1280x720", dir);
  ASSERT_FALSE(shot.layout.is_null()) << shot.output;
  EXPECT_EQ(shot.layout["view"], "timeline");
  double t0 = shot.layout["t0_ns"].get<double>(), dt = shot.layout["dt_ns"].get<double>();
  double w = shot.layout["plot"]["w"].get<double>();
  EXPECT_NEAR(t0, 15e6, dt);
  EXPECT_NEAR(t0 + w * dt, 25e6, 2 * dt);
}

// The status bar is inside the window for every view, and shows the recording's warnings.
TEST(StatusBar, IsDrawnInsideTheWindow) {
  for (const char* view : {"timeline", "flame", "segments", "modules"}) {
    test::TempDir dir;
    Shot shot = test::screenshot(test::data("torch_2layer_all.pickle"), std::string("--size 1024x600 --view ") + view, dir);
    ASSERT_FALSE(shot.layout.is_null()) << shot.output;
    double y = shot.layout["status_y"].get<double>();
    EXPECT_LE(y + 20, 600) << view;
    // Its text: light pixels on the status line.
    int light = 0;
    for (int x = 0; x < 1024; ++x)
      for (int dy = 4; dy < 18; ++dy)
        light += (shot.image.at(x, static_cast<int>(y) + dy) & 0xFF) > 0xB0;
    EXPECT_GT(light, 200) << view;
  }
}

TEST(StatusBar, ShowsTheWarningsOfACutFile) {
  test::TempDir dir;
  std::string full = dir / "full.memrec", cut = dir / "cut.memrec";
  ASSERT_EQ(test::memrec("import " + quote(test::data("torch_2layer_all.pickle")) + " -o " + quote(full)).exit_code, 0);
  std::string bytes = test::read_bytes(full);
  { std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3); }
  Shot shot = test::screenshot(cut, "--size 1024x600", dir);
  ASSERT_FALSE(shot.layout.is_null()) << shot.output;
  int y = static_cast<int>(shot.layout["status_y"].get<double>());
  // The warning is written in orange (255, 153, 51) at the start of the line.
  int orange = 0;
  for (int x = 0; x < 400; ++x)
    for (int dy = 4; dy < 18; ++dy) {
      uint32_t c = shot.image.at(x, y + dy);
      orange += (c & 0xFF) > 0xE0 && ((c >> 8) & 0xFF) > 0x70 && ((c >> 8) & 0xFF) < 0xB0 && ((c >> 16) & 0xFF) < 0x60;
    }
  EXPECT_GT(orange, 30);
}

// Pictures (the README's, the report's) show the views: no search box above the timeline, which starts at the top.
TEST(StatusBar, ScreenshotsLeaveOutTheSearchBox) {
  test::TempDir dir;
  Shot shot = test::screenshot(test::data("torch_2layer_python.pickle"), "--size 1024x600", dir);
  ASSERT_FALSE(shot.layout.is_null()) << shot.output;
  EXPECT_LE(shot.layout["plot"]["y"].get<double>(), 8);  // the window padding; the search row took 23 px more
}

TEST(ViewFlags, BadValuesSayWhy) {
  test::TempDir dir;
  auto view = [&](const std::string& args) {
    return test::memrec("view " + quote(test::data("torch_2layer_python.pickle")) + " --screenshot " +
                           quote(dir / "x.png") + " " + args);
  };
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"--view map", "--view wants timeline, flame, segments, modules, growth or advise, got 'map'"},
                        Case{"--group-by file", "--group-by wants stack, stack-bottom-up, op, module, phase, site, category, layer or pool, got 'file'"},
                        Case{"--range 10ms", "--range wants T1..T2"},
                        Case{"--range 20ms..10ms", "--range wants T1..T2"},
                        Case{"--range soon..later", "--range wants T1..T2"},
                        Case{"--steps 3", "--steps wants A..B"},
                        Case{"--range 1ms..2ms --steps 0..1", "--range and --steps both choose the part to read"},
                        Case{"--view segments --range 1ms..2ms", "--range is drawn by --view timeline, flame or modules"},
                        Case{"--view flame --group-by category", "--view flame draws a tree"}}) {
    auto r = view(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << ": " << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "x.png")) << c.args;
  }
}

}  // namespace
}  // namespace memrec
