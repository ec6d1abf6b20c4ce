// The ranks of a data-parallel run side by side: which rank each file holds, one time axis for all of them,
// each rank's peaks and the rank that diverges from the others. Shared by `memrec stats --by rank` and the
// viewer's ranks view.
//
// Files are read in parallel, and each recording is reduced to a RankRecording (peaks, what was live at the
// allocated peak by group, a fixed-size memory curve) before its thread reads the next: memory stays bounded by
// the number of threads, not the number of files, so 64 ranks of a long run compare on one host.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memrec/analysis.h"
#include "memrec/replay.h"

namespace memrec {

// The groupings the divergence is explained by, in the order RankRecording::at_peak holds them.
inline constexpr std::array<GroupBy, 4> kRankGroupings = {GroupBy::layer, GroupBy::module, GroupBy::category,
                                                          GroupBy::stack};

// What a comparison across ranks keeps of one recording. Times are on the file's own clock.
struct RankRecording {
  std::string path;
  int rank = -1;
  std::string rank_from;  // where the rank came from: "metadata" (RANK when recorded), "file name", "order"
  std::string host;       // metadata "host"; empty when unknown (PyTorch pickles)
  std::string pid, world_size;  // metadata "pid" and "world_size" (WORLD_SIZE); empty when unknown
  uint8_t device = 0;
  uint64_t events = 0;
  int64_t begin_ns = 0, end_ns = 0;       // first and last event of the device
  std::optional<int64_t> first_step_ns;   // start of the first training step scope
  int64_t offset_ns = 0;                  // added to the file's times to put them on the common axis
  Peak peak_allocated, peak_reserved;     // time_ns: when the peak began
  std::string peak_step, peak_phase;      // the training step and phase holding the allocated peak
  size_t ooms = 0;
  std::vector<std::string> warnings;
  std::array<std::vector<Group>, kRankGroupings.size()> at_peak;  // live at the allocated peak, by each grouping

  // The memory curve at a fixed resolution (RankOptions::buckets): bucket i covers
  // [begin_ns + i * bucket_ns, begin_ns + (i + 1) * bucket_ns) and holds the highest allocated and reserved bytes
  // in force during it, so the highest bucket is the peak exactly.
  int64_t bucket_ns = 1;
  std::vector<uint64_t> allocated_max, reserved_max;

  // The highest {allocated, reserved} in force during [t0, t1) of the file's clock; nullopt when the range misses
  // the recording (from its first event to its last) or no curve was kept.
  std::optional<std::pair<uint64_t, uint64_t>> highest_in(int64_t t0, int64_t t1) const;
};

struct RankOptions {
  std::optional<uint8_t> device;  // unset: each file's choose_device default
  size_t buckets = 0;             // memory curve resolution; 0 keeps none (stats needs none)
  unsigned threads = 0;           // 0: one per hardware thread, at most one per file
};

struct RankSet {
  std::vector<RankRecording> ranks;  // by rank
  std::vector<std::string> hosts;    // sorted; empty when no rank recorded its host
  // One host (or none recorded): the ranks share its clock. Several: their clocks differ, so each rank's first
  // training step is aligned on rank step_reference's (-1: no rank recorded a step), except the unaligned ranks',
  // which recorded no step and keep their own clock.
  bool aligned_on_steps = false;
  int step_reference = -1;
  std::vector<int> unaligned;
  int64_t origin_ns = 0;             // the common axis's zero (the earliest aligned first event)
  int64_t duration_ns = 0;
  // Indexes into ranks: the rank with the median allocated peak (the lower one of an even count), and the rank
  // furthest from it (the higher peak on ties, so with two ranks the one that peaks higher). nullopt with one rank.
  std::optional<size_t> median, furthest;
  int64_t delta_peak_allocated = 0, delta_peak_reserved = 0;  // the furthest rank's peaks minus the median's

  // A file time of ranks[i] on the common axis (ns after origin_ns).
  int64_t on_axis(size_t i, int64_t t) const { return t + ranks[i].offset_ns - origin_ns; }
};

// The rank in a file name: run.rank3.memrec, snapshot_rank3.pickle, rank-3.pickle; nullopt without one.
std::optional<int> rank_from_file_name(const std::string& path);

// The rank a recording holds and where that came from: metadata "rank" (RANK when it was recorded, "metadata"),
// else the file name ("file name"); nullopt when neither says.
std::optional<std::pair<int, std::string>> recording_rank(const Snapshot& s, const std::string& path);

// Reads every file. Throws Error naming the first that fails, or two files that cannot be ranks of one run: one file
// given twice, two that claim one rank, one process's recordings, different world sizes, or recordings that did not
// run at the same time.
RankSet load_ranks(const std::vector<std::string>& paths, const RankOptions& options);

}  // namespace memrec
