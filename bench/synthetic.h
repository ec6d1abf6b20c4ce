// A synthetic but self-consistent allocator history for benchmarks: realistic stacks (about 17 frames, 400
// distinct frames, 3000 distinct stacks, some much hotter than others), alloc / free_requested / free_completed
// triples, and 20 MiB segments that are allocated when the current one is full and freed when their last block
// goes. segments_end is the state after the last event. The history has n_events to n_events + 3 events: the last
// step is never cut in half.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

namespace synthetic_detail {

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {
    make_stacks();
    side_stream_ = s_.intern_stream(0x55d0c0ffee00);
  }

  Snapshot run(size_t n_events) {
    s_.events.reserve(n_events + 4);
    while (s_.events.size() < n_events) {
      if (live_.size() < 64 || (live_.size() < 4096 && rng_() % 2 == 0))
        alloc();
      else
        free_one();
    }
    final_segments();
    return std::move(s_);
  }

 private:
  struct Live {
    uint64_t addr, size, block;  // requested and rounded sizes
    uint32_t stack;
    uint16_t stream;
  };
  struct Seg {
    uint64_t addr, used = 0;  // addr 0 once freed
    uint32_t live = 0, stack = 0;
    bool open = true;  // still taking new blocks
  };
  static constexpr uint64_t kSegmentSize = 20ull << 20;
  static constexpr uint64_t kBaseAddr = 0x7f0000000000ull;

  std::mt19937 rng_;
  Snapshot s_;
  uint16_t side_stream_ = 0;
  std::vector<Seg> segs_;
  std::vector<Live> live_;
  int64_t t_ = 1'790'000'000'000'000'000;

  void make_stacks() {
    std::vector<uint32_t> files, functions, frames;
    for (int i = 0; i < 40; ++i)
      files.push_back(s_.strings.intern("/opt/venv/lib/python3.12/site-packages/model/layer_" + std::to_string(i) + ".py"));
    for (int i = 0; i < 250; ++i) functions.push_back(s_.strings.intern("forward_" + std::to_string(i)));
    for (int i = 0; i < 400; ++i)
      frames.push_back(s_.frames.intern(Frame{0, functions[rng_() % functions.size()], files[rng_() % files.size()],
                                              0, static_cast<uint32_t>(1 + rng_() % 2000)}));
    // Stacks share outer frames (the training loop) and differ inside, innermost first like PyTorch's.
    std::vector<uint32_t> ids;
    while (s_.stacks.size() < 3001) {
      ids.clear();
      for (size_t k = 0, inner = 8 + rng_() % 7; k < inner; ++k) ids.push_back(frames[6 + rng_() % (frames.size() - 6)]);
      ids.insert(ids.end(), frames.begin(), frames.begin() + 6 - static_cast<std::ptrdiff_t>(rng_() % 3));
      s_.stacks.intern(ids);
    }
  }

  // Stack ids skewed towards the first ones: a few call sites make most allocations.
  uint32_t pick_stack() {
    double u = double(rng_()) / double(std::mt19937::max());
    auto n = static_cast<uint32_t>(s_.stacks.size() - 1);
    return 1 + static_cast<uint32_t>(double(n) * u * u * u) % n;
  }

  void emit(Action a, uint64_t addr, uint64_t size, uint64_t block, uint32_t stack, uint16_t stream) {
    t_ += 1000 * (1 + rng_() % 40);
    s_.events.push_back(Event{t_, addr, size, stack, 0, static_cast<uint32_t>(block - size), stream, a, 0});
  }

  void alloc() {
    // Request sizes from 512 B to 4 MiB, log-uniform; blocks rounded up to 512 B as the allocator does.
    uint64_t size = (uint64_t{512} << (rng_() % 14)) - rng_() % 500, block = (size + 511) / 512 * 512;
    uint32_t stack = pick_stack();
    uint16_t stream = rng_() % 16 == 0 ? side_stream_ : 0;
    if (segs_.empty() || !segs_.back().open || segs_.back().used + block > kSegmentSize) new_segment(stack);
    Seg& seg = segs_.back();
    live_.push_back(Live{seg.addr + seg.used, size, block, stack, stream});
    seg.used += block;
    ++seg.live;
    emit(Action::alloc, live_.back().addr, size, block, stack, stream);
  }

