// The calling thread's user-space instructions and cycles, from the kernel's hardware counters (perf_event_open).
// Counted, not timed: they do not move with the clock speed or with other threads on the core, which the timed
// per-allocation loops do by more than the differences they measure. Where the machine gives no hardware counters
// (most VMs) the counters are not available and read nothing.
#pragma once

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace memrec::bench {

class ThreadCounters {
 public:
  ThreadCounters() {
    leader_ = open_counter(PERF_COUNT_HW_INSTRUCTIONS, -1);
    if (leader_ < 0) return;
    cycles_ = open_counter(PERF_COUNT_HW_CPU_CYCLES, leader_);
    if (cycles_ < 0) close_all();
  }
  ThreadCounters(const ThreadCounters&) = delete;
  ThreadCounters& operator=(const ThreadCounters&) = delete;
  ~ThreadCounters() { close_all(); }

  bool available() const { return leader_ >= 0; }

  void start() {
    if (!available()) return;
    ioctl(leader_, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
    ioctl(leader_, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
  }

  struct Counts {
    uint64_t instructions = 0, cycles = 0;
  };

  // Stops counting; the counts since start(). Zero when not available or when the kernel multiplexed the counters
  // (they did not run the whole time), which would make them estimates.
  Counts stop() {
    Counts c;
    if (!available()) return c;
    ioctl(leader_, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
    struct {
      uint64_t nr, enabled, running, values[2];
    } r{};
    if (read(leader_, &r, sizeof r) != static_cast<ssize_t>(sizeof r) || r.nr != 2 || r.enabled != r.running) return c;
    c.instructions = r.values[0];
    c.cycles = r.values[1];
    return c;
  }

 private:
  static int open_counter(uint64_t config, int group) {
    perf_event_attr a;
    std::memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = config;
    a.disabled = group < 0 ? 1 : 0;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    return static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, group, PERF_FLAG_FD_CLOEXEC));
  }
  void close_all() {
    if (cycles_ >= 0) close(cycles_);
    if (leader_ >= 0) close(leader_);
    cycles_ = leader_ = -1;
  }

  int leader_ = -1, cycles_ = -1;
};

}  // namespace memrec::bench
