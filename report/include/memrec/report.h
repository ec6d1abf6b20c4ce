// `memrec report`: one self-contained HTML page (inline CSS, no scripts, the timeline as a data: URI) that a
// user can attach to a pull request. Every number comes from stats() / predict_checkpoint / scale_whatif, so the
// page shows exactly what `memrec stats` and `memrec whatif checkpoint` and `memrec whatif scale` print.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memrec/scale.h"
#include "memrec/snapshot.h"

namespace memrec {

struct ReportOptions {
  std::string file_name;      // shown in the title
  uint8_t device = 0;         // the device shown (a command picks it with choose_device)
  size_t top = 15;            // rows per table (the per-layer table always shows every layer)
  std::string png;            // the viewer's timeline screenshot (PNG bytes); empty: timeline_svg's picture instead
  std::string missing_png;    // why there is no screenshot, said under the drawn picture
  // --scale-with: the prediction at another size, drawn over the picture; its section gives the table and the curve.
  const ScaleWhatif* scale = nullptr;
};

std::string report_html(const Snapshot& s, const ReportOptions& o);
// What a notebook cell shows of a recording: the peaks, the timeline picture (timeline_svg) and the top owners at
// the peak (the top sites when no tensor has an owner), as one HTML fragment that brings its few styles along.
std::string summary_html(const Snapshot& s, const ReportOptions& o);

// Text made safe for HTML element content and quoted attribute values.
std::string html_escape(std::string_view text);
std::string base64_encode(std::string_view bytes);
// True when the bytes start with the 8-byte PNG signature.
bool is_png(std::string_view bytes);

}  // namespace memrec
