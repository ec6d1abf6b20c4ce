// The recorder's own time on the program's threads, which `memrec info` gives as what a recording cost the program:
// one call in kTimedEvery of each hook is timed with two stamps and stands for kTimedEvery calls, so the others pay
// one increment of a per-thread count. Timed: the allocator hooks (their stacks included), the op scope callbacks
// (memrec's part, not torch's RecordFunction around it) and the scope hooks' C part (module, phase and step scopes
// opened and closed, backward nodes' module scopes).
#pragma once

#include <atomic>
#include <cstdint>

#include "clock.h"

namespace memrec::detail {

enum class HookKind : uint8_t { event, op, scope };
inline constexpr int kHookKinds = 3;
inline constexpr uint32_t kTimedEvery = 16;

struct HookTimes {
  std::atomic<int64_t> stamps[kHookKinds]{};  // the timed calls' time, in stamps (clock.h)
  std::atomic<uint64_t> timed[kHookKinds]{};  // calls timed
};
extern constinit HookTimes g_hook_times;

inline constinit thread_local uint32_t t_event_calls = 0;  // allocator hook calls of this thread

// Times the enclosing call when `calls` (a count of the thread's calls of this hook) comes round to it.
class HookTimer {
 public:
  HookTimer(HookKind kind, uint32_t& calls) : kind_(kind), start_(++calls % kTimedEvery == 0 ? stamp() : 0) {}
  ~HookTimer() {
    if (start_ == 0) return;
    auto i = static_cast<int>(kind_);
    g_hook_times.stamps[i].fetch_add(stamp() - start_, std::memory_order_relaxed);
    g_hook_times.timed[i].fetch_add(1, std::memory_order_relaxed);
  }
  HookTimer(const HookTimer&) = delete;
  HookTimer& operator=(const HookTimer&) = delete;

 private:
  HookKind kind_;
  int64_t start_;
};

void hook_times_reset();

}  // namespace memrec::detail
