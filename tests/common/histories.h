// Small synthetic histories that several tests read.
#pragma once

#include <cstdint>

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

}  // namespace memrec::test