  void new_segment(uint32_t stack) {
    if (!segs_.empty()) {
      segs_.back().open = false;
      if (segs_.back().live == 0) free_segment(segs_.back());
    }
    uint64_t base = kBaseAddr + kSegmentSize * (segs_.size() + 1);
    segs_.push_back(Seg{base, 0, 0, stack, true});
    emit(Action::segment_alloc, base, kSegmentSize, kSegmentSize, stack, 0);
  }

  void free_segment(Seg& seg) {
    emit(Action::segment_free, seg.addr, kSegmentSize, kSegmentSize, seg.stack, 0);
    seg.addr = 0;
  }

  void free_one() {
    size_t k = rng_() % live_.size();
    Live b = live_[k];
    live_[k] = live_.back();
    live_.pop_back();
    emit(Action::free_requested, b.addr, b.size, b.block, b.stack, b.stream);
    emit(Action::free_completed, b.addr, b.size, b.block, b.stack, b.stream);
    Seg& seg = segs_[(b.addr - kBaseAddr) / kSegmentSize - 1];
    if (--seg.live == 0 && !seg.open) free_segment(seg);
  }

  // The state after the last event: live segments, their live blocks and the free space between them.
  void final_segments() {
    std::sort(live_.begin(), live_.end(), [](const Live& a, const Live& b) { return a.addr < b.addr; });
    auto next = live_.begin();
    for (const Seg& seg : segs_) {
      if (seg.addr == 0) continue;
      Segment out;
      out.addr = seg.addr;
      out.total_size = kSegmentSize;
      out.stack = seg.stack;
      uint64_t at = seg.addr, end = seg.addr + kSegmentSize;
      for (; next != live_.end() && next->addr < end; ++next) {
        if (next->addr > at) out.blocks.push_back(Block{at, next->addr - at, 0, 0, BlockState::inactive});
        out.blocks.push_back(Block{next->addr, next->block, next->size, next->stack, BlockState::active_allocated});
        out.allocated_size += next->block;
        out.requested_size += next->size;
        at = next->addr + next->block;
      }
      if (at < end) out.blocks.push_back(Block{at, end - at, 0, 0, BlockState::inactive});
      out.active_size = out.allocated_size;
      s_.segments_end.push_back(std::move(out));
    }
  }
};

}  // namespace synthetic_detail

inline Snapshot make_synthetic(size_t n_events, uint32_t seed) {
  return synthetic_detail::Generator(seed).run(n_events);
}

// Adds what a training loop records besides allocations: phases of ~30k events, modules of ~3k, ops of ~6 (each
// event in its op), and one kernel per op on two streams.
inline void add_training_scopes_and_kernels(Snapshot& s) {
  if (s.events.empty()) return;
  uint32_t names[] = {s.strings.intern("forward"), s.strings.intern("backward"), s.strings.intern("optimizer")};
  uint32_t kernel_name = s.strings.intern("ampere_sgemm_128x64_tn");
  uint32_t op_name = s.strings.intern("aten::addmm");
  uint32_t module_name = s.strings.intern("TransformerEncoderLayer");
  uint16_t side = s.intern_stream(0x5151);
  std::vector<Event> events(s.events.begin(), s.events.end());
  std::vector<Scope> scopes(s.scopes.begin(), s.scopes.end());
  std::vector<Kernel> kernels;
  uint32_t phase = 0, module = 0, op = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    int64_t t = events[i].time_ns;
    auto open = [&](uint32_t name, uint32_t parent, ScopeKind kind) {
      scopes.push_back(Scope{t, -1, name, parent, kind, 0});
      return static_cast<uint32_t>(scopes.size() - 1);
    };
    auto close = [&](uint32_t id) {
      if (id) scopes[id].end_ns = t;
    };
    if (i % 6 == 0) {
      close(op);
      if (i % 3000 == 0) {
        close(module);
        if (i % 30000 == 0) {
          close(phase);
          phase = open(names[(i / 30000) % 3], 0, ScopeKind::phase);
        }
        module = open(module_name, phase, ScopeKind::module);
      }
      op = open(op_name, module, ScopeKind::op);
      if (!kernels.empty()) kernels.back().end_ns = std::max(kernels.back().start_ns + 1, t - 500);
      kernels.push_back(Kernel{t, t + 1, i, 0, kernel_name, static_cast<uint16_t>(i % 12 ? 0 : side),
                               KernelKind::kernel, 0});
    }
    events[i].scope = op;
  }
  kernels.back().end_ns = events.back().time_ns;
  s.events.assign(events);
  s.scopes.assign(scopes);
  s.kernels.assign(kernels);
}

}  // namespace memrec
