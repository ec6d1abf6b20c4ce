// Ranks of a run whose answers are known by construction, written as .memrec files: the ranks tests of
// snapshot/ and of the CLI read the same ones.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "common/process.h"
#include "memrec/format.h"
#include "memrec/snapshot.h"

namespace memrec::test {

inline constexpr uint64_t kMiB = 1 << 20;

// One rank's step 0: a 64 MiB segment, 4 MiB of parameters, 8 MiB of activations in each of two layers (plus
// `extra` bytes in layers.1), freed in backward. Times start at t0; the allocated peak (20 MiB + extra) comes at
// the end of layers.1's forward.
inline Snapshot rank_run(uint64_t extra, int64_t t0, const std::string& host) {
  Snapshot s;
  if (!host.empty()) s.metadata["host"] = host;
  auto scope = [&](ScopeKind kind, const char* name, int64_t start, int64_t end, uint32_t parent = 0) {
    s.scopes.push_back(Scope{t0 + start, t0 + end, s.strings.intern(name), parent, kind, 0});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  };
  auto event = [&](int64_t t, Action a, uint64_t addr, uint64_t size, uint32_t sc = 0) {
    s.events.push_back(Event{.time_ns = t0 + t, .addr = addr, .size = size, .scope = sc, .action = a});
  };
  uint32_t step = scope(ScopeKind::step, "step 0", 0, 1000);
  uint32_t fwd = scope(ScopeKind::phase, "forward", 100, 500, step);
  uint32_t l0 = scope(ScopeKind::module, "layers.0.mlp", 110, 200, fwd);
  uint32_t l1 = scope(ScopeKind::module, "layers.1.mlp", 200, 300, fwd);
  uint32_t bwd = scope(ScopeKind::phase, "backward", 500, 800, step);
  event(10, Action::segment_alloc, 0x10000000, 64 * kMiB);
  event(20, Action::alloc, 0x10000000, 4 * kMiB);
  event(150, Action::alloc, 0x10400000, 8 * kMiB, l0);
  event(250, Action::alloc, 0x10C00000, 8 * kMiB, l1);
  if (extra) event(260, Action::alloc, 0x11400000, extra, l1);
  if (extra) event(600, Action::free_requested, 0x11400000, extra, bwd);
  for (uint64_t addr : {0x10400000ull, 0x10C00000ull}) event(610, Action::free_requested, addr, 8 * kMiB, bwd);
  return s;
}

// Makes a closed file unreadable whole while its end (the footer and the summary chunk) stays intact: the first
// chunk after the 16-byte header gets a type no reader knows.
inline void damage_first_chunk(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(16);
  f.write("\xEE\xEE\xEE\xEE", 4);
}

// Rank files in a folder of their own.
struct RankFiles {
  TempDir dir;
  std::vector<std::string> paths;
  void add(const std::string& name, const Snapshot& s) {
    paths.push_back(dir / name);
    write_file(s, paths.back());
  }
  std::string quoted() const {
    std::string out;
    for (const std::string& p : paths) out += (out.empty() ? "" : " ") + quote(p);
    return out;
  }
};

}  // namespace memrec::test
