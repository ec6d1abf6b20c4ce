// Callgrind client requests for bench/part_costs.py, which loads this with ctypes: instructions are counted only
// between memrec_marks_on() and memrec_marks_off(label), and each measured loop is dumped under its label. Outside
// valgrind each call is a few instructions that do nothing.
#include <valgrind/callgrind.h>

extern "C" void memrec_marks_on() {
  CALLGRIND_ZERO_STATS;
  CALLGRIND_START_INSTRUMENTATION;
}

extern "C" void memrec_marks_off(const char* label) {
  CALLGRIND_STOP_INSTRUMENTATION;
  CALLGRIND_DUMP_STATS_AT(label);
}

// libhwy (which libtorch's image libraries load) times its clock with rdtscp in an initializer, an instruction
// valgrind 3.19 does not decode (SIGILL). Preloaded (LD_PRELOAD) under valgrind, this definition is the one it calls.
namespace hwy::platform {
unsigned long TimerResolution() { return 1; }
}  // namespace hwy::platform
