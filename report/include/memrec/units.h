// Sizes and durations the way people read them, the same in every command and in the viewer.
#pragma once

#include <cstdint>
#include <string>

namespace memrec {

// How many digits a size or a duration keeps: `full` as the commands print them ("297.70 MiB", "2.500 s");
// `compact`, three significant ones, for tight spaces such as the viewer's axis labels ("298 MiB", "2.50 s").
enum class Digits { full, compact };

// "1.50 GiB", "512 B".
std::string format_bytes(uint64_t bytes, Digits digits = Digits::full);
// Duration in the largest unit that keeps it above 1: "12.3 ms".
std::string format_duration(int64_t ns, Digits digits = Digits::full);

}  // namespace memrec
