// The ranks of a data-parallel run in `memrec stats --by rank` and `memrec diff`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memrec/snapshot.h"

namespace memrec::cli {

// `memrec stats --by rank FILES...`: a row per rank and the rank furthest from the median, as text or JSON.
// `at` and `kernels` are stats' other options, refused here (the ranks are compared at their peaks).
void print_rank_stats(const std::vector<std::string>& files, const std::string& at, bool kernels,
                      std::optional<uint8_t> device, size_t top, bool json);

// Adds "ranks": {"a": R, "b": S} to a diff of two recordings of different ranks of one run, so that it says so.
void note_ranks(nlohmann::json& diff, const Snapshot& a, const std::string& path_a, const Snapshot& b,
                const std::string& path_b);

}  // namespace memrec::cli
