// The allocator model replayed on real recordings (PyTorch 2.11 on an H100, tests/data/alloc_*.memrec, and PyTorch's
// own snapshots): under the settings a run was recorded with, it must repeat the run's segment actions.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memrec/allocator_whatif.h"
#include "memrec/load.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

std::string describe(const std::vector<SegmentAction>& a, size_t i) {
  if (i >= a.size()) return "(none)";
  return fmt::format("#{} {} {} bytes on stream {}", i, to_string(a[i].action), a[i].size, a[i].stream);
}

// The first position where the two sequences differ, or "" when they are the same.
std::string first_difference(const std::vector<SegmentAction>& want, const std::vector<SegmentAction>& got) {
  for (size_t i = 0; i < std::max(want.size(), got.size()); ++i)
    if (i >= want.size() || i >= got.size() || !(want[i] == got[i]))
      return fmt::format("recorded {} but the model did {} ({} recorded, {} predicted)", describe(want, i),
                         describe(got, i), want.size(), got.size());
  return "";
}

class OwnSettings : public ::testing::TestWithParam<const char*> {};

TEST_P(OwnSettings, RepeatsTheRecordedSegmentActions) {
  Snapshot s = load_snapshot(test::data(GetParam()));
  Replay r(s, 0);
  std::optional<AllocConf> conf = recorded_alloc_conf(s);
  ASSERT_TRUE(conf);
  DeviceLimits memory = device_limits(s, r, std::nullopt);
  AllocatorPrediction p = predict_allocator(s, r, *conf, memory, {.keep_actions = true});
  std::vector<SegmentAction> recorded = recorded_segment_actions(s, r);
  ASSERT_FALSE(recorded.empty());
  EXPECT_EQ(first_difference(recorded, p.segment_actions), "");
  EXPECT_EQ(p.reserved_peak, r.peak_reserved().bytes);
}

INSTANTIATE_TEST_SUITE_P(Recordings, OwnSettings,
                         ::testing::Values("alloc_default.memrec", "alloc_split64.memrec", "alloc_roundup4.memrec",
                                           "alloc_expandable.memrec", "alloc_run12.memrec", "alloc_oom.memrec",
                                           "alloc_run2_expandable.memrec", "torch_2layer_all.pickle",
                                           "torch_2layer_python.pickle"));

// torch.cuda.empty_cache() shows only as segments freed outside a request: the replay releases the model's cache there.
TEST(OwnSettingsReplay, RepeatsTheProgramsEmptyCache) {
  Snapshot s;
  s.metadata["allocator_settings"] = R"({"PYTORCH_CUDA_ALLOC_CONF": ""})";
  s.metadata["device.0.total_memory"] = std::to_string(80ull << 30);
  constexpr uint64_t kSize = 12ull << 20, kA = 0x7f0000000000, kB = 0x7f0001000000;
  auto ev = [&](Action action, uint64_t addr) {
    s.events.push_back(Event{.time_ns = static_cast<int64_t>(s.events.size()), .addr = addr, .size = kSize, .action = action});
  };
  ev(Action::segment_alloc, kA);
  ev(Action::alloc, kA);
  ev(Action::free_requested, kA);
  ev(Action::free_completed, kA);
  ev(Action::segment_free, kA);  // empty_cache: 12 MiB more would fit, so this is no release-and-retry
  ev(Action::segment_alloc, kB);
  ev(Action::alloc, kB);
  Replay r(s, 0);
  AllocatorPrediction p = predict_allocator(s, r, AllocConf{}, device_limits(s, r, std::nullopt), {.keep_actions = true});
  EXPECT_EQ(first_difference(recorded_segment_actions(s, r), p.segment_actions), "");
  EXPECT_EQ(p.device_allocs, 2u);
}

TEST(OwnSettingsReplay, RefusesCpuRecordings) {
  Snapshot s;
  s.metadata["device.0.type"] = "cpu";
  s.events.push_back(Event{.time_ns = 1, .addr = 64, .size = 100, .action = Action::alloc});
  EXPECT_THROW(
      {
        try {
          allocator_whatif(s, 0, {});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("CPU allocator keeps no cache"), std::string::npos);
          throw;
        }
      },
      Error);
}

// At the reserved peak of the H100 run, the culprits share out exactly the free bytes of the segments that also hold
// live blocks (up to the integer division per segment); wholly free segments are cache, no one's fragmentation.
TEST(FragmentationCulprits, ShareTheFreeBytesOfPartlyUsedSegments) {
  Snapshot s = load_snapshot(test::data("alloc_default.memrec"));
  Replay r(s, 0);
  AllocConf own = *recorded_alloc_conf(s);
  DeviceLimits memory = device_limits(s, r, std::nullopt);
  AllocatorPrediction p = predict_allocator(s, r, own, memory);
  uint64_t stranded = 0, segments = 0;
  for (const auto& seg : allocator_layout_after(s, r, own, memory, p.reserved_peak_step)) {
    uint64_t free = 0, live = 0;
    for (const auto& b : seg.blocks) b.allocated ? ++live : free += b.size;
    if (live && free) stranded += free, ++segments;
  }
  uint64_t shared = 0;
  for (const FragmentationCulprit& c : fragmentation_culprits(s, r, own, memory, p.reserved_peak_step)) {
    shared += c.free_bytes;
    EXPECT_LE(c.first_ns, c.last_ns);
  }
  EXPECT_GT(stranded, 1ull << 30);  // the run strands over 1 GiB in split segments (stats: 2.11 GiB free pieces)
  EXPECT_LE(shared, stranded);
  EXPECT_GE(shared + segments * 1024, stranded);

  FragmentationCulprits sites = stats_fragmentation_culprits(s, r, 5);
  EXPECT_EQ(sites.state, FragmentationCulprits::State::found);
  EXPECT_EQ(sites.culprits.size(), 5u);
  EXPECT_EQ(sites.reserved, r.peak_reserved().bytes);
  ASSERT_FALSE(sites.settings_savings.empty());
  EXPECT_EQ(sites.settings_savings[0].settings, "expandable_segments:True");
  EXPECT_EQ(sites.settings_savings[0].saving, 10252976128 - 6696206336);  // measured peaks: default - expandable
}

}  // namespace
}  // namespace memrec
