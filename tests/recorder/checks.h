// Checks shared by the CPU and GPU recorder tests: properties every recording must have.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "memrec/snapshot.h"

namespace memrec::test {

// Every free_requested/free_completed matches an earlier alloc of the same address and size (or a block live
// in segments_start); returns the blocks still allocated at the end, address -> requested size.
inline std::map<uint64_t, uint64_t> check_frees_match(const Snapshot& s, uint8_t device) {
  std::map<uint64_t, uint64_t> live, pending;
  for (const Segment& seg : s.segments_start)
    for (const Block& b : seg.blocks)
      if (seg.device == device && b.state == BlockState::active_allocated) live[b.addr] = b.requested_size;
  size_t bad = 0;
  for (const Event& e : s.events) {
    if (e.device != device) continue;
    if (e.action == Action::alloc) {
      EXPECT_FALSE(live.count(e.addr)) << "alloc of a live address " << e.addr;
      live[e.addr] = e.size;
    } else if (e.action == Action::free_requested) {
      auto it = live.find(e.addr);
      if (it == live.end() || it->second != e.size) { ++bad; continue; }
      pending[e.addr] = e.size;
      live.erase(it);
    } else if (e.action == Action::free_completed) {
      auto it = pending.find(e.addr);
      if (it == pending.end() || it->second != e.size) { ++bad; continue; }
      pending.erase(it);
    }
  }
  EXPECT_EQ(bad, 0u) << "frees without a matching alloc";
  return live;
}

// The workload's own code shows up with file:line, and no frame is nameless.
inline void check_frames(const Snapshot& s) {
  ASSERT_GT(s.frames.size(), 0u);
  bool workload = false;
  for (const Frame& f : s.frames.all()) {
    const std::string& fn = s.strings[f.function];
    const std::string& file = s.strings[f.file];
    EXPECT_FALSE(fn.empty()) << "frame at pc " << f.pc << " has no name";
    if (fn.find("forward") != std::string::npos && file.ends_with("workloads/src/workloads.cpp") && f.line > 0)
      workload = true;
    EXPECT_EQ(fn.find("memrec::detail::"), std::string::npos) << "recorder frame kept: " << fn;
  }
  EXPECT_TRUE(workload) << "no workloads.cpp forward frame with file:line";
  size_t with_stack = 0, allocs = 0;
  for (const Event& e : s.events)
    if (e.action == Action::alloc) ++allocs, with_stack += e.stack != 0;
  EXPECT_EQ(with_stack, allocs) << "allocs without a stack";
}

inline bool has_scope(const Snapshot& s, ScopeKind kind, const std::string& name) {
  for (const Scope& sc : s.scopes)
    if (sc.kind == kind && s.strings[sc.name] == name) return true;
  return false;
}

}  // namespace memrec::test
