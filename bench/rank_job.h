// A data-parallel job's ranks whose answers are known by construction, for bench_ranks and the ranks tests: each
// rank runs the same training steps (an all-gather, a forward of `layers` layers each allocating one activation, a
// backward freeing them, an all-reduce), on hosts of 8 ranks whose clocks are offset by seconds. The ranks leave
// each collective together, within `jitter_ns`; two ranks are made different: `wide_rank` holds more in layers.1 at
// its peak, and `early_rank` allocates a large buffer after step 1's all-reduce, so it peaks there, between two collectives
// where every other rank peaked in step 0.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "memrec/snapshot.h"

namespace memrec::bench {

struct RankJob {
  int ranks = 1024;
  uint64_t events = 1000;          // allocator events a rank, about
  int layers = 8;
  int ranks_per_host = 8;
  int64_t jitter_ns = 20'000;      // how far apart the ranks leave a collective
  int wide_rank = 17, early_rank = 517;
  uint64_t activation = 8 << 20, wide_extra = 24 << 20;
  int64_t step_ns = 100'000'000;
  int64_t start_ns = 1'800'000'000'000'000'000;

  int host_of(int rank) const { return rank / ranks_per_host; }
  // What host h's clock reads minus the true time: whole quarter seconds between -5 s and +5 s.
  int64_t clock_offset_ns(int host) const { return (int64_t(host) * 7919 % 41 - 20) * 250'000'000; }
  uint64_t steps() const { return std::max<uint64_t>(3, events / (2 * layers + 2)); }
  uint64_t early_bytes() const { return 3 * uint64_t(layers) * activation; }
};

inline Snapshot make_rank(const RankJob& job, int rank) {
  Snapshot s;
  s.metadata["rank"] = std::to_string(rank);
  s.metadata["world_size"] = std::to_string(job.ranks);
  s.metadata["host"] = "node-" + std::to_string(job.host_of(rank));
  s.metadata["pid"] = std::to_string(1000 + rank % job.ranks_per_host);
  std::mt19937_64 rng(uint64_t(rank) * 1'000'003 + 7);
  auto uniform = [&](int64_t n) { return n > 0 ? int64_t(rng() % uint64_t(n)) : 0; };
  const int64_t clock = job.start_ns + job.clock_offset_ns(job.host_of(rank));
  auto scope = [&](ScopeKind kind, const std::string& name, int64_t start, int64_t end, uint32_t parent) {
    s.scopes.push_back(Scope{clock + start, clock + end, s.strings.intern(name), parent, kind, 0});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  };
  auto event = [&](int64_t t, Action a, uint64_t addr, uint64_t size, uint32_t sc) {
    s.events.push_back(Event{.time_ns = clock + t, .addr = addr, .size = size, .scope = sc, .action = a});
  };
  // The ranks leave a collective at one true time, each within the jitter; each enters it when it gets there.
  auto collective = [&](const char* name, int64_t enter, int64_t leave, uint32_t parent) {
    scope(ScopeKind::op, name, enter + uniform(2'000'000), leave + uniform(job.jitter_ns), parent);
  };
  const uint64_t base = 0x7f0000000000;
  event(0, Action::segment_alloc, base, 1ull << 36, 0);
  event(1000, Action::alloc, base, 64 << 20, 0);  // the parameters
  for (uint64_t k = 0; k < job.steps(); ++k) {
    int64_t t = int64_t(k) * job.step_ns + 10'000'000;
    uint32_t step = scope(ScopeKind::step, "step " + std::to_string(k), t, t + 96'000'000, 0);
    collective("c10d::allgather_", t + 1'000'000, t + 3'000'000, step);
    uint32_t forward = scope(ScopeKind::phase, "forward", t + 4'000'000, t + 40'000'000, step);
    for (int l = 0; l < job.layers; ++l) {
      int64_t at = t + 4'000'000 + l * 4'000'000;
      uint32_t layer = scope(ScopeKind::module, "layers." + std::to_string(l), at, at + 4'000'000, forward);
      uint64_t bytes = job.activation + (rank == job.wide_rank && l == 1 ? job.wide_extra : 0);
      event(at + 1'000 + uniform(100'000), Action::alloc, base + (uint64_t(l + 1) << 30), bytes, layer);
    }
    uint32_t backward = scope(ScopeKind::phase, "backward", t + 40'000'000, t + 80'000'000, step);
    for (int l = job.layers; l-- > 0;) {
      uint64_t bytes = job.activation + (rank == job.wide_rank && l == 1 ? job.wide_extra : 0);
      event(t + 40'000'000 + (job.layers - l) * 4'000'000, Action::free_requested, base + (uint64_t(l + 1) << 30), bytes, backward);
    }
    collective("c10d::allreduce_", t + 81'000'000, t + 85'000'000, step);
    if (rank == job.early_rank && k == 1) {  // after step 1's all-reduce, 15 ms before step 2's all-gather
      event(t + 86'000'000, Action::alloc, base + (1ull << 35), job.early_bytes(), step);
      event(t + 95'000'000, Action::free_requested, base + (1ull << 35), job.early_bytes(), step);
    }
  }
  return s;
}

}  // namespace memrec::bench
