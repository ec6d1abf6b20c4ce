// Histories built by hand for the analysis tests: scopes and allocator events whose answers are known by
// construction.
#pragma once

#include <string>

#include "memrec/snapshot.h"

namespace memrec::test {

struct History {
  Snapshot s;
  // Adds a scope on device 0 and returns its id.
  uint32_t scope(ScopeKind kind, const std::string& name, int64_t start, int64_t end, uint32_t parent = 0) {
    s.scopes.push_back(Scope{start, end, s.strings.intern(name), parent, kind, 0});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  }
  void event(int64_t t, Action a, uint64_t addr, uint64_t size, uint32_t scope = 0, uint16_t stream = 0) {
    s.events.push_back(Event{.time_ns = t, .addr = addr, .size = size, .scope = scope, .stream = stream, .action = a});
  }
  // The program's free at t, and the allocator's `completed_after` nanoseconds later.
  void free(int64_t t, uint64_t addr, uint64_t size, int64_t completed_after = 1) {
    event(t, Action::free_requested, addr, size);
    event(t + completed_after, Action::free_completed, addr, size);
  }
};

}  // namespace memrec::test
