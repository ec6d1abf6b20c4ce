// The timeline picture drawn without a display: one self-contained SVG of allocated (filled) and reserved (line)
// bytes over a device's recording, the allocated peak marked, training steps and phases under the curve. What
// `memrec report` embeds when the viewer cannot take its screenshot, `memrec report --format svg` writes, and a
// notebook cell shows. Each pixel column shows the most bytes held during it (memrec/time_series.h), so the
// curve's highest point is the peak exactly.
#pragma once

#include <cstdint>
#include <string>

#include "memrec/snapshot.h"

namespace memrec {

struct TimelineSvgSize {
  int width = 1100, height = 340;
};

std::string timeline_svg(const Snapshot& s, uint8_t device, TimelineSvgSize size = {});

}  // namespace memrec
