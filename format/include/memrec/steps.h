// Training steps as memrec record and the workloads name them: scopes of kind step named "step N".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace memrec {

// N of a step scope's name "step N"; unset for any other name.
std::optional<uint64_t> step_scope_number(std::string_view name);

}  // namespace memrec
