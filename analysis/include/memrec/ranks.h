// The ranks of a data-parallel run side by side: which rank each file holds, one time axis for all of them,
// each rank's peaks and the rank that diverges from the others. Shared by `memrec stats --by rank` and the
// viewer's ranks view.
//
// A RankRecording is also each file's summary (docs/format.md, The summary; docs/ranks.md): `memrec record` and
// `memrec import` put it in the file and beside it as JSON, and the comparison reads those first, so 1,024 ranks
// compare in seconds whatever their length; the viewer draws each rank from its summary's memory curve and reads
// the file of the rank it shows. Files without one are read whole, in parallel, each reduced to a
// RankRecording before its thread reads the next: memory stays bounded by the threads, not the files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memrec/analysis.h"
#include "memrec/stats.h"
#include "memrec/replay.h"

namespace memrec {

// The groupings the divergence is explained by, in the order RankRecording::at_peak holds them.
inline constexpr std::array<GroupBy, 5> kRankGroupings = {GroupBy::layer, GroupBy::module, GroupBy::category,
                                                          GroupBy::owner, GroupBy::stack};
// A summary keeps the largest groups of each grouping; the others are summed in one group of this key.
inline constexpr size_t kSummaryGroups = 50;
inline constexpr std::string_view kOtherGroups = "(other groups)";
// A group as a summary keeps it: key, bytes and count.
inline Group summary_group(std::string key, uint64_t bytes, uint64_t count) {
  Group g;
  g.key = std::move(key), g.bytes = bytes, g.count = count;
  return g;
}

// A training step's start (a `step N` scope) with the bytes allocated and reserved then.
struct StepStart {
  std::string name;
  int64_t start_ns = 0;
  uint64_t allocated = 0, reserved = 0;
};

// A summary keeps at most this many step starts: evenly spaced, and the step holding the allocated peak.
inline constexpr size_t kSummarySteps = 256;

// A collective call of the process group (a `c10d::` op scope: c10d::allreduce_, c10d::allgather_, ...), numbered
// in call order on its rank: the n-th collective of every rank is the same call, which all ranks leave together.
struct Collective {
  std::string name;
  uint64_t seq = 0;
  int64_t start_ns = 0, end_ns = -1;
};
// A summary keeps the first collectives and those around each peak, this many of each.
inline constexpr size_t kSummaryCollectives = 64;
// The memory curve a summary keeps (what the viewer's ranks view draws of a rank): this many buckets over the run.
inline constexpr size_t kSummaryCurve = 512;

// What a comparison across ranks keeps of one recording. Times are on the file's own clock.
struct RankRecording {
  std::string path;
  int rank = -1;
  std::string rank_from;  // where the rank came from: "metadata" (RANK when recorded), "file name", "order"
  std::string host;       // metadata "host"; empty when unknown (PyTorch pickles)
  std::string pid, world_size;  // metadata "pid" and "world_size" (WORLD_SIZE); empty when unknown
  // "file summary", "summary JSON", or "whole file" (no summary: older, cut short; or one without the curve asked for)
  std::string read_from;
  bool complete = true;         // the file has its footer
  uint8_t device = 0;
  uint64_t events = 0;
  int64_t begin_ns = 0, end_ns = 0;       // first and last event of the device
  std::optional<int64_t> first_step_ns;   // start of the first training step scope
  int64_t offset_ns = 0;                  // added to the file's times to put them on the common axis
  Peak peak_allocated, peak_reserved;     // time_ns: when the peak began
  std::string peak_step, peak_phase;      // the training step and phase holding the allocated peak
  size_t ooms = 0;
  uint64_t dropped_events = 0;
  std::vector<std::string> warnings;
  // Live at the allocated and at the reserved peak, by each grouping: the kSummaryGroups largest and the others
  // summed under kOtherGroups (key, bytes and count only).
  std::array<std::vector<Group>, kRankGroupings.size()> at_peak, at_reserved_peak;
  std::vector<StepStart> steps;          // in time order; at most kSummarySteps (see there)
  std::vector<Collective> collectives;   // by seq: the first kSummaryCollectives and those around each peak

  // The memory curve in kSummaryCurve buckets (RankOptions::curve; empty when not asked for, or a summary written
  // without one): bucket i covers [begin_ns + i * bucket_ns, begin_ns + (i + 1) * bucket_ns) and holds the highest
  // allocated and reserved bytes in force during it, so the highest bucket is the peak exactly.
  int64_t bucket_ns = 1;
  std::vector<uint64_t> allocated_max, reserved_max;

