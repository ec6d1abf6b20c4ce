// A steady training loop of libtorch CPU tensors, recorded through memrec::Recorder's CPU allocator hook (the long-run
// soak, bench/soak_100m.sh, and the recorder's bounded-memory test). Each step replays one template, as the caching
// allocator does in a steady loop: 1,200 tensors of 60 sizes, a quarter living the whole step, the rest a few tensors
// long, inside a "step N" scope and an op scope around every three tensors: 3,600 events a step.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "memrec/recorder.h"

namespace memrec::bench {

class CpuTrainingLoop {
 public:
  static constexpr size_t kSlots = 1200;
  static constexpr uint64_t kEventsPerStep = kSlots * 3;  // alloc, free_requested, free_completed

  explicit CpuTrainingLoop(uint32_t seed) : frees_at_(kSlots + 1), live_(kSlots) {
    std::mt19937 rng(seed);
    std::vector<int64_t> sizes;
    for (int i = 0; i < 60; ++i) sizes.push_back(int64_t{1} << (9 + rng() % 10));  // 512 B to 256 KiB
    for (size_t i = 0; i < kSlots; ++i) {
      size_t lifetime = rng() % 4 == 0 ? kSlots : 1 + rng() % 40;  // activations live long, temporaries briefly
      bytes_.push_back(sizes[rng() % sizes.size()]);
      frees_at_[std::min(i + lifetime, kSlots)].push_back(i);
    }
  }

  // One step: every tensor of the template allocated in order, each freed after its last use.
  void step(uint64_t n) {
    ScopeGuard step_scope("step " + std::to_string(n), ScopeKind::step);
    bool op_open = false;
    for (size_t i = 0; i < kSlots; ++i) {
      if (i % 3 == 0) {
        if (op_open) close_scope();
        op_open = open_scope(i % 2 ? "aten::linear" : "aten::add", ScopeKind::op);
      }
      live_[i] = at::empty({bytes_[i]}, at::kByte);
      for (size_t f : frees_at_[i + 1]) live_[f].reset();
    }
    if (op_open) close_scope();
  }

 private:
  std::vector<int64_t> bytes_;
  std::vector<std::vector<size_t>> frees_at_;  // the tensors freed after each template position
  std::vector<at::Tensor> live_;
};

}  // namespace memrec::bench
