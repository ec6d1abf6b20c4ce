// What `memrec run` prints once its recording is written, for a rank's step whose answers are known by
// construction (tests/common/rank_runs.h) and recorder counts written by hand.
#include <gtest/gtest.h>

#include "common/rank_runs.h"
#include "memrec/run_summary.h"

namespace memrec {
namespace {

constexpr uint64_t MiB = test::kMiB;

// A rank's step at a millisecond scale: its events and scopes 100000 times further apart.
Snapshot slow_rank_step() {
  Snapshot s = test::rank_run(3 * MiB, 0, "");
  for (size_t i = 0; i < s.events.size(); ++i) s.events.update(i, [](Event& e) { e.time_ns *= 100'000; });
  for (size_t i = 1; i < s.scopes.size(); ++i)
    s.scopes.update(i, [](Scope& sc) { sc.start_ns *= 100'000, sc.end_ns *= 100'000; });
  return s;
}

RunFacts facts() {
  RunFacts run;
  run.recorder.unique_frames = 12;
  run.recorder.symbolize_ms = 3.5;
  run.step_ms = {10, 20};
  run.output = "run.memrec";
  run.output_bytes = 1536;
  return run;
}

TEST(RunSummary, CudaRun) {
  Snapshot s = slow_rank_step();
  s.metadata["device.0.type"] = "cuda";
  EXPECT_EQ(run_summary_text(s, facts()),
            "mean step: 15.0 ms over 2 steps\n"
            "peak allocated: 23.00 MiB at 25.0 ms (step 0 / forward / layers.1.mlp)\n"
            "peak reserved:  64.00 MiB at 0.0 ms (step 0)\n"
            "top allocation sites at the peak:\n"
            "   23.00 MiB       4 blocks  <no stack>\n"
            "top modules at the peak:\n"
            "   11.00 MiB       2 blocks  layers.1.mlp\n"
            "    8.00 MiB       1 blocks  layers.0.mlp\n"
            "    4.00 MiB       1 blocks  <none>\n"
            "top ops at the peak:\n"
            "   23.00 MiB       4 blocks  <none>\n"
            "events: 8  kernels: 0  scopes: 5  unique frames: 0  dropped: 0\n"
            "symbolized 12 unique addresses in 3.5 ms (on the drain thread, as they first appeared)\n"
            "wrote run.memrec (1.50 KiB)\n");
  EXPECT_EQ(pickle_written_text("run.pickle"), "wrote run.pickle (open in pytorch.org/memory_viz)\n");
}

// A CPU run that lost records: no reserved peak, and a warning that says what was lost where.
TEST(RunSummary, CpuRunThatDroppedRecords) {
  RunFacts run = facts();
  run.step_ms.clear();
  run.recorder = {.dropped = 5, .dropped_buffer_full = 2, .dropped_over_cap = 1, .cpu_unwrapped = 2,
                  .scopes_dropped = 3, .kernels_dropped = 4, .unique_frames = 0, .cpu_zero_allocs = 9};
  std::string text = run_summary_text(slow_rank_step(), run);
  EXPECT_TRUE(text.starts_with("peak allocated: 23.00 MiB at 25.0 ms (step 0 / forward / layers.1.mlp)\n"
                               "peak reserved:  n/a (the CPU allocator keeps no cache)\n"
                               "top allocation sites at the peak:\n")) << text;
  EXPECT_TRUE(text.ends_with(
      "events: 8  kernels: 0  scopes: 5  unique frames: 0  dropped: 12\n"
      "WARNING: the recording is incomplete: 5 allocator events dropped (2 with the buffer full, 1 over --max-events, "
      "2 CPU blocks not wrappable), 3 scope records and 4 kernels dropped\n"
      "symbolized 0 unique addresses in 0.0 ms (on the drain thread, as they first appeared)\n"
      "zero-byte CPU allocations (no memory, not events): 9\n"
      "wrote run.memrec (1.50 KiB)\n")) << text;
}

}  // namespace
}  // namespace memrec
