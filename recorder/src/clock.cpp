#include "clock.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "hook_time.h"

namespace memrec::detail {

constinit std::atomic<bool> g_tsc_stamps{false};
constinit HookTimes g_hook_times;

void hook_times_reset() {
  for (int i = 0; i < kHookKinds; ++i) {
    g_hook_times.stamps[i].store(0, std::memory_order_relaxed);
    g_hook_times.timed[i].store(0, std::memory_order_relaxed);
  }
}

namespace {

bool has_flags(std::istream& cpuinfo) {
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("flags")) continue;
    std::istringstream words(line);
    bool constant = false, nonstop = false;
    for (std::string w; words >> w;) constant |= w == "constant_tsc", nonstop |= w == "nonstop_tsc";
    return constant && nonstop;
  }
  return false;
}

}  // namespace

bool tsc_trusted() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool trusted = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string name;
    return has_flags(cpuinfo) && source >> name && name == "tsc";
  }();
  return trusted;
#else
  return false;
#endif
}

void choose_stamps() { g_tsc_stamps.store(tsc_trusted(), std::memory_order_relaxed); }

void TickClock::start() {
  tsc_ = g_tsc_stamps.load(std::memory_order_relaxed);
  line_.clear();
  read_pair();
}

// The narrowest of a few reads: a read the thread was preempted in would put the pair off by the pause.
void TickClock::read_pair() {
  if (!tsc_) return;
  int64_t width = std::numeric_limits<int64_t>::max(), ticks = 0, ns = 0;
  for (int i = 0; i < 5; ++i) {
    int64_t before = now_ns(), t = tsc_ticks(), after = now_ns();
    if (after - before < width) width = after - before, ticks = t, ns = before + (after - before) / 2;
  }
  line_.add_pair(ticks, ns);
}

int64_t TickClock::duration_ns(int64_t stamps) const { return tsc_ ? line_.duration_ns(stamps) : stamps; }

int64_t TickLine::duration_ns(int64_t ticks) const {
  if (pairs_.size() < 2) return 0;
  const Pair &a = pairs_.front(), &b = pairs_.back();
  return std::llround(double(ticks) * double(b.ns - a.ns) / double(b.ticks - a.ticks));
}

void TickLine::add_pair(int64_t ticks, int64_t ns) {
  if (!pairs_.empty() && ticks <= pairs_.back().ticks) return;
  if (pairs_.size() > kRecentPairs) pairs_.erase(pairs_.begin() + 1);
  pairs_.push_back({ticks, ns});
}

int64_t TickLine::to_ns(int64_t ticks) const {
  if (pairs_.size() < 2) return pairs_.empty() ? 0 : pairs_[0].ns;
  size_t i = pairs_.size() - 2;  // most stamps come after the second-to-last pair
  while (i > 0 && ticks < pairs_[i].ticks) --i;
  const Pair &a = pairs_[i], &b = pairs_[i + 1];
  double rate = double(b.ns - a.ns) / double(b.ticks - a.ticks);
  return a.ns + std::llround(double(ticks - a.ticks) * rate);
}

}  // namespace memrec::detail
