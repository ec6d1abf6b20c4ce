// Pieces of HTML the report page and the notebook fragment share, so a number reads the same in both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memrec/report.h"
#include "memrec/stats.h"

namespace memrec {

// 54644744 -> "54,644,744": exact byte counts next to the rounded ones.
std::string grouped(uint64_t n);
// 0.123 -> "12.3%".
std::string percent(double share);
// A right-aligned cell of rounded bytes, the exact count on hover.
std::string bytes_cell(uint64_t bytes);
// When a peak held: "at +48.5 ms", then `separator` and its training step when it has one; "at the start".
std::string peak_when(const PeakShown& p, std::string_view separator);
// A table of groups (stats' live rows): bytes, share, blocks and the key, headed `bytes_title` and `key_title`.
std::string groups_table(std::string_view bytes_title, std::string_view key_title, const std::vector<GroupRow>& rows);

// The report page's "Live at the peak by owner" section; "" when the device's tensors have no recorded owners.
std::string owners_section(const Snapshot& s, const ReportOptions& o);

}  // namespace memrec
