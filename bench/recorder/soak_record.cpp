// The long-run soak's recording half (bench/soak_100m.sh, docs/benchmarks.md "Long runs"): a steady training loop
// of libtorch CPU tensors recorded by memrec::Recorder, the recorder `memrec record` and `memrec run` start, through
// its CPU allocator hook (this machine has no GPU, so the CUDA allocator's callback cannot run). Each step replays
// one template, as the caching allocator does in a steady loop: 1,200 tensors of 60 sizes, a quarter living the
// whole step, the rest a few tensors long, inside a "step N" scope and an op scope around every three tensors.
// Prints one line of JSON: events kept and dropped, the loop's rate, the recorder's resident memory as it grew.
//
//   soak_record OUT.memrec EVENTS [RATE] [--stacks]
// RATE: events a second the loop is held to (0 or none: as fast as it runs); --stacks: capture every allocation's
// C++ stack, as `memrec record` does by default.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "memrec/recorder.h"

namespace {

struct Slot {
  int64_t bytes;
  size_t free_after;  // the template position after which the tensor is freed
};

std::vector<Slot> step_template(std::mt19937& rng) {
  constexpr size_t kSlots = 1200;
  std::vector<int64_t> sizes;
  for (int i = 0; i < 60; ++i) sizes.push_back(int64_t{1} << (9 + rng() % 10));  // 512 B to 256 KiB
  std::vector<Slot> slots;
  for (size_t i = 0; i < kSlots; ++i) {
    size_t lifetime = rng() % 4 == 0 ? kSlots : 1 + rng() % 40;  // activations live long, temporaries briefly
    slots.push_back({sizes[rng() % sizes.size()], std::min(i + lifetime, kSlots)});
  }
  return slots;
}

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

// One step: every tensor of the template allocated in order, each freed after its last use.
void run_step(const std::vector<Slot>& slots, const std::vector<std::vector<size_t>>& frees_at,
              std::vector<at::Tensor>& live, uint64_t step) {
  memrec::ScopeGuard step_scope("step " + std::to_string(step), memrec::ScopeKind::step);
  bool op_open = false;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i % 3 == 0) {
      if (op_open) memrec::close_scope();
      op_open = memrec::open_scope(i % 2 ? "aten::linear" : "aten::add", memrec::ScopeKind::op);
    }
    live[i] = at::empty({slots[i].bytes}, at::kByte);
    for (size_t f : frees_at[i + 1]) live[f].reset();
  }
  if (op_open) memrec::close_scope();
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
  options.ops = false;  // op scopes come from run_step: aten's own would wrap every at::empty
  options.quiet = true;
  std::mt19937 rng(7);
  std::vector<Slot> slots = step_template(rng);
  std::vector<std::vector<size_t>> frees_at(slots.size() + 1);
  for (size_t i = 0; i < slots.size(); ++i) frees_at[slots[i].free_after].push_back(i);
  const uint64_t per_step = slots.size() * 3;  // alloc, free_requested, free_completed
  std::vector<at::Tensor> live(slots.size());

  memrec::Recorder recorder(options);
  auto start = std::chrono::steady_clock::now();
  recorder.start();
  std::string growth;  // resident MiB at each tenth of the run
  uint64_t steps = (target + per_step - 1) / per_step;
  for (uint64_t step = 0; step < steps; ++step) {
    run_step(slots, frees_at, live, step);
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
             "\"stacks\": {}, \"rate_asked\": {:.0f}}}\n",
             st.events, st.dropped, st.scopes_dropped, steps, loop_s, total_s,
             static_cast<double>(st.events) / loop_s, growth, resident_mib().second, options.stacks, rate);
  return 0;
}
