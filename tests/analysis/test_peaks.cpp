// A recording's peaks, where they fell and what held the allocated one, on a rank's step whose answers are known
// by construction (tests/common/rank_runs.h).
#include <gtest/gtest.h>

#include "common/rank_runs.h"
#include "memrec/peaks.h"

namespace memrec {
namespace {

constexpr uint64_t MiB = test::kMiB;

TEST(Peaks, EachPeakWithTheScopesHoldingIt) {
  Snapshot s = test::rank_run(3 * MiB, 1'000, "");
  PeakSummary p = summarize_peaks(s, 0, 5);
  EXPECT_EQ(p.allocated.peak.bytes, 23 * MiB);
  EXPECT_EQ(p.allocated.since_start_ns, 260 - 10) << "the extra block, after the first event (the segment)";
  EXPECT_EQ(p.allocated.scopes, (std::vector<std::string>{"step 0", "forward", "layers.1.mlp"}));
  EXPECT_EQ(p.reserved.peak.bytes, 64 * MiB);
  EXPECT_EQ(p.reserved.since_start_ns, 0);
  EXPECT_EQ(p.reserved.scopes, std::vector<std::string>{"step 0"});
  EXPECT_FALSE(p.caching) << "no device type recorded";
  s.metadata["device.0.type"] = "cuda";
  EXPECT_TRUE(summarize_peaks(s, 0, 5).caching);
}

TEST(Peaks, TheLargestGroupsAtTheAllocatedPeak) {
  PeakSummary p = summarize_peaks(test::rank_run(3 * MiB, 1'000, ""), 0, 2);
  ASSERT_EQ(kPeakGroupings[1], GroupBy::module);
  const std::vector<Group>& modules = p.at_peak[1];
  ASSERT_EQ(modules.size(), 2u) << "the top 2 of 3: layers.1.mlp, layers.0.mlp, none (the parameters)";
  EXPECT_EQ(modules[0].key, "layers.1.mlp");
  EXPECT_EQ(modules[0].bytes, 11 * MiB);
  EXPECT_EQ(modules[0].count, 2u);
  EXPECT_EQ(modules[1].key, "layers.0.mlp");
  EXPECT_EQ(modules[1].bytes, 8 * MiB);
  ASSERT_EQ(kPeakGroupings[0], GroupBy::stack);
  ASSERT_EQ(p.at_peak[0].size(), 1u) << "no stacks recorded: one group";
  EXPECT_EQ(p.at_peak[0][0].bytes, 23 * MiB);
}

TEST(Peaks, APeakBeforeTheFirstEventHasNoGroups) {
  Snapshot s;
  s.events.push_back(Event{.time_ns = 5, .addr = 0x10, .size = 64, .action = Action::free_requested});
  PeakSummary p = summarize_peaks(s, 0, 5);
  EXPECT_EQ(p.allocated.peak.step, kNoEvent);
  EXPECT_TRUE(p.allocated.scopes.empty());
  for (const auto& groups : p.at_peak) EXPECT_TRUE(groups.empty());
}

}  // namespace
}  // namespace memrec
