// What a recording cost the program it recorded, from the recorder's own timing of its hooks on the program's threads
// (metadata recorder.hook_ns.* and recorder.hook_calls.*, estimated from one call in 16): their time per step and
// its share of the median step. Not in it: torch's RecordFunction around each op callback, the Python part of the
// scope hooks, and torch's own cost of having global module hooks.
#pragma once

#include <cstdint>
#include <optional>

#include "memrec/snapshot.h"

namespace memrec {

struct RecordingCost {
  uint64_t events = 0, op_calls = 0, scope_calls = 0;
  int64_t events_ns = 0, ops_ns = 0, scopes_ns = 0;  // in the allocator hooks, op callbacks, scope hooks
  uint64_t steps = 0;   // step scopes that closed
  int64_t step_ns = 0;  // their median length (the last one often runs on to the program's end)
  int64_t span_ns = 0;  // from the first event to the last
  int64_t hooks_ns() const { return events_ns + ops_ns + scopes_ns; }
  // The hooks' time a step (in all, without steps) and its share of the median step (of the recording).
  int64_t hooks_per_step_ns() const { return steps ? hooks_ns() / int64_t(steps) : hooks_ns(); }
  double share() const;
};

// Unset for a file whose recorder did not time its hooks.
std::optional<RecordingCost> recording_cost(const Snapshot& s);

}  // namespace memrec
