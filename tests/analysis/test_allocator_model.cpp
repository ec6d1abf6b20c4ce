// The allocator model's rules, one by one, on request sequences whose answers follow from
// c10/cuda/CUDACachingAllocator.cpp by hand; and PYTORCH_CUDA_ALLOC_CONF parsing.
#include <gtest/gtest.h>

#include "memrec/allocator_model.h"

namespace memrec {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kNoLimit = UINT64_MAX;

AllocatorModel model(const char* conf, uint64_t total = kNoLimit, uint64_t limit = kNoLimit) {
  AllocatorModel m(parse_alloc_conf(conf), total, limit);
  m.keep_segment_actions(true);
  return m;
}

void release(AllocatorModel& m, uint32_t handle) {
  m.free_requested(handle);
  m.free_completed(handle);
}

std::vector<uint64_t> sizes(const AllocatorModel& m, Action a) {
  std::vector<uint64_t> out;
  for (const SegmentAction& s : m.segment_actions())
    if (s.action == a) out.push_back(s.size);
  return out;
}

TEST(AllocConf, ParsesEachSetting) {
  AllocConf c = parse_alloc_conf("expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6,"
                                 "max_non_split_rounding_mb:40,per_process_memory_fraction:0.5");
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.max_split_size, 128 * kMiB);
  EXPECT_EQ(c.max_non_split_rounding, 40 * kMiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
  EXPECT_DOUBLE_EQ(c.memory_fraction, 0.5);
  EXPECT_EQ(parse_alloc_conf(""), AllocConf{});
  EXPECT_EQ(parse_alloc_conf("backend:native,pinned_use_cuda_host_register:True"), AllocConf{});
}

TEST(AllocConf, RoundupIntervalsFollowC10) {
  auto all = parse_alloc_conf("roundup_power2_divisions:4").roundup_divisions;
  EXPECT_TRUE(std::all_of(all.begin(), all.end(), [](uint32_t d) { return d == 4; }));
  // The first entry also covers the intervals below it; '>' fills from the last one named, that one included.
  auto d = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]").roundup_divisions;
  for (size_t i = 0; i <= 8; ++i) EXPECT_EQ(d[i], 1u) << i;
  EXPECT_EQ(d[9], 2u);
  for (size_t i = 10; i < d.size(); ++i) EXPECT_EQ(d[i], 8u) << i;
  auto gap = parse_alloc_conf("roundup_power2_divisions:[1:2,64:4]").roundup_divisions;
  EXPECT_EQ(gap[0], 2u);
  EXPECT_EQ(gap[3], 0u);  // intervals between named ones keep their value
  EXPECT_EQ(gap[6], 4u);
}

TEST(AllocConf, PrintsWhatItParses) {
  for (const char* text : {"", "expandable_segments:True", "max_split_size_mb:64,garbage_collection_threshold:0.6",
                           "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "roundup_power2_divisions:8",
                           "roundup_power2_divisions:[1:2,64:4]", "roundup_power2_divisions:[32:4,>:8]"}) {
    AllocConf c = parse_alloc_conf(text);
    EXPECT_EQ(parse_alloc_conf(to_string(c)), c) << text;
  }
  EXPECT_EQ(to_string(AllocConf{}), "");
}

