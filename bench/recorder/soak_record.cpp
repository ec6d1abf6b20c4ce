// The long-run soak's recording half (bench/soak_100m.sh, docs/benchmarks.md "Long runs"): a steady training loop
// of libtorch CPU tensors (cpu_training_loop.h) recorded by memrec::Recorder, the recorder `memrec record` and
// `memrec run` start, through its CPU allocator hook (this machine has no GPU, so the CUDA allocator's callback
// cannot run). Prints one line of JSON: events kept and dropped, the loop's rate, the recorder's resident memory as
// it grew, and the most rows it held at once.
//
//   soak_record OUT.memrec EVENTS [RATE] [--stacks]
// RATE: events a second the loop is held to (0 or none: as fast as it runs); --stacks: capture every allocation's
// C++ stack, as `memrec record` does by default.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "cpu_training_loop.h"
#include "memrec/recorder.h"

namespace {

// Resident and peak resident memory of this process, in MiB (VmRSS, VmHWM).
std::pair<double, double> resident_mib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  double rss = 0, hwm = 0, kib = 0;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kib) rss = kib / 1024;
    if (key == "VmHWM:" && in >> kib) hwm = kib / 1024;
  }
  return {rss, hwm};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: soak_record OUT.memrec EVENTS [RATE] [--stacks]\n");
    return 2;
  }
  uint64_t target = std::strtoull(argv[2], nullptr, 10);
  double rate = argc > 3 ? std::strtod(argv[3], nullptr) : 0;
  memrec::RecorderOptions options;
  options.output = argv[1];
  options.stacks = std::string(argv[argc - 1]) == "--stacks";
  options.ops = false;  // op scopes come from the loop: aten's own would wrap every at::empty
  options.quiet = true;
  memrec::bench::CpuTrainingLoop loop(7);
  const uint64_t per_step = loop.kEventsPerStep;

  memrec::Recorder recorder(options);
  auto start = std::chrono::steady_clock::now();
  recorder.start();
  std::string growth;  // resident MiB at each tenth of the run
  uint64_t steps = (target + per_step - 1) / per_step;
  for (uint64_t step = 0; step < steps; ++step) {
    loop.step(step);
    if (rate > 0) std::this_thread::sleep_until(start + std::chrono::duration<double>((step + 1) * per_step / rate));
    if ((step + 1) % std::max<uint64_t>(steps / 10, 1) == 0)
      growth += fmt::format("{}{:.0f}", growth.empty() ? "" : ",", resident_mib().first);
  }
  double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  recorder.stop();
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  memrec::RecorderStats st = recorder.stats();
  fmt::print("{{\"events\": {}, \"dropped\": {}, \"scopes_dropped\": {}, \"steps\": {}, \"loop_s\": {:.1f}, "
             "\"total_s\": {:.1f}, \"events_per_s\": {:.0f}, \"rss_mib_by_tenth\": [{}], \"peak_rss_mib\": {:.0f}, "
             "\"rows_held_peak\": {}, \"stacks\": {}, \"rate_asked\": {:.0f}}}\n",
             st.events, st.dropped, st.scopes_dropped, steps, loop_s, total_s,
             static_cast<double>(st.events) / loop_s, growth, resident_mib().second, st.rows_held_peak, options.stacks,
             rate);
  return 0;
}