  // The highest {allocated, reserved} in force during [t0, t1) of the file's clock; nullopt when the range misses
  // the recording (from its first event to its last) or no curve was kept.
  std::optional<std::pair<uint64_t, uint64_t>> highest_in(int64_t t0, int64_t t1) const;
};

struct RankOptions {
  std::optional<uint8_t> device;  // unset: each file's choose_device default
  // Each rank's memory curve: the summary's, else (no summary, or one without a curve) the file read whole.
  bool curve = false;
  unsigned threads = 0;           // 0: one per hardware thread, at most one per file
  size_t outliers = 5;            // the k ranks furthest from the median
  size_t histogram_bins = 10;
};

// A collective that an outlier rank peaked on one side of and most other ranks on the other.
struct PeakAgainstCollective {
  Collective collective;        // as the outlier rank recorded it
  int64_t peak_to_collective_ns = 0;  // the collective's start minus the rank's peak: > 0 peaked before it
  size_t others_after = 0, others_with_it = 0;  // other ranks that kept it, and those of them that peaked after it
};

// A group key whose bytes at the allocated peak differ between ranks, largest spread first.
struct GroupSpread {
  GroupBy by = GroupBy::layer;
  std::string key;
  uint64_t min_bytes = 0, median_bytes = 0, max_bytes = 0;
  int min_rank = -1, max_rank = -1;
};

struct Outlier {
  size_t index = 0;            // into RankSet::ranks
  int64_t delta_peak_allocated = 0;  // its peak minus the median rank's
  std::optional<PeakAgainstCollective> against;
};

struct PeakHistogram {
  uint64_t lo = 0, width = 1;   // bin i holds peaks in [lo + i * width, lo + (i + 1) * width); the last one also hi
  std::vector<size_t> counts;
};

// Reads a rank summary: a summary chunk's JSON or a `.summary.json` file's. Throws Error naming `path` when it is
// not one.
RankRecording rank_from_summary_json(const nlohmann::json& j, const std::string& path);
// A recording's summary as JSON: `stats --json`'s peak fields (bytes, time_ns from the recording's first event,
// event, training_step) and the rest of a RankRecording (docs/ranks.md, Summaries).
nlohmann::json rank_summary_json(const RankRecording& r);
// What the comparison keeps of a snapshot (its file at `path`).
RankRecording summarize_recording(const Snapshot& s, const std::string& path, const RankOptions& options = {});
// Puts the snapshot's summary in its file at `path` (a closed .memrec file holding `s`) and beside it as
// `path.summary.json`. Returns the JSON file's path.
std::string write_summary(const Snapshot& s, const std::string& path);
// True for a path ending in ".summary.json".
bool is_summary_json(const std::string& path);

struct RankSet {
  std::vector<RankRecording> ranks;  // by rank
  std::vector<std::string> hosts;    // sorted; empty when no rank recorded its host
  // One host (or none recorded): the ranks share its clock. Several: their clocks differ, so each rank's first
  // training step is aligned on rank step_reference's (-1: no rank recorded a step), except the unaligned ranks',
  // which recorded no step and keep their own clock.
  bool aligned_on_steps = false;
  // Several hosts, and the ranks recorded collectives: aligned on the collectives rank step_reference shares with
  // each (their ends, which all ranks leave together), else on the training steps' starts; the alignment's
  // uncertainty is the largest residual of a shared point once aligned, in ns (-1: not known).
  std::string aligned_on;  // "shared clock", "collectives", "steps", "first step"
  int64_t uncertainty_ns = -1;
  int step_reference = -1;
  std::vector<int> unaligned;
  int64_t origin_ns = 0;             // the common axis's zero (the earliest aligned first event)
  int64_t duration_ns = 0;
  // Indexes into ranks: the rank with the median allocated peak (the lower one of an even count), and the rank
  // furthest from it (the higher peak on ties, so with two ranks the one that peaks higher). nullopt with one rank.
  std::optional<size_t> median, furthest;
  int64_t delta_peak_allocated = 0, delta_peak_reserved = 0;  // the furthest rank's peaks minus the median's
  std::vector<Outlier> outliers;   // the k furthest from the median, furthest first
  PeakHistogram histogram;         // of the allocated peaks
  std::vector<GroupSpread> spreads;  // every grouping's keys whose bytes differ between ranks, largest spread first
  size_t read_whole = 0;           // ranks without a summary, read whole

  // A file time of ranks[i] on the common axis (ns after origin_ns).
  int64_t on_axis(size_t i, int64_t t) const { return t + ranks[i].offset_ns - origin_ns; }
};

// The rank in a file name: run.rank3.memrec, snapshot_rank3.pickle, rank-3.pickle; nullopt without one.
std::optional<int> rank_from_file_name(const std::string& path);

// The rank a recording holds and where that came from: metadata "rank" (RANK when it was recorded, "metadata"),
// else the file name ("file name"); nullopt when neither says.
std::optional<std::pair<int, std::string>> recording_rank(const Snapshot& s, const std::string& path);

// `memrec diff A B --by G` of two ranks' files from their summaries: nullopt unless both hold a summary (of
// `device`, when given) naming different ranks and G is one of kRankGroupings. What was live at each peak is
// compared as the summaries keep it: the 50 largest groups, the others summed under kOtherGroups.
std::optional<DiffResult> diff_ranks(const std::string& a, const std::string& b, GroupBy by, size_t top,
                                     std::optional<uint8_t> device);

// Reads every file. Throws Error naming the first that fails, or two files that cannot be ranks of one run: one file
// given twice, two that claim one rank, one process's recordings, different world sizes, or recordings that did not
// run at the same time.
RankSet load_ranks(const std::vector<std::string>& paths, const RankOptions& options);

}  // namespace memrec
