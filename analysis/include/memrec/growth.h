// `memrec growth`: memory that grows step over step. Compares the memory live at the start of each training step
// (a "step N" scope; in PyTorch's snapshots, a step inferred from the phases), finds where the warm-up ends, the
// slope after it, the sites whose live bytes grow with it, and the step at which the device would be full.
// report/ (memrec/growth_output.h) prints it as text, JSON and HTML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

struct GrowthOptions {
  std::optional<uint8_t> device;          // unset: choose_device's default
  std::optional<uint64_t> device_memory;  // --device-memory; unset: the recording's (device_limits)
  std::optional<uint64_t> first_step, last_step;  // step numbers, both included (--steps A..B)
};

// The state at a step's start: what was live just before its first event.
struct GrowthStep {
  uint64_t step = 0;     // N of "step N" (inferred steps count from 0)
  int64_t start_ns = 0;  // since the device's first event
  uint64_t allocated = 0, reserved = 0;
};

// A site whose bytes live at the step starts grow after the warm-up: keyed as `stats --by stack` keys its groups
// (allocation_site), so the names match.
struct GrowingGroup {
  std::string site;
  std::string module, owner;  // of its largest block that outlives its step; "" where unknown
  double bytes_per_step = 0;  // the slope of the site's bytes live at the settled step starts
  double blocks_per_step = 0; // the same slope of its blocks live then (0 for a buffer replaced by a larger one)
  uint64_t first_step = 0;    // the first step one of its blocks outlived
  uint64_t live_at_end = 0;   // its bytes live at the last step's start (the last step runs to the program's exit)
  std::vector<std::string> stack;  // the frames the user reads of that block's stack (user_frames), innermost first
  std::vector<uint32_t> blocks;    // its blocks that outlived their step: ids in Replay(s, device).allocations()
};

enum class GrowthVerdict : uint8_t { grows, steady, too_few_steps };
std::string_view to_string(GrowthVerdict v);  // "grows", "steady", "too few steps"

struct GrowthResult {
  uint8_t device = 0;
  bool inferred_steps = false;  // steps from the inferred phases (a PyTorch snapshot), not from "step N" scopes
  std::vector<GrowthStep> steps;
  std::optional<uint64_t> settled_from;  // the first settled step (a step number); unset without steps
  double allocated_per_step = 0, reserved_per_step = 0;  // bytes per step after the warm-up
  GrowthVerdict verdict = GrowthVerdict::too_few_steps;
  std::vector<GrowingGroup> growing;  // only when the verdict is grows; fastest first
  std::optional<uint64_t> device_memory;  // what the projection fills (device_limits' limit); unset: unknown
  bool device_memory_given = false;
  int64_t median_step_ns = 0;
  std::optional<uint64_t> projected_full_step;  // the step whose peak would pass device_memory
  std::optional<double> projected_full_in_s;    // from the last step's start to it, at median_step_ns a step
  std::vector<std::string> warnings;            // the file's notes
};

// Fewer settled steps than this and the verdict is too_few_steps.
inline constexpr size_t kGrowthMinSteps = 4;

// Throws Error when first_step or last_step names a step the recording does not have.
GrowthResult growth(const Snapshot& s, const GrowthOptions& o);

}  // namespace memrec
