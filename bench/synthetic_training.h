// A synthetic steady training loop (the random-mix history is bench/synthetic.h): what the format compresses.
// Each step replays one template of allocations: the same sizes, stacks and addresses in the same order,
// with jittered times, as the caching allocator does in a steady training loop.
#pragma once

#include <algorithm>
#include <map>
#include <tuple>
#include <random>
#include <string>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

namespace synthetic_training_detail {

// A few hundred frames; stacks of 17 frames share a common outer part, then a module path, then an op.
inline std::vector<uint32_t> make_stacks(Snapshot& s, std::mt19937& rng, size_t n_stacks) {
  uint32_t lib = s.strings.intern("libtorch_cuda.so");
  auto frame = [&](const std::string& fn, const std::string& file, uint32_t line) {
    return s.frames.intern(
        Frame{0x7f0000000000ULL + rng() % 0x10000000, s.strings.intern(fn), s.strings.intern(file), lib, line});
  };
  std::vector<uint32_t> outer, modules, ops;
  for (int i = 0; i < 5; ++i) outer.push_back(frame("main_loop_" + std::to_string(i), "train.cpp", 10 + i));
  for (int i = 0; i < 150; ++i) modules.push_back(frame("Module" + std::to_string(i) + "::forward", "model.cpp", i));
  for (int i = 0; i < 150; ++i)
    ops.push_back(frame("at::native::op_" + std::to_string(i), "aten/src/ATen/native/op" + std::to_string(i % 20) + ".cpp",
                        100 + i));
  std::vector<uint32_t> ids;
  std::vector<uint32_t> st;
  for (size_t k = 0; k < n_stacks; ++k) {
    st.clear();
    for (int i = 0; i < 6; ++i) st.push_back(ops[(k * 7 + i * 13) % ops.size()]);  // innermost first
    for (int i = 0; i < 6; ++i) st.push_back(modules[(k / 20 + i * 31) % modules.size()]);
    st.insert(st.end(), outer.begin(), outer.end());
    ids.push_back(s.stacks.intern(st));
  }
  return ids;
}

struct Slot {
  uint64_t size, addr;
  uint32_t stack, rounding, gap_ns;
  uint16_t stream;
  size_t free_after;  // the template position after which this allocation is freed
};

}  // namespace synthetic_training_detail

inline Snapshot make_training_history(size_t n_events, uint32_t seed) {
  using namespace synthetic_training_detail;
  std::mt19937 rng(seed);
  Snapshot s;
  s.metadata = {{"command", "synthetic"}, {"workload", "transformer-like"}, {"device.0.name", "Synthetic GPU"}};
  std::vector<uint32_t> stacks = make_stacks(s, rng, 3000);
  uint16_t side_stream = s.intern_stream(0x5555aaaa0000ULL);

  // One step's template: ~1200 allocations from ~60 distinct sizes, placed in a few segments.
  const size_t n_slots = 1200;
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 60; ++i) sizes.push_back((1ULL << (9 + rng() % 14)) * (1 + rng() % 3) + (rng() % 4) * 4);
  std::vector<Slot> slots;
  const uint64_t segment_bytes = 1ULL << 31, base = 0x7f1200000000ULL;
  for (size_t i = 0; i < n_slots; ++i) {
    uint64_t size = sizes[rng() % sizes.size()];
    uint64_t block = (size + 511) / 512 * 512;
    size_t lifetime = rng() % 4 == 0 ? n_slots : 1 + rng() % 40;  // activations live long, temporaries briefly
    slots.push_back({size, base + (rng() % 8) * segment_bytes + (rng() % 4096) * 512, stacks[rng() % stacks.size()],
                     static_cast<uint32_t>(block - size), static_cast<uint32_t>(2000 + rng() % 30000),
                     static_cast<uint16_t>(rng() % 10 == 0 ? side_stream : 0), std::min(i + lifetime, n_slots)});
  }
  std::vector<std::vector<size_t>> frees_at(n_slots + 1);
  for (size_t i = 0; i < n_slots; ++i) frees_at[slots[i].free_after].push_back(i);

  std::vector<uint32_t> names;
  for (int i = 0; i < 40; ++i) names.push_back(s.strings.intern("aten::op_" + std::to_string(i)));
  uint32_t step_name = s.strings.intern("step");
  std::vector<uint32_t> kernel_names;
  for (int i = 0; i < 100; ++i) kernel_names.push_back(s.strings.intern("kernel_" + std::to_string(i)));

  std::vector<Event> events;
  std::vector<Scope> scopes{Scope{}};
  std::vector<Kernel> kernels;
  int64_t t = 1'700'000'000'000'000'000;
  std::uniform_int_distribution<int64_t> jitter(0, 2047);
  auto add = [&](Action a, const Slot& sl, uint32_t scope, int64_t gap) {
    t += gap + jitter(rng);
    events.push_back(Event{t, sl.addr, sl.size, sl.stack, scope, sl.rounding, sl.stream, a, 0});
  };
  for (int step = 0; events.size() < n_events; ++step) {
    uint32_t step_scope = static_cast<uint32_t>(scopes.size());
    scopes.push_back(Scope{t, -1, step_name, 0, ScopeKind::step, 0});
    if (step % 10 == 0)  // the allocator reserves its pool, and every ten steps releases and re-reserves it
      for (int k = 0; k < 8; ++k) {
        Slot seg{segment_bytes, base + k * segment_bytes, stacks[k], 0, 5000, 0, 0};
        if (step > 0) add(Action::segment_free, seg, step_scope, 50000);
        add(Action::segment_alloc, seg, step_scope, 50000);
      }
    uint32_t op_scope = 0;
    for (size_t i = 0; i < n_slots; ++i) {
      if (i % 3 == 0) {  // an op scope around every three allocations
        if (op_scope) scopes[op_scope].end_ns = t + 100;
        op_scope = static_cast<uint32_t>(scopes.size());
        scopes.push_back(Scope{t + 50, -1, names[(i / 3) % names.size()], step_scope, ScopeKind::op, 0});
        kernels.push_back(Kernel{t + 200, t + 200 + slots[i].gap_ns, static_cast<uint64_t>(kernels.size() + 1),
                                   0, kernel_names[(i / 3) % kernel_names.size()], slots[i].stream,
                                   KernelKind::kernel, 0});
      }
      add(Action::alloc, slots[i], op_scope, slots[i].gap_ns);
      for (size_t f : frees_at[i + 1]) {
        add(Action::free_requested, slots[f], op_scope, 300);
        add(Action::free_completed, slots[f], op_scope, 100);
      }
    }
    if (op_scope) scopes[op_scope].end_ns = t + 100;
    scopes[step_scope].end_ns = t + 1000;
  }
  events.resize(n_events);
  s.events.assign(events);
  s.scopes.assign(scopes);
  s.kernels.assign(kernels);
  return s;
}

// The template puts blocks at random offsets, so a few share an address while both are live, which an allocator
// never does: a replay then meets frees of blocks it never saw allocated. Gives each (address, size, stack) of the
// allocs and frees an address of its own.
inline void give_distinct_addresses(Snapshot& s) {
  std::map<std::tuple<uint64_t, uint64_t, uint32_t>, uint64_t> moved;
  PackedVector<Event> events;
  for (Event e : s.events) {
    if (e.action == Action::alloc || e.action == Action::free_requested || e.action == Action::free_completed)
      e.addr = moved.try_emplace({e.addr, e.size, e.stack}, 0x7e0000000000ULL + (moved.size() << 32)).first->second;
    events.push_back(e);
  }
  s.events = std::move(events);
}

}  // namespace memrec
