// `memrec stats` and `memrec diff` as plain results: the peaks of one run and what was live at an instant, its top
// sites, sizes, fragmentation, OOMs and kernels; and how two runs differ. report/ (memrec/stats_output.h) prints
// them as text, JSON and HTML, so every output shows the same numbers.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>


#include "memrec/allocator_whatif.h"
#include "memrec/analysis.h"
#include "memrec/device_memory.h"

namespace memrec {

struct StatsOptions {
  std::optional<int64_t> at_ns;  // offset from the first event; unset = the allocated peak
  GroupBy by = GroupBy::stack;
  size_t top = 15;
  std::optional<uint8_t> device;  // unset: choose_device's default
  bool kernels = false;  // add the top kernels by GPU time (torch.profiler's key_averages)
  bool full_stack = false;  // text: print each stack row's whole stack, frames marked site/user/internal
};

// Parses "peak" (nullopt), or a time since the first event like "1.5s", "250ms", "40us", "1200ns" (a plain
// number is seconds). Throws Error for anything else and for a time too large to count in int64 nanoseconds.
std::optional<int64_t> parse_at(const std::string& text);

// The instant `--at` names on one device: the last event at or before that time, or the allocated peak; `moved`
// says why it is not the time asked for.
struct InstantShown {
  enum class Moved : uint8_t { no, no_events, past_end };
  uint32_t step = kNoEvent;
  Moved moved = Moved::no;
  int64_t asked_ns = 0, duration_ns = 0;  // past_end: the time asked for and the recording's length
};
InstantShown find_instant(const Replay& r, std::optional<int64_t> at_ns);

// Times below are offsets from the device's first event; an event of -1 is the state before the first.
struct PeakShown {
  uint64_t bytes = 0;
  int64_t time_ns = 0;
  int64_t event = -1;
  std::string training_step;  // the step scope holding it, or ""
};
// A replay's peak as stats shows it: its time from the first event and the step scope holding it.
PeakShown peak_shown(const Snapshot& s, const Replay& r, const Peak& p);

// The instant the live groups are taken at.
struct LiveAt {
  std::optional<int64_t> requested_ns;  // unset: the allocated peak
  InstantShown instant;
  int64_t time_ns = 0;
  int64_t event = -1;
  uint64_t allocated = 0, reserved = 0;
};

// A group of memory as stats shows it: a Group with its share, and for a stack group its first stack's site, op
// and every frame (innermost first), which --full-stack prints.
struct GroupRow {
  struct Frame {
    std::string label;
    bool user = false, site = false;
  };
  struct Stack {
    std::string site, op;
    uint32_t stacks = 0;  // distinct stacks in the group
    std::vector<Frame> frames;
  };
  std::string key;
  uint64_t bytes = 0, count = 0;
  double share = 0;  // of the allocated bytes
  std::array<uint64_t, kCategoryCount> by_category{};
  std::optional<Stack> stack;
  uint64_t owned = 0;  // bytes of blocks with an owner (Group::owned)
  std::vector<std::pair<std::string, uint64_t>> owners;  // the largest owners of those bytes (kOwnersPerGroup)
};

struct SiteRow {
  std::string key, site;
  uint64_t bytes = 0, count = 0;
};

// Recorded allocations whose size lies in [min, max].
struct SizeBucket {
  uint64_t min = 0, max = 0, count = 0, bytes = 0;
};

struct OomShown {
  int64_t time_ns = 0;
  uint32_t event = 0;
  uint64_t requested = 0, device_free = 0;  // device_free: unknown (0) for the CPU allocator
  uint64_t allocated = 0, reserved = 0;
  uint64_t cached = 0;  // reserved - allocated in the known segments
  Fragmentation fragmentation;
  bool caused_by_fragmentation = false;
  std::vector<GroupRow> top_sites;
};

struct StatsResult {
  uint8_t device = 0;
  uint32_t events = 0;
  bool complete = true;
  std::vector<std::string> warnings;  // the notes of a file cut short
  uint64_t dropped_events = 0;
  int64_t duration_ns = 0;
  PeakShown peak_allocated, peak_reserved;
  LiveAt at;
  GroupBy by = GroupBy::stack;
  std::vector<GroupRow> live;  // at most `top` rows, then one "<N more>" row for the rest
  bool full_stack = false;
  std::vector<SiteRow> top_by_bytes, top_by_count;  // over the whole run
  std::vector<SizeBucket> size_histogram;           // power-of-two buckets, empty ones left out
  Fragmentation fragmentation;                      // at the instant
  FragmentationCulprits fragmentation_culprits;
  std::vector<OomShown> ooms;
  std::vector<KernelStats> kernels;  // with StatsOptions::kernels, at most `top`
  std::string kernel_steps;          // with StatsOptions::kernels: kernel_steps_note()
  std::optional<DeviceMemoryStats> device_memory;
};
StatsResult stats(const Snapshot& s, const StatsOptions& o);

// Two sets of groups matched by key, largest change first.
struct GroupChange {
  std::string key;
  uint64_t a_bytes = 0, b_bytes = 0;
  int64_t delta = 0;  // b - a
  uint64_t a_count = 0, b_count = 0;
};
struct GroupChanges {
  size_t changed = 0;             // groups whose bytes differ
  std::vector<GroupChange> rows;  // at most `top`, unchanged ones included
};
GroupChanges group_changes(std::span<const Group> a, std::span<const Group> b, size_t top);

struct DiffSide {
  uint8_t device = 0;
  uint64_t peak_allocated = 0, peak_reserved = 0;
  uint32_t events = 0;
};

// Peaks of two runs and what was live at each, matched by group key (frame and scope names, not addresses).
struct DiffResult {
  GroupBy by = GroupBy::stack;
  std::vector<std::string> warnings;
  DiffSide a, b;
  int64_t delta_peak_allocated = 0, delta_peak_reserved = 0;
  GroupChanges changes;
  std::optional<std::pair<int, int>> ranks;  // two ranks of one run: a's and b's (different_ranks)
};
DiffResult diff(const Snapshot& a, const Snapshot& b, const StatsOptions& o);

// The ranks of two recordings when both say which rank they hold and these differ (recording_rank).
std::optional<std::pair<int, int>> different_ranks(const Snapshot& a, const std::string& path_a, const Snapshot& b,
                                                   const std::string& path_b);

}  // namespace memrec
