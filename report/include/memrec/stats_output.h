// `memrec stats` and `memrec diff` as the commands print them: text for people and JSON for scripts, whose field
// names are a contract, both from the results of memrec/stats.h.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memrec/stats.h"

namespace memrec {

nlohmann::json stats_json(const StatsResult& s);
std::string stats_text(const StatsResult& s);

nlohmann::json diff_json(const DiffResult& d);
std::string diff_text(const DiffResult& d);
// {"groups_changed": N, "rows": [{"key", "a_bytes", "b_bytes", "delta" (b - a), "a_count", "b_count"}]}: diff's
// rows; also ranks against ranks.
nlohmann::json group_changes_json(const GroupChanges& changes);
// The changed rows as diff prints them: "  +1.00 MiB   2.00 MiB -> 3.00 MiB    key".
std::string group_changes_text(const std::vector<GroupChange>& rows);

// Why the instant shown is not the time asked for, in one sentence; "" when it is.
std::string instant_note(const InstantShown& i);

// What the reader of a JSON output must know about its inputs: the note of each file cut short.
nlohmann::json warnings_json(std::initializer_list<const Snapshot*> inputs);

}  // namespace memrec