TEST(AllocConf, RefusesWhatC10Refuses) {
  auto message = [](const char* text) {
    try {
      parse_alloc_conf(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("max_split_size_mb:10").find("at least 20"), std::string::npos);
  EXPECT_NE(message("garbage_collection_threshold:1.5").find("must be in (0, 1)"), std::string::npos);
  EXPECT_NE(message("expandable_segments:yes").find("True or False"), std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:3").find("power of 2"), std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:[300:2]").find("powers of 2"), std::string::npos);
  EXPECT_NE(message("backend:cudaMallocAsync").find("not the caching allocator"), std::string::npos);
  EXPECT_NE(message("max_split_sise_mb:64").find("unknown setting 'max_split_sise_mb'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb").find("expected ':'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb:64;expandable_segments:True").find("whole number"), std::string::npos);
}

TEST(AllocConf, ReadsTheRecordedSettings) {
  Snapshot s;
  EXPECT_FALSE(recorded_alloc_conf(s));
  // PyTorch's snapshot: the text, and parsed fields (SIZE_MAX shown as -1, divisions per MB interval).
  s.metadata["allocator_settings"] =
      R"({"PYTORCH_CUDA_ALLOC_CONF": "max_non_split_rounding_mb:40", "max_split_size": -1,
          "garbage_collection_threshold": 0.0, "expandable_segments": false,
          "roundup_power2_divisions": {"1": 0, "2": 4, "4": 0, "32768": 8}})";
  AllocConf c = *recorded_alloc_conf(s);
  EXPECT_EQ(c.max_split_size, UINT64_MAX);
  EXPECT_EQ(c.max_non_split_rounding, 40 * kMiB);
  EXPECT_EQ(c.roundup_divisions[1], 4u);
  EXPECT_EQ(c.roundup_divisions[15], 8u);
  // memrec's recorder: c10's last_allocator_settings; settings of newer versions are skipped, not refused.
  s.metadata["allocator_settings"] =
      R"({"last_allocator_settings": "large_segment_size_mb:[64:2],expandable_segments:True", "max_split_size": 18446744073709551615})";
  c = *recorded_alloc_conf(s);
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.max_split_size, UINT64_MAX);
}

