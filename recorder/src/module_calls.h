// Module calls and the autograd nodes their forward makes, so that backward runs each node inside the module scopes
// of the call that made it, with no hook on the program's tensors. Autograd numbers the nodes a thread makes in
// order (at::sequence_number, per thread); a call's nodes are those numbered from its start to its end on its
// thread, and as calls nest their ranges nest. A backward node tells its number and its forward thread
// (RecordFunction::seqNr and forwardThreadId). Calls are forgotten oldest first once more than a bound are kept.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memrec::detail {

// A call as a backward node sees it: its forward thread, its number there and its module's name.
struct CallRef {
  uint64_t thread = 0;
  uint64_t call = 0;
  const std::string* name = nullptr;  // interned: valid for the process's lifetime
};

// `name` kept for the process's lifetime: the same pointer for the same text.
const std::string* intern_name(std::string_view name);

// A module call named `name` (interned) begins on this thread inside call `parent` of this thread (0: none).
// Returns the call's number on this thread, or 0 when it could not be kept.
uint64_t module_call_begins(const std::string* name, uint64_t parent);
// The call ends on the thread it began on; a call that made no node is forgotten at once.
void module_call_ends(uint64_t call);
// The calls holding node `seq` of forward thread `thread`, outermost first: the innermost `max` of them. Returns
// how many were written.
int module_calls_of_node(uint64_t thread, uint64_t seq, CallRef* out, int max);

}  // namespace memrec::detail
