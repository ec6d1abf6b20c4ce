// What `memrec run` prints once its recording is written: the mean step, the peaks and what held the allocated
// one, the recording's counts, what the recorder lost, and the files written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

// The recorder's counts the summary shows (RecorderStats' fields of those names): report/ knows no recorder.
struct RecorderCounts {
  uint64_t dropped = 0, dropped_buffer_full = 0, dropped_over_cap = 0, cpu_unwrapped = 0;
  uint64_t scopes_dropped = 0, kernels_dropped = 0;
  uint64_t unique_frames = 0, cpu_zero_allocs = 0;
  double symbolize_ms = 0;

  uint64_t all_dropped() const { return dropped + scopes_dropped + kernels_dropped; }
};

struct RunFacts {
  RecorderCounts recorder;
  std::vector<double> step_ms;  // the measured steps' times
  std::string output;           // the .memrec file written
  uint64_t output_bytes = 0;
};

// The summary of `recording` (device 0, the device a run records), through "wrote OUTPUT (SIZE)".
std::string run_summary_text(const Snapshot& recording, const RunFacts& run);

// The line that says the run's pickle is written: after the summary, since exporting it takes a while.
std::string pickle_written_text(const std::string& path);

}  // namespace memrec
