// A synthetic but self-consistent allocator history for benchmarks: realistic stacks (about 17 frames, a few
// hundred distinct frames, a few thousand distinct stacks, some much hotter than others), alloc /
// free_requested / free_completed triples, and 20 MiB segments that are allocated when the current one is full and
// freed when their last block goes. segments_end is the state after the last event. The history has n_events
// to n_events + 3 events: the last step is never cut in half.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

namespace synthetic_detail {

struct Live {
  uint64_t addr, size, block;  // requested and rounded sizes
  uint32_t stack;
  uint16_t stream;
};

struct Seg {
  uint64_t addr, used = 0;
  uint32_t live = 0, stack = 0;
  bool open = true;  // still taking new blocks
};

constexpr uint64_t kSegmentSize = 20ull << 20;
constexpr uint64_t kBaseAddr = 0x7f0000000000ull;

inline void make_stacks(Snapshot& s, std::mt19937& rng) {
  std::vector<uint32_t> files, functions, frames;
  for (int i = 0; i < 40; ++i) files.push_back(s.strings.intern("/opt/venv/lib/python3.12/site-packages/model/layer_" + std::to_string(i) + ".py"));
  for (int i = 0; i < 250; ++i) functions.push_back(s.strings.intern("forward_" + std::to_string(i)));
  for (int i = 0; i < 400; ++i)
    frames.push_back(s.frames.intern(Frame{0, functions[rng() % functions.size()], files[rng() % files.size()], 0, static_cast<uint32_t>(1 + rng() % 2000)}));
  // Stacks share outer frames (the training loop) and differ inside, innermost first like PyTorch's.
  std::vector<uint32_t> outer(frames.begin(), frames.begin() + 6);
  std::vector<uint32_t> ids;
  while (s.stacks.size() < 3001) {
    ids.clear();
    size_t inner = 8 + rng() % 7;
    for (size_t k = 0; k < inner; ++k) ids.push_back(frames[6 + rng() % (frames.size() - 6)]);
    ids.insert(ids.end(), outer.begin(), outer.end() - static_cast<std::ptrdiff_t>(rng() % 3));
    s.stacks.intern(ids);
  }
}

// Stack ids skewed towards the first ones: a few call sites make most allocations.
inline uint32_t pick_stack(const Snapshot& s, std::mt19937& rng) {
  double u = double(rng()) / double(std::mt19937::max());
  return 1 + static_cast<uint32_t>(double(s.stacks.size() - 1) * u * u * u) % static_cast<uint32_t>(s.stacks.size() - 1);
}

// Request sizes from 512 B to 4 MiB, log-uniform; blocks rounded up to 512 B as the allocator does.
inline uint64_t pick_size(std::mt19937& rng) { return (uint64_t{512} << (rng() % 14)) - rng() % 500; }

}  // namespace synthetic_detail

inline Snapshot make_synthetic(size_t n_events, uint32_t seed) {
  using namespace synthetic_detail;
  std::mt19937 rng(seed);
  Snapshot s;
  make_stacks(s, rng);
  uint16_t side_stream = s.intern_stream(0x55d0c0ffee00);
  std::vector<Seg> segs;
  std::vector<Live> live;
  int64_t t = 1'790'000'000'000'000'000;
  auto emit = [&](Action a, uint64_t addr, uint64_t size, uint64_t block, uint32_t stack, uint16_t stream) {
    t += 1000 * (1 + rng() % 40);
    uint32_t rounding = static_cast<uint32_t>(block - size);
    s.events.push_back(Event{t, addr, size, stack, 0, rounding, stream, a, 0});
  };
  auto free_segment = [&](Seg& seg) {
    emit(Action::segment_free, seg.addr, kSegmentSize, kSegmentSize, seg.stack, 0);
    seg.addr = 0;  // gone
  };
  auto close = [&](Seg& seg) {
    seg.open = false;
    if (seg.live == 0) free_segment(seg);
  };
  s.events.reserve(n_events + 4);
  while (s.events.size() < n_events) {
    bool alloc = live.size() < 64 || (live.size() < 4096 && rng() % 2 == 0);
    if (alloc) {
      uint64_t size = pick_size(rng), block = (size + 511) / 512 * 512;
      uint32_t stack = pick_stack(s, rng);
      uint16_t stream = rng() % 16 == 0 ? side_stream : 0;
      if (segs.empty() || !segs.back().open || segs.back().used + block > kSegmentSize) {
        if (!segs.empty()) close(segs.back());
        uint64_t base = kBaseAddr + kSegmentSize * (segs.size() + 1);
        segs.push_back(Seg{base, 0, 0, stack, true});
        emit(Action::segment_alloc, base, kSegmentSize, kSegmentSize, stack, 0);
      }
      Seg& seg = segs.back();
      live.push_back(Live{seg.addr + seg.used, size, block, stack, stream});
      seg.used += block;
      ++seg.live;
      emit(Action::alloc, live.back().addr, size, block, stack, stream);
    } else {
      size_t k = rng() % live.size();
      Live b = live[k];
      live[k] = live.back();
      live.pop_back();
      emit(Action::free_requested, b.addr, b.size, b.block, b.stack, b.stream);
      emit(Action::free_completed, b.addr, b.size, b.block, b.stack, b.stream);
      Seg& seg = segs[(b.addr - kBaseAddr) / kSegmentSize - 1];
      if (--seg.live == 0 && !seg.open) free_segment(seg);
    }
  }
  // The state after the last event: live segments, their live blocks and the free space between them.
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.addr < b.addr; });
  auto next = live.begin();
  for (const Seg& seg : segs) {
    if (seg.addr == 0) continue;
    Segment out;
    out.addr = seg.addr;
    out.total_size = kSegmentSize;
    out.stack = seg.stack;
    uint64_t at = seg.addr;
    for (; next != live.end() && next->addr < seg.addr + kSegmentSize; ++next) {
      if (next->addr > at) out.blocks.push_back(Block{at, next->addr - at, 0, 0, BlockState::inactive});
      out.blocks.push_back(Block{next->addr, next->block, next->size, next->stack, BlockState::active_allocated});
      out.allocated_size += next->block;
      out.requested_size += next->size;
      at = next->addr + next->block;
    }
    if (at < seg.addr + kSegmentSize) out.blocks.push_back(Block{at, seg.addr + kSegmentSize - at, 0, 0, BlockState::inactive});
    out.active_size = out.allocated_size;
    s.segments_end.push_back(std::move(out));
  }
  return s;
}

}  // namespace memrec
