// Sizes and durations the way people read them.
#pragma once

#include <cstdint>
#include <string>

namespace memrec::viewer {

std::string human_bytes(uint64_t bytes);   // "1.50 GiB", "512 B"
std::string human_duration(int64_t ns);    // "12.3 ms", "4.00 s"

}  // namespace memrec::viewer
