#include "memrec/units.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace memrec {

std::string format_bytes(uint64_t bytes) {
  constexpr std::array<const char*, 6> units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < units.size()) v /= 1024.0, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_duration(int64_t ns) {
  double v = static_cast<double>(ns);
  if (std::abs(v) < 1e3) return fmt::format("{} ns", ns);
  if (std::abs(v) < 1e6) return fmt::format("{:.1f} us", v / 1e3);
  if (std::abs(v) < 1e9) return fmt::format("{:.1f} ms", v / 1e6);
  return fmt::format("{:.3f} s", v / 1e9);
}

}  // namespace memrec
