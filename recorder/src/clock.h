// The recorder's time stamps. Where the kernel keeps time with the TSC (its clock source is `tsc`: it found the TSC
// invariant and in step on every core), a stamp on the program's threads is one rdtsc, the counter the CUDA allocator
// already stamps its trace entries with, and the drain turns stamps into CLOCK_REALTIME ns (the clock of CUPTI and
// c10::getTime()) by the (ticks, ns) pairs it reads at every pass. Elsewhere a stamp is CLOCK_REALTIME ns already.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace memrec::detail {

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t tsc_ticks() {
#if defined(__x86_64__)
  return static_cast<int64_t>(__rdtsc());
#else
  return 0;
#endif
}

// Whether stamps are TSC ticks: the same answer for the whole process, set by choose_stamps() before a recording
// lets any hook through.
extern constinit std::atomic<bool> g_tsc_stamps;

inline int64_t stamp() { return g_tsc_stamps.load(std::memory_order_relaxed) ? tsc_ticks() : now_ns(); }

// The CPU's flags say its TSC is invariant (constant_tsc, nonstop_tsc) and the kernel's clock source is the TSC
// (x86-64 Linux only).
bool tsc_trusted();
void choose_stamps();

// The line through (ticks, ns) pairs: between two pairs, the line through them, as the kernel's own clock_gettime is
// between its updates; before the first pair and after the last, the nearest pair's line. Keeps the first pair and
// the recent ones: a stamp older than the recent ones (an op open for minutes) falls on the line from the first, off
// by the clock's slewing in between. A wall clock set back is followed from the pair after it on.
class TickLine {
 public:
  void clear() { pairs_.clear(); }
  void add_pair(int64_t ticks, int64_t ns);  // ignored unless its ticks come after the last pair's
  int64_t to_ns(int64_t ticks) const;        // 0 without a pair; with one, its ns
  int64_t duration_ns(int64_t ticks) const;  // by the slope from the first pair to the last; 0 without two

 private:
  struct Pair {
    int64_t ticks, ns;
  };
  static constexpr size_t kRecentPairs = 256;  // at one pair a drain (500 ms), about two minutes
  std::vector<Pair> pairs_;
};

// Turns stamps into CLOCK_REALTIME ns: TSC ticks by the pairs the drain reads at every pass, or nothing to do.
class TickClock {
 public:
  // Forgets earlier pairs; with TSC stamps (choose_stamps()), reads the first pair.
  void start();
  bool tsc() const { return tsc_; }
  void read_pair();  // after the stamps it will convert were taken
  int64_t to_ns(int64_t stamp) const { return tsc_ ? line_.to_ns(stamp) : stamp; }
  int64_t duration_ns(int64_t stamps) const;  // a length of time in stamps, by the line's latest slope

 private:
  bool tsc_ = false;
  TickLine line_;
};

}  // namespace memrec::detail