TEST(AllocatorModel, RoundsRequests) {
  AllocConf plain, four = parse_alloc_conf("roundup_power2_divisions:4");
  EXPECT_EQ(AllocatorModel::round_size(plain, 1), 512u);
  EXPECT_EQ(AllocatorModel::round_size(plain, 1000), 1024u);
  EXPECT_EQ(AllocatorModel::round_size(plain, 5 * kMiB + 1), 5 * kMiB + 512);
  // 4 divisions between 4 and 8 MiB: 5, 6, 7 MiB.
  EXPECT_EQ(AllocatorModel::round_size(four, 5 * kMiB + 1), 6 * kMiB);
  EXPECT_EQ(AllocatorModel::round_size(four, 4 * kMiB), 4 * kMiB);
  EXPECT_EQ(AllocatorModel::round_size(four, 1200), 1536u);  // not above 512 x divisions: 512 B steps
  EXPECT_EQ(AllocatorModel::allocation_size(kMiB), 2 * kMiB);
  EXPECT_EQ(AllocatorModel::allocation_size(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(AllocatorModel::allocation_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(AllocatorModel::allocation_size(11 * kMiB + 512), 12 * kMiB);
}

TEST(AllocatorModel, SmallRequestsShareTwoMiBSegments) {
  AllocatorModel m = model("");
  for (int i = 0; i < 4; ++i) m.malloc(500'000, 0);  // 500,224 B blocks: four fit in 2 MiB
  EXPECT_EQ(m.reserved(), 2 * kMiB);
  m.malloc(500'000, 0);
  EXPECT_EQ(sizes(m, Action::segment_alloc), (std::vector<uint64_t>{2 * kMiB, 2 * kMiB}));
  EXPECT_EQ(m.allocated(), 5 * 500'224u);
}

TEST(AllocatorModel, MidSizedRequestsSplitTwentyMiBSegments) {
  AllocatorModel m = model("");
  m.malloc(5 * kMiB, 0);
  m.malloc(5 * kMiB, 0);
  m.malloc(9 * kMiB, 0);  // 10 MiB left: fits
  EXPECT_EQ(m.reserved(), 20 * kMiB);
  uint32_t big = m.malloc(19 * kMiB + 512, 0);  // its own 20 MiB segment, not split (0.5 MiB left is <= 1 MiB)
  EXPECT_EQ(m.reserved(), 40 * kMiB);
  release(m, big);
  m.malloc(kMiB + 512, 0);  // the cached 20 MiB block is split: nothing new
  EXPECT_EQ(m.reserved(), 40 * kMiB);
  EXPECT_EQ(m.segments(), 2u);
}

TEST(AllocatorModel, BestFitTakesTheSmallestCachedBlock) {
  AllocatorModel m = model("");
  uint32_t a = m.malloc(30 * kMiB, 0), b = m.malloc(24 * kMiB, 0);
  m.malloc(kMiB + 512, 0);  // keeps a third segment busy
  release(m, a);
  release(m, b);
  m.malloc(23 * kMiB, 0);  // takes the 24 MiB block (1 MiB left: not split); the 30 MiB one stays whole
  m.malloc(29 * kMiB, 0);
  EXPECT_EQ(m.reserved(), (30 + 24 + 20) * kMiB);
  EXPECT_EQ(m.device_allocs(), 3u);
  EXPECT_EQ(m.allocated(), (24 + 30 + 1) * kMiB + 512);  // whole blocks: a large remainder must exceed 1 MiB
}

TEST(AllocatorModel, MaxSplitSizeKeepsOversizeBlocksWhole) {
  AllocatorModel m = model("max_split_size_mb:64");
  uint32_t big = m.malloc(100 * kMiB, 0);
  release(m, big);
  m.malloc(30 * kMiB, 0);  // an oversize block is never given to a request below max_split_size
  EXPECT_EQ(m.reserved(), 130 * kMiB);
  m.malloc(70 * kMiB, 0);  // 100 MiB >= 70 + 20 MiB: too wasteful, a new segment
  EXPECT_EQ(m.reserved(), 200 * kMiB);
  uint32_t again = m.malloc(85 * kMiB, 0);  // within 20 MiB: served whole by the 100 MiB block
  EXPECT_EQ(m.reserved(), 200 * kMiB);
  EXPECT_EQ(m.allocated(), (30 + 70 + 100) * kMiB);
  release(m, again);
  AllocatorModel wider = model("max_split_size_mb:64,max_non_split_rounding_mb:40");
  release(wider, wider.malloc(100 * kMiB, 0));
  wider.malloc(70 * kMiB, 0);
  EXPECT_EQ(wider.reserved(), 100 * kMiB);
}

TEST(AllocatorModel, ReleasesCachedBlocksAndRetriesBeforeAnOom) {
  AllocatorModel m = model("", 100 * kMiB, 100 * kMiB);
  release(m, m.malloc(60 * kMiB, 0));
  m.malloc(70 * kMiB, 0);  // 60 + 70 > 100: the cached 60 MiB segment is freed first
  EXPECT_EQ(m.reserved(), 70 * kMiB);
  EXPECT_EQ(sizes(m, Action::segment_free), (std::vector<uint64_t>{60 * kMiB}));
  EXPECT_EQ(m.ooms(), 0u);
  m.malloc(50 * kMiB, 0);  // no cache left: an OOM, served past the limit so the replay goes on
  EXPECT_EQ(m.ooms(), 1u);
  EXPECT_FALSE(m.try_malloc(50 * kMiB, 0));
  EXPECT_EQ(m.ooms(), 2u);
}

TEST(AllocatorModel, RequestsOfAnExabyteAreRefusedNotWrapped) {
  AllocatorModel m = model("roundup_power2_divisions:4");
  EXPECT_FALSE(m.try_malloc(UINT64_MAX - 100, 0));
  EXPECT_EQ(m.ooms(), 1u);
  EXPECT_EQ(m.reserved(), 0u);
  try {
    m.malloc(UINT64_MAX - 100, 0);
    FAIL() << "served";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no device holds 1 EiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.reserved(), 0u);
}

TEST(AllocatorModel, ReleaseAvailableFreesOnlyOversizeBlocks) {
  AllocatorModel m = model("max_split_size_mb:40", 200 * kMiB, 200 * kMiB);
  uint32_t small = m.malloc(30 * kMiB, 0);
  release(m, m.malloc(50 * kMiB, 0));
  release(m, m.malloc(60 * kMiB, 0));
  release(m, small);
  // 140 reserved; 80 more does not fit. The oversize blocks (50, 60) are freed largest first until 80 MiB are; the
  // 30 MiB block (below max_split_size) stays.
  m.malloc(80 * kMiB, 0);
  EXPECT_EQ(sizes(m, Action::segment_free), (std::vector<uint64_t>{60 * kMiB, 50 * kMiB}));
  EXPECT_EQ(m.reserved(), 110 * kMiB);
}

TEST(AllocatorModel, PendingFreesAreReusableOnlyWhenCompleted) {
  AllocatorModel m = model("");
  uint32_t a = m.malloc(12 * kMiB, 0);
  m.free_requested(a);  // record_stream: the block waits for the other stream
  EXPECT_EQ(m.allocated(), 0u);
  m.malloc(12 * kMiB, 0);
  EXPECT_EQ(m.reserved(), 24 * kMiB);
  m.free_completed(a);
  m.malloc(12 * kMiB, 0);
  EXPECT_EQ(m.reserved(), 24 * kMiB);
  m.free_completed(a);  // a second completion (the allocator synchronized earlier) changes nothing
  EXPECT_EQ(m.allocated(), 24 * kMiB);
}

TEST(AllocatorModel, EachStreamHasItsOwnCachedBlocks) {
  AllocatorModel m = model("");
  release(m, m.malloc(12 * kMiB, 1));
  m.malloc(12 * kMiB, 0);
  EXPECT_EQ(m.reserved(), 24 * kMiB);
  m.malloc(12 * kMiB, 1);
  EXPECT_EQ(m.reserved(), 24 * kMiB);
}

TEST(AllocatorModel, ExpandableSegmentsGrowByPages) {
  AllocatorModel m = model("expandable_segments:True", 80ull << 30, 80ull << 30);
  uint32_t a = m.malloc(5 * kMiB, 0);  // large pool: 20 MiB pages
  EXPECT_EQ(m.reserved(), 20 * kMiB);
  uint32_t b = m.malloc(30 * kMiB, 0);  // 15 MiB free at the end plus one more page
  EXPECT_EQ(sizes(m, Action::segment_map), (std::vector<uint64_t>{20 * kMiB, 20 * kMiB}));
  m.malloc(100, 0);  // small pool: its own segment of 2 MiB pages
  EXPECT_EQ(m.reserved(), 42 * kMiB);
  EXPECT_EQ(m.segments(), 2u);
  EXPECT_TRUE(sizes(m, Action::segment_alloc).empty());
  release(m, a);
  release(m, b);
  m.empty_cache();  // every whole free page of the large segment goes back
  EXPECT_EQ(sizes(m, Action::segment_unmap), (std::vector<uint64_t>{40 * kMiB}));
  EXPECT_EQ(m.reserved(), 2 * kMiB);
}

TEST(AllocatorModel, GarbageCollectionNeedsAMemoryFraction) {
  // allowed = 0.5 x 200 MiB = 100 MiB, collected above 0.5 of it.
  auto run = [](const char* conf) {
    AllocatorModel m = model(conf, 200 * kMiB, 200 * kMiB);
    uint32_t a = m.malloc(30 * kMiB, 0), b = m.malloc(30 * kMiB, 0);
    release(m, a);
    release(m, b);
    m.malloc(40 * kMiB, 0);  // no cached block fits: 60 MiB cached is above 50, so both old blocks go
    return m.reserved();
  };
  EXPECT_EQ(run("per_process_memory_fraction:0.5,garbage_collection_threshold:0.5"), 40 * kMiB);
  EXPECT_EQ(run("garbage_collection_threshold:0.5"), 100 * kMiB);
  EXPECT_EQ(run("per_process_memory_fraction:0.5"), 100 * kMiB);
}

TEST(AllocatorModel, MemoryFractionLimitsReserved) {
  AllocatorModel m = model("per_process_memory_fraction:0.25", 400 * kMiB, 400 * kMiB);
  m.malloc(60 * kMiB, 0);
  m.malloc(60 * kMiB, 0);  // 120 > 100 MiB allowed
  EXPECT_EQ(m.ooms(), 1u);
}

TEST(AllocatorModel, LayoutListsSegmentsAndBlocks) {
  AllocatorModel m = model("");
  uint32_t a = m.malloc(5 * kMiB, 0, 7);
  m.malloc(5 * kMiB, 0, 8);
  release(m, a);
  auto layout = m.layout();
  ASSERT_EQ(layout.size(), 1u);
  ASSERT_EQ(layout[0].blocks.size(), 3u);
  EXPECT_FALSE(layout[0].blocks[0].allocated);
  EXPECT_EQ(layout[0].blocks[1].tag, 8u);
  EXPECT_EQ(layout[0].blocks[2].size, 10 * kMiB);
  EXPECT_EQ(layout[0].size, 20 * kMiB);
}

}  // namespace
}  // namespace memrec
