// `memrec view`: the desktop viewer's entry point and the few facts tests check the screenshots against.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memrec {
struct ScaleWhatif;
}

namespace memrec::viewer {

struct Options {
  std::string path;
  std::vector<std::string> ranks;  // two or more: the ranks of one run side by side (path is the first)
  std::string screenshot;  // write this PNG after a few frames and exit; empty: interactive window
  std::string at;          // instant to analyze: "peak" or a time after the start (memrec::parse_at)
  std::string view;        // the view a screenshot shows: "timeline" (default), "flame", "segments" or "modules"
  std::string range;       // "T1..T2": the timeline's span (--view timeline), else the bytes allocated in it
  std::string steps;       // "A..B": read only those training steps (memrec::parse_range reads both)
  std::string group_by;    // stack|op|module|phase|category|layer|site|pool (default: stack)
  bool every_frame = false;
  bool follow = false;     // show the file while it is written, reloading it as it grows (one file, a window)  // the stack trees keep every frame instead of folding the internal ones
  int width = 1600;
  int height = 900;
  std::optional<uint8_t> device;  // unset: the first device with events (memrec::choose_device)
  // --scale-with: the prediction at one size, with its curve on this recording's clock, drawn over the timeline.
  std::shared_ptr<const ScaleWhatif> ghost;
};

// Opens the window (or renders the screenshot). Returns the process exit code; throws memrec::Error on bad input.
int run(const Options& options);

// "1600x900"; nullopt when malformed.
std::optional<std::pair<int, int>> parse_size(std::string_view text);

// Band colors (ImGui's packed ABGR): the hue from the stack id, so one call site keeps one color along the
// timeline, and a lighter or darker shade by allocation id, so neighbouring blocks of one site stay apart.
std::span<const uint32_t> band_palette();
uint32_t band_color(uint32_t stack, uint32_t allocation);
// Colors the timeline paints besides the bands, exact in screenshots (the texture is sampled without filtering).
inline constexpr uint32_t kPlotBackground = 0xFF1E1E1Eu;
inline constexpr uint32_t kReservedColor = 0xFF50A0F0u;  // orange line: reserved bytes
inline constexpr uint32_t kAllocatedColor = 0xFFFFFFFFu; // white line: allocated bytes
inline constexpr uint32_t kPeakColor = 0xFF0000FFu;      // pure red: the peak marker
inline constexpr uint32_t kSelectedColor = 0xFF00DCFFu;  // yellow: the selected instant
// A prediction (at another size with --scale-with, or under the selected advice): dashed lines over the recorded
// ones, and the device's memory where the prediction runs out of it.
inline constexpr uint32_t kGhostAllocatedColor = 0xFFE060FFu;  // pink: predicted allocated bytes
inline constexpr uint32_t kGhostReservedColor = 0xFFFFD040u;   // light blue: predicted reserved bytes
inline constexpr uint32_t kDeviceMemoryColor = 0xFF4060FFu;    // light red: the device's memory, where it runs out
inline constexpr uint32_t kEvidenceColor = 0xFF30FF30u;        // green: the selected advice's blocks
// Segment history: what is not a live block in a segment's bar.
inline constexpr uint32_t kPendingFreeColor = 0xFF00B0FFu;     // amber: freed, not yet released (record_stream)
inline constexpr uint32_t kInactiveSplitColor = 0xFF30305Au;   // dark red: free piece of a segment in use
inline constexpr uint32_t kFreeSegmentColor = 0xFF484848u;     // gray: a segment with nothing in it

}  // namespace memrec::viewer
