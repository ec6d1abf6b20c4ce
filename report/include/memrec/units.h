// Sizes and durations the way people read them, the same in every command and in the viewer.
#pragma once

#include <cstdint>
#include <string>

namespace memrec {

// "1.50 GiB", "512 B".
std::string format_bytes(uint64_t bytes);
// Duration in the largest unit that keeps it above 1: "12.3 ms".
std::string format_duration(int64_t ns);

}  // namespace memrec
