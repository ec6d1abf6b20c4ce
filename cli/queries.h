// What the analysis commands answer, apart from their flags: the command line prints an answer (its text, or its
// JSON with --json) and `memrec mcp` returns its JSON, so both come from one function per command. Each loads its
// files (notes on stderr), computes, and renders through report/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memrec/range.h"
#include "memrec/scale.h"

namespace memrec::cli {

struct Answer {
  nlohmann::json json;
  std::string text;
};

inline constexpr size_t kMaxTop = 100000;  // --top's range is 1..kMaxTop

// --range T1..T2 or --steps A..B as given (empty: not given): the part of a recording to read (memrec/range.h).
struct RangeFlags {
  std::string range, steps;
  std::optional<Range> parsed() const { return parse_range(range, steps); }
};

// One file; with by "rank", the files of a run's ranks (ranks_answer).
struct StatsQuery {
  std::vector<std::string> files;
  std::string at = "peak", by = "stack";
  size_t top = 15;
  std::optional<uint8_t> device;
  bool kernels = false, full_stack = false;
  RangeFlags part;  // one file only: --by rank compares the ranks' whole runs
};
Answer stats_answer(const StatsQuery& q);

struct DiffQuery {
  std::string a, b, by = "stack";
  size_t top = 15;
  std::optional<uint8_t> device;
  RangeFlags part;  // the same part of both runs
};
Answer diff_answer(const DiffQuery& q);

// `stats --by rank FILES`: the ranks of one run compared at their peaks.
struct RanksQuery {
  std::vector<std::string> files;
  size_t top = 15;
  std::optional<uint8_t> device;
};
Answer ranks_answer(const RanksQuery& q);

struct CheckpointQuery {
  std::string file, layers = "all";  // 'all' or layers as stats --by layer names them: layers.3, or 0,3,5
  std::optional<uint8_t> device;
};
Answer checkpoint_answer(const CheckpointQuery& q);

struct AllocatorQuery {
  std::string file;
  std::optional<std::string> conf;  // PYTORCH_CUDA_ALLOC_CONF's syntax; unset: the recording's
  std::string device_memory;        // "80GiB"; empty: the recording's
  bool sweep = false;
  std::optional<uint8_t> device;
};
Answer allocator_answer(const AllocatorQuery& q);

// Two or three runs of one program at different sizes (batch or sequence length), one size each.
struct ScaleQuery {
  std::vector<std::string> files;
  std::string sizes, predict, device_memory;  // "2,4"; "8,16"; "80GiB" (empty: the recording's)
  std::optional<std::string> conf;
  std::optional<uint8_t> device;
  bool fit = false;
};
Answer scale_answer(const ScaleQuery& q);
// The runs loaded and predicted. With `drawn_over` (an index into q.files), each prediction's curve on that run's
// clock, and the runs taken in the order of their sizes.
ScaleWhatif scale_prediction(const ScaleQuery& q, std::optional<size_t> drawn_over = std::nullopt);

// `--scale-with RUN --sizes 4,2 --predict 8` on report and view: the prediction at one size (memrec whatif scale)
// drawn as a ghost over FILE's timeline; --sizes gives FILE's size first, then each --scale-with run's.
struct GhostFlags {
  std::vector<std::string> with;
  std::string sizes, predict, device_memory;
  std::optional<std::string> conf;
  bool given() const { return !with.empty(); }
  // The flags as given, for the `memrec view --screenshot` that `memrec report` runs.
  std::vector<std::string> args() const;
};
// The prediction at --predict's size with its curve on FILE's clock; throws Error, one sentence, on bad flags.
ScaleWhatif ghost_prediction(const GhostFlags& g, const std::string& file, std::optional<uint8_t> device);

// `memrec advise RUN [--scale-with OTHER... --sizes A,B]`: --sizes gives RUN's size first, then each OTHER's.
struct AdviseQuery {
  std::string file;
  std::vector<std::string> scale_with;
  std::string sizes, device_memory;  // "4,2"; "80GiB" (empty: the recording's)
  std::optional<uint8_t> device;
};
Answer advise_answer(const AdviseQuery& q);

// `memrec growth FILE [--steps A..B] [--device-memory BYTES]`: growth across steps (memrec/growth.h).
struct GrowthQuery {
  std::string file, steps, device_memory;  // "3..20" (empty: every step); "80GiB" (empty: the recording's)
  std::optional<uint8_t> device;
};
Answer growth_answer(const GrowthQuery& q);

Answer info_answer(const std::string& file);

// Prints the answer as a command does: its JSON (indented) or its text.
void print_answer(const Answer& a, bool json);

}  // namespace memrec::cli
