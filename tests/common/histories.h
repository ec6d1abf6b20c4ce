// Small synthetic histories that several tests read.
#pragma once

#include <cstdint>
#include <string>

#include "memrec/snapshot.h"

namespace memrec::test {

// No test data holds an OOM or CUPTI kernels: a 2 MiB segment holding a 1 MiB block, then a 4 MiB request that fails
// with 512 KiB free on the device; gemm runs twice (100 and 300 ns), relu once (50 ns).
inline Snapshot oom_with_kernels() {
  constexpr uint64_t kMiB = 1 << 20;
  Snapshot s;
  s.events = {{.time_ns = 1, .addr = 0x100000, .size = 2 * kMiB, .action = Action::segment_alloc},
              {.time_ns = 2, .addr = 0x100000, .size = kMiB, .action = Action::alloc},
              {.time_ns = 3, .addr = 512 * 1024, .size = 4 * kMiB, .action = Action::oom}};
  uint32_t gemm = s.strings.intern("void gemm<float, 128>(float const*)"), relu = s.strings.intern("relu_kernel");
  s.kernels = {{.start_ns = 10, .end_ns = 110, .name = gemm}, {.start_ns = 200, .end_ns = 500, .name = gemm},
               {.start_ns = 600, .end_ns = 650, .name = relu}};
  return s;
}

// A training loop shaped like a recorded one, `steps` steps long: in each step scope, a forward phase whose four
// layers (module scopes) allocate ten activations each, one op scope per alloc, and a backward phase that frees them
// last first; 120 events and 47 scopes a step, around one block held throughout.
inline Snapshot training_loop(int steps) {
  Snapshot s;
  auto scope = [&](ScopeKind kind, const std::string& name, int64_t start, int64_t end, uint32_t parent) {
    s.scopes.push_back(Scope{start, end, s.strings.intern(name), parent, kind, 0});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  };
  auto event = [&](int64_t t, Action a, uint64_t addr, uint32_t scope_id) {
    s.events.push_back(Event{.time_ns = t, .addr = addr, .size = 4096, .scope = scope_id, .action = a});
  };
  event(0, Action::alloc, 0x10, 0);
  for (int k = 0; k < steps; ++k) {
    int64_t t = 10 + int64_t{k} * 1000;
    uint32_t step = scope(ScopeKind::step, "step " + std::to_string(k), t, t + 999, 0);
    uint32_t forward = scope(ScopeKind::phase, "forward", t, t + 499, step);
    uint32_t backward = scope(ScopeKind::phase, "backward", t + 500, t + 999, step);
    uint32_t layer = 0;
    for (int i = 0; i < 40; ++i) {
      int64_t at = t + i / 10 * 100 + i % 10 * 10;
      if (i % 10 == 0) layer = scope(ScopeKind::module, "layers." + std::to_string(i / 10), at, at + 99, forward);
      event(at + 1, Action::alloc, 0x100000 + i * 0x1000, scope(ScopeKind::op, "aten::mm", at, at + 5, layer));
    }
    for (int i = 39; i >= 0; --i) {
      event(t + 500 + (39 - i) * 10, Action::free_requested, 0x100000 + i * 0x1000, backward);
      event(t + 501 + (39 - i) * 10, Action::free_completed, 0x100000 + i * 0x1000, backward);
    }
  }
  return s;
}

}  // namespace memrec::test
