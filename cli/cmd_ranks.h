// The ranks of a data-parallel run in `memrec stats --by rank`; `memrec diff` names them (memrec/ranks_output.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memrec/ranks_output.h"

namespace memrec::cli {

// `memrec stats --by rank FILES...`: a row per rank and the rank furthest from the median, as text or JSON.
// `at` and `kernels` are stats' other options, refused here (the ranks are compared at their peaks).
void print_rank_stats(const std::vector<std::string>& files, const std::string& at, bool kernels,
                      std::optional<uint8_t> device, size_t top, bool json);

}  // namespace memrec::cli
