// `memrec stats` and `memrec diff`: reports built as JSON (for scripts) and rendered as text from that JSON.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "memrec/analysis.h"

namespace memrec {

struct StatsOptions {
  std::optional<int64_t> at_ns;  // offset from the first event; unset = the allocated peak
  GroupBy by = GroupBy::stack;
  size_t top = 15;
  std::optional<uint8_t> device;  // unset: choose_device's default
  bool kernels = false;  // add the top kernels by GPU time (torch.profiler's key_averages)
  bool full_stack = false;  // text: print each stack row's whole stack, frames marked site/user/internal
};

// Parses "peak" (nullopt), or a time since the first event like "1.5s", "250ms", "40us", "1200ns" (a plain
// number is seconds). Throws Error for anything else and for a time too large to count in int64 nanoseconds.
std::optional<int64_t> parse_at(const std::string& text);

// The instant `--at` names on one device: the last event at or before that time, or the allocated peak.
struct Instant {
  uint32_t step = kNoEvent;
  std::string note;  // why the instant is not the time asked for (past the end, or no events); empty when it is
};
Instant instant_at(const Replay& r, std::optional<int64_t> at_ns);

nlohmann::json stats_json(const Snapshot& s, const StatsOptions& o);
// What the reader of a JSON output must know about its inputs: the note of each file cut short.
nlohmann::json warnings_json(std::initializer_list<const Snapshot*> inputs);
std::string stats_text(const nlohmann::json& stats);

// Peaks of two runs and what was live at each, matched by group key (frame and scope names, not addresses).
nlohmann::json diff_json(const Snapshot& a, const Snapshot& b, const StatsOptions& o);
std::string diff_text(const nlohmann::json& diff);

// Two sets of groups matched by key, largest change first, at most `top` rows: {"groups_changed": N, "rows":
// [{"key", "a_bytes", "b_bytes", "delta" (b - a), "a_count", "b_count"}]}. diff's rows; also ranks against ranks.
nlohmann::json group_changes_json(std::span<const Group> a, std::span<const Group> b, size_t top);
// The changed rows as diff prints them: "  +1.00 MiB   2.00 MiB -> 3.00 MiB    key".
std::string group_changes_text(const nlohmann::json& rows);

}  // namespace memrec
