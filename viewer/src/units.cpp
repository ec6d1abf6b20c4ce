#include "units.h"

#include <array>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "memrec/viewer.h"

namespace memrec::viewer {

std::string human_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  size_t u = 0;
  for (; v >= 1024 && u + 1 < units.size(); ++u) v /= 1024;
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : v < 100 ? 1 : 0, units[u]);
}

std::string human_duration(int64_t ns) {
  double v = std::abs(static_cast<double>(ns));
  const char* sign = ns < 0 ? "-" : "";
  if (v < 1e3) return fmt::format("{}{} ns", sign, std::abs(ns));
  if (v < 1e6) return fmt::format("{}{:.3g} us", sign, v / 1e3);
  if (v < 1e9) return fmt::format("{}{:.3g} ms", sign, v / 1e6);
  return fmt::format("{}{:.3g} s", sign, v / 1e9);
}

std::optional<std::pair<int, int>> parse_size(std::string_view text) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(std::string(text).c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || x != 'x') return std::nullopt;
  if (w < 320 || h < 240 || w > 8192 || h > 8192) return std::nullopt;
  return std::pair{w, h};
}

}  // namespace memrec::viewer
