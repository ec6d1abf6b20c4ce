// `memrec stats` and `memrec diff`: reports built as JSON (for scripts) and rendered as text from that JSON.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "memrec/analysis.h"

namespace memrec {

struct StatsOptions {
  std::optional<int64_t> at_ns;  // offset from the first event; unset = the allocated peak
  GroupBy by = GroupBy::stack;
  size_t top = 15;
  uint8_t device = 0;
  bool kernels = false;  // add the top kernels by GPU time (torch.profiler's key_averages)
};

// Parses "peak", or a time since the start like "1.5s", "250ms", "40us", "1200ns" (plain numbers are seconds).
std::optional<int64_t> parse_at(const std::string& text);

nlohmann::json stats_json(const Snapshot& s, const StatsOptions& o);
// What the reader of a JSON output must know about its inputs: the note of each file cut short.
nlohmann::json warnings_json(std::initializer_list<const Snapshot*> inputs);
std::string stats_text(const nlohmann::json& stats);

// Peaks of two runs and what was live at each, matched by group key (frame and scope names, not addresses).
nlohmann::json diff_json(const Snapshot& a, const Snapshot& b, const StatsOptions& o);
std::string diff_text(const nlohmann::json& diff);

}  // namespace memrec
