#include "memrec/units.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace memrec {
namespace {

// `v` with `decimals` decimals, or with three significant digits when compact: "1.23", "12.3", "123".
std::string number(double v, int decimals, Digits digits) {
  double a = std::abs(v);
  if (digits == Digits::compact) decimals = a < 10 ? 2 : a < 100 ? 1 : 0;
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

std::string format_bytes(uint64_t bytes, Digits digits) {
  constexpr std::array<const char*, 6> units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < units.size()) v /= 1024.0, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : number(v, 2, digits) + " " + units[u];
}

std::string format_duration(int64_t ns, Digits digits) {
  double v = static_cast<double>(ns);
  if (std::abs(v) < 1e3) return fmt::format("{} ns", ns);
  if (std::abs(v) < 1e6) return number(v / 1e3, 1, digits) + " us";
  if (std::abs(v) < 1e9) return number(v / 1e6, 1, digits) + " ms";
  return number(v / 1e9, 3, digits) + " s";
}

}  // namespace memrec
