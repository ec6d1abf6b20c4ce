// `memrec advise`: what to change in the program to lower its peak, ranked by the bytes each change saves. Every
// number comes from an engine that already answers its own question: the checkpointing replay (whatif.h), the
// allocator model's sweep (allocator_whatif.h), the fit across sizes (scale.h), or the blocks live at the peak
// (categories and owners, analysis.h), so that `advise` and the engine's own command give the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memrec/scale.h"
#include "memrec/snapshot.h"

namespace memrec {

enum class AdviceKind : uint8_t {
  checkpoint, allocator, growth, batch, grads_outside_backward, optimizer_temporaries, loss_logits, precision,
  duplicate_parameters, combined
};
std::string_view to_string(AdviceKind k);

// replayed: the run's history replayed with the change; scaled: fitted from runs at two or three sizes; counted: the
// bytes live at the peak that the change frees, where no replay exists (an upper bound on the saving).
enum class AdviceMethod : uint8_t { replayed, scaled, counted };
std::string_view to_string(AdviceMethod m);

// A pair of peaks; reserved is unset on a CPU (no caching allocator) and, for a counted change, where no replay
// says what the allocator would keep.
struct PeakBytes {
  uint64_t allocated = 0;
  std::optional<uint64_t> reserved;
};
struct SavedBytes {
  int64_t allocated = 0;  // negative where the change costs memory (a larger batch)
  std::optional<int64_t> reserved;
};

// What a change rests on: a layer and what checkpointing it alone saves, a site and the bytes it holds at the peak.
struct Evidence {
  std::string what;
  uint64_t bytes = 0;
};

struct Advice {
  AdviceKind kind = AdviceKind::checkpoint;
  std::string change;  // one sentence naming the program's own modules, sites, optimizer or settings
  AdviceMethod method = AdviceMethod::counted;
  SavedBytes saves;
  PeakBytes peak_after;
  std::optional<int64_t> cost_ns;  // checkpointing: recompute time from the recorded kernels' GPU time
  std::vector<Evidence> evidence;
  std::vector<std::string> layers;  // checkpointing: the layers to wrap (what gpu-check applies)
  std::string settings;             // allocator: the PYTORCH_CUDA_ALLOC_CONF value
  // The blocks the evidence names, as ids into Replay(s, device).allocations(): the activations made in the layers'
  // forward passes and live at the peak, a growing site's blocks kept past their step, the counted blocks. The viewer
  // marks them on the timeline.
  std::vector<uint32_t> blocks;
  // With AdviseOptions::curves, a replayed or scaled change: the bytes after each event of the run under the change,
  // on this run's clock (reserved under the allocator model where the device has one).
  std::optional<ScaleCurve> curve;
};

struct AdviseOptions {
  std::optional<uint64_t> device_memory;
  // With --scale-with: this run first, then the others, each with its size (the largest size that fits).
  std::span<const ScaleRun> scale_runs;
  bool curves = false;  // give each replayed or scaled change its curve (Advice::curve): one more replay each
};

struct Advise {
  uint8_t device = 0;
  bool cpu = false;
  PeakBytes peak;                         // recorded
  std::vector<Advice> advice;             // largest saving first; then `combined`, then `batch`
  std::vector<std::string> not_assessed;  // "growth: no step scopes ...": a lever and why it was not looked at
  std::vector<std::string> warnings;      // the input's notes (Snapshot::warnings)
};

// Throws Error only for bad options (scale runs that do not make a prediction); a lever that cannot be assessed on
// this recording lands in not_assessed.
Advise advise(const Snapshot& s, uint8_t device, const AdviseOptions& o);

}  // namespace memrec
