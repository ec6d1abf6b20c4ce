// Splitting a stage that scales with a recording's length (the replay, the timeline's levels) over the cores: the
// work is cut into parts by position, each part on a thread of its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

namespace memrec {

// Calls f(part) for every part in [0, parts), each on a thread of its own (part 0 on the caller's); rethrows the
// first part's exception once all are done.
template <class F> void on_threads(unsigned parts, F f) {
  std::vector<std::exception_ptr> errors(parts);
  auto run = [&](unsigned part) {
    try {
      f(part);
    } catch (...) {
      errors[part] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> threads;
    for (unsigned part = 1; part < parts; ++part) threads.emplace_back(run, part);
    run(0);
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// The part-th of `parts` even slices of [0, n).
inline std::pair<uint32_t, uint32_t> slice(size_t n, unsigned part, unsigned parts) {
  return {static_cast<uint32_t>(n * part / parts), static_cast<uint32_t>(n * (part + 1) / parts)};
}

// How many parts to cut `n` positions into: `threads` when given, else one per core with at least `per_part`
// positions each (one below that: starting a thread would not pay); never more parts than positions, and at least one.
inline unsigned parts_for(size_t n, unsigned threads, size_t per_part) {
  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  size_t parts = threads ? threads : std::clamp<size_t>(n / per_part, 1, cores);
  return static_cast<unsigned>(std::clamp<size_t>(parts, 1, std::max<size_t>(n, 1)));
}

}  // namespace memrec
