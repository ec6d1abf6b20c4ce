// Small pieces the text renderers share.
#pragma once

#include <cstdint>
#include <string>

#include "memrec/units.h"

namespace memrec {

// |v| without overflow at INT64_MIN.
inline uint64_t magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

// "-1.00 MiB" below zero, else `plus` and the bytes: "+1.00 MiB" with plus "+", "1.00 MiB" without.
inline std::string signed_bytes(int64_t v, const char* plus = "") {
  return (v < 0 ? "-" : plus) + format_bytes(magnitude(v));
}

}  // namespace memrec
