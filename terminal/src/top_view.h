// The screen of `memrec top` as lines of text: a function of the document and the view state, so the terminal
// loop (top.cpp) only draws the lines and turns keys into state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "memrec/analysis.h"
#include "top_document.h"

namespace memrec::terminal {

// The groupings the view offers, in the order `g` steps through them, and the key that picks each.
struct Grouping {
  GroupBy by;
  const char* name;
  int key;
};
inline constexpr Grouping kGroupings[] = {{GroupBy::stack, "site", 's'},
                                          {GroupBy::owner, "owner", 'o'},
                                          {GroupBy::module, "module", 'm'},
                                          {GroupBy::layer, "layer", 'l'},
                                          {GroupBy::category, "category", 'c'}};

struct TopState {
  size_t grouping = 0;        // into kGroupings
  std::optional<int> column;  // the instant shown is where this column of the time axis ends; unset: the peak
};

struct Screen {
  int width = 80, height = 24;
  bool unicode = true;  // the sparkline in block characters, else in ASCII
};

// What the header says about the file: its name, and while following, that the view tails it.
struct Header {
  std::string file;
  bool follow = false;
};

// The time axis the sparkline is drawn on for this screen.
TimeAxis chart_axis(const TopDocument& doc, const Screen& screen);

// The lines of the screen, top to bottom, each at most screen.width characters. `series` is series(axis) of
// chart_axis(doc, screen).
std::vector<std::string> top_lines(const TopDocument& doc, const Series& series, const TopState& state,
                                   const Screen& screen, const Header& header);

// The lines while there is no document yet (following a file not yet readable): why.
std::vector<std::string> waiting_lines(const Header& header, const std::string& why, const Screen& screen);

}  // namespace memrec::terminal
