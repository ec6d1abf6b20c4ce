#include <array>

#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

// Twelve distinguishable mid-bright hues (ABGR), each followed by a darker shade, none equal to the line or
// marker colors.
constexpr std::array<uint32_t, 24> kPalette = {
    0xFFB47C4Cu, 0xFF90633Cu, 0xFF4CA8E8u, 0xFF3C86B9u, 0xFF5CB85Cu, 0xFF499349u,
    0xFF8A6BD9u, 0xFF6E55ADu, 0xFF3FC1C9u, 0xFF329AA0u, 0xFFC77FB0u, 0xFF9F658Cu,
    0xFF6E9E3Du, 0xFF587E30u, 0xFFD4A35Au, 0xFFA98248u, 0xFF7A7AE0u, 0xFF6161B3u,
    0xFF58B8A8u, 0xFF469386u, 0xFFA0A060u, 0xFF80804Cu, 0xFF9C7CCAu, 0xFF7C63A1u,
};

uint32_t spread(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

}  // namespace

std::span<const uint32_t> band_palette() { return kPalette; }
uint32_t band_color(uint32_t stack, uint32_t allocation) {
  return kPalette[2 * (spread(stack) % (kPalette.size() / 2)) + (allocation & 1)];
}
uint32_t category_color(Category c) {
  // parameter, input, activation, gradient, optimizer state, temporary, unknown (ABGR)
  static constexpr std::array<uint32_t, kCategoryCount> kColors = {0xFFB47C4Cu, 0xFF9C9C9Cu, 0xFF4CA8E8u, 0xFF5CB85Cu,
                                                                   0xFF8A6BD9u, 0xFF3FC1C9u, 0xFF707070u};
  return kColors[static_cast<size_t>(c)];
}
uint32_t growth_color(size_t site) {
  // Saturated hues (ABGR) that stand out from the dimmed bands and differ from the line and marker colors.
  static constexpr std::array<uint32_t, kGrowthColors> kColors = {0xFF30FF30u, 0xFFFF30FFu, 0xFFFFFF30u,
                                                                  0xFF80FFFFu, 0xFF3080FFu, 0xFFFF8030u};
  return kColors[site % kGrowthColors];
}
uint32_t name_color(uint32_t string_id) { return kPalette[2 * (spread(string_id * 2654435761u + 1) % (kPalette.size() / 2))]; }

}  // namespace memrec::viewer
