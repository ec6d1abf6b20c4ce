// What `memrec run` prints once its recording is written, for a rank's step whose answers are known by
// construction (tests/common/rank_runs.h) and recorder counts written by hand.
#include <gtest/gtest.h>

#include "common/rank_runs.h"
#include "memrec/run_summary.h"

namespace memrec {
namespace {

constexpr uint64_t MiB = test::kMiB;

RunFacts facts() {
  RunFacts run;
  run.recorder.unique_frames = 12;
  run.recorder.symbolize_ms = 3.25;
  run.step_ms = {10, 20};
  run.output = "run.memrec";
  run.output_bytes = 1536;
  return run;
}

TEST(RunSummary, Text) {
  Snapshot s = test::rank_run(3 * MiB, 1'000, "");
  s.metadata["device.0.type"] = "cuda";
  EXPECT_EQ(run_summary_text(s, facts()), "");
}

}  // namespace
}  // namespace memrec
