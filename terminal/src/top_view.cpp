#include "top_view.h"

#include <algorithm>

#include <fmt/format.h>

#include "memrec/stats.h"
#include "memrec/units.h"

namespace memrec::terminal {
namespace {

constexpr int kLabelWidth = 10;  // "allocated "
constexpr int kPeakWidth = 52;   // "  peak 1023.99 MiB at +1.505 s (event 1234567)"

// `text` cut to `width` characters (UTF-8 code points), so a line never wraps.
std::string fit(const std::string& text, int width) {
  int chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    bool starts_char = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    if (starts_char && chars++ == width) return text.substr(0, i);
  }
  return text;
}

std::string sparkline(const std::vector<uint64_t>& values, uint64_t scale, bool unicode) {
  static const char* kBlocks[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  static const char* kAscii[] = {" ", "_", ".", "-", ":", "=", "+", "*", "#"};
  std::string out;
  for (uint64_t v : values) {
    // 0 stays blank; anything above it shows at least the lowest block.
    size_t level = scale == 0 || v == 0 ? 0 : std::clamp<size_t>((v * 8 + scale - 1) / scale, 1, 8);
    out += unicode ? kBlocks[level] : kAscii[level];
  }
  return out;
}

std::string moment(const Replay& r, uint32_t step) {
  if (step == kNoEvent) return "at start";
  return fmt::format("at +{} (event {})", format_duration(r.time_of(step) - r.time_of(kNoEvent)), step);
}

// The step the view shows, and the chart column it falls in.
uint32_t instant(const TopDocument& doc, const TopState& state, const TimeAxis& axis) {
  if (!state.column) return doc.replay->peak_allocated().step;
  return find_instant(*doc.replay, axis.end_of(*state.column)).step;
}

std::string header_line(const TopDocument& doc, const Header& header) {
  const Replay& r = *doc.replay;
  std::string line = fmt::format("memrec top  {}  device {}  {} events over {}", header.file, r.device(), r.steps(),
                                 format_duration(doc.duration_ns));
  if (header.follow) line += doc.snapshot->complete ? "  following (the file is complete)" : "  following";
  return line;
}

std::vector<std::string> chart_lines(const TopDocument& doc, const Series& series, const TimeAxis& axis,
                                     uint32_t step, const Screen& screen) {
  const Replay& r = *doc.replay;
  uint64_t scale = std::max(r.peak_allocated().bytes, r.peak_reserved().bytes);
  auto row = [&](const char* label, const std::vector<uint64_t>& values, const Peak& peak) {
    return fmt::format("{:<{}}{}  peak {} {}", label, kLabelWidth, sparkline(values, scale, screen.unicode),
                       format_bytes(peak.bytes), moment(r, peak.step));
  };
  int marker = axis.column_of(r.time_of(step) - r.time_of(kNoEvent));
  // As stats says it: a recording without reserved bytes (the CPU allocator's) has no reserved peak.
  std::string reserved = r.peak_reserved().bytes ? row("reserved", series.reserved, r.peak_reserved())
                                                 : fmt::format("{:<{}}none", "reserved", kLabelWidth);
  return {row("allocated", series.allocated, r.peak_allocated()), reserved, std::string(kLabelWidth + marker, ' ') + "^"};
}

std::string instant_line(const TopDocument& doc, uint32_t step) {
  const Replay& r = *doc.replay;
  Totals t = r.after(step);
  bool peak = step == r.peak_allocated().step;
  return fmt::format("{}{}: {} allocated, {} reserved", moment(r, step), peak ? ", the allocated peak" : "",
                     format_bytes(t.allocated), format_bytes(t.reserved));
}

std::vector<std::string> group_lines(const TopDocument& doc, uint32_t step, const Grouping& g, size_t rows) {
  std::vector<Group> groups = group_live(*doc.snapshot, *doc.replay, step, g.by);
  uint64_t total = doc.replay->after(step).allocated;
  std::vector<std::string> out = {fmt::format("{:>12}  {:>6}  {:>7}  {} at this instant", "bytes", "share", "blocks", g.name)};
  for (size_t i = 0; i < groups.size() && out.size() <= rows; ++i) {
    double share = total ? 100.0 * double(groups[i].bytes) / double(total) : 0.0;
    out.push_back(fmt::format("{:>12}  {:>5.1f}%  {:>6}x  {}", format_bytes(groups[i].bytes), share, groups[i].count,
                              groups[i].key));
  }
  return out;
}

std::string keys_line(const TopState& state) {
  std::string names;
  for (size_t i = 0; i < std::size(kGroupings); ++i)
    names += fmt::format("{}{}{}{}", i ? " " : "", i == state.grouping ? "[" : "", kGroupings[i].name,
                         i == state.grouping ? "]" : "");
  return "left/right: time  p: peak  g: grouping " + names + " (s o m l c)  q: quit";
}

// The lines cut to the screen: the key help stays on the last line.
std::vector<std::string> fitted(std::vector<std::string> lines, std::string last, const Screen& screen) {
  lines.resize(std::max(screen.height - 1, 0));
  lines.push_back(std::move(last));
  for (std::string& l : lines) l = fit(l, screen.width);
  return lines;
}

}  // namespace

TimeAxis chart_axis(const TopDocument& doc, const Screen& screen) {
  return {doc.duration_ns, std::max(8, screen.width - kLabelWidth - kPeakWidth)};
}

std::vector<std::string> top_lines(const TopDocument& doc, const Series& series, const TopState& state,
                                   const Screen& screen, const Header& header) {
  TimeAxis axis = chart_axis(doc, screen);
  uint32_t step = instant(doc, state, axis);
  std::vector<std::string> lines = {header_line(doc, header)};
  for (std::string& l : chart_lines(doc, series, axis, step, screen)) lines.push_back(std::move(l));
  lines.push_back(instant_line(doc, step));
  if (!doc.growth.empty()) lines.push_back("growth across steps: " + doc.growth);
  lines.push_back("");
  size_t rows = std::max(screen.height - static_cast<int>(lines.size()) - 2, 0);
  for (std::string& l : group_lines(doc, step, kGroupings[state.grouping], rows)) lines.push_back(std::move(l));
  return fitted(std::move(lines), keys_line(state), screen);
}

std::vector<std::string> waiting_lines(const Header& header, const std::string& why, const Screen& screen) {
  return fitted({"memrec top  " + header.file, "waiting for the file: " + why}, "q: quit", screen);
}

}  // namespace memrec::terminal
