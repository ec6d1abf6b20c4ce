#include "memrec/ranks_output.h"

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/stats_output.h"
#include "memrec/units.h"

namespace memrec {
namespace {

using nlohmann::json;

json rank_row(const RankSet& set, size_t i) {
  const RankRecording& r = set.ranks[i];
  return {{"rank", r.rank}, {"file", r.path}, {"rank_from", r.rank_from}, {"host", r.host}, {"device", r.device},
          {"events", r.events}, {"peak_allocated", r.peak_allocated.bytes},
          {"peak_allocated_ns", set.on_axis(i, r.peak_allocated.time_ns)}, {"peak_reserved", r.peak_reserved.bytes},
          {"peak_reserved_ns", set.on_axis(i, r.peak_reserved.time_ns)}, {"training_step", r.peak_step},
          {"phase", r.peak_phase}, {"ooms", r.ooms}, {"warnings", r.warnings}};
}

// The furthest rank's groups against the median rank's, by kRankGroupings[g]; needs set.furthest.
GroupChanges changes(const RankSet& set, size_t g, size_t top) {
  return group_changes(set.ranks[*set.median].at_peak[g], set.ranks[*set.furthest].at_peak[g], top);
}

json divergence_json(const RankSet& set, size_t top) {
  if (!set.furthest) return nullptr;
  json by = json::object();
  for (size_t g = 0; g < kRankGroupings.size(); ++g) by[std::string(to_string(kRankGroupings[g]))] = group_changes_json(changes(set, g, top));
  return {{"rank", set.ranks[*set.furthest].rank}, {"median_rank", set.ranks[*set.median].rank},
          {"delta_peak_allocated", set.delta_peak_allocated}, {"delta_peak_reserved", set.delta_peak_reserved},
          {"by", by}};
}

std::string rank_line(const RankSet& set, size_t i) {
  const RankRecording& r = set.ranks[i];
  auto at = [&](const Peak& p) { return "+" + format_duration(set.on_axis(i, p.time_ns)); };
  bool reserved = r.peak_reserved.bytes > 0;
  std::string mark = i == set.furthest ? " *" : i == set.median ? " m" : "  ";
  return fmt::format("{:>4}{}  {:>14} {:>11}  {:>14} {:>11}  {:<22} {:>5}  {}\n", r.rank, mark,
                     format_bytes(r.peak_allocated.bytes), at(r.peak_allocated),
                     reserved ? format_bytes(r.peak_reserved.bytes) : "none", reserved ? at(r.peak_reserved) : "",
                     peak_step_and_phase(r), r.ooms, r.path);
}

std::string divergence_text(const RankSet& set, size_t top) {
  int rank = set.ranks[*set.furthest].rank, median = set.ranks[*set.median].rank;
  int64_t delta = set.delta_peak_allocated;
  std::string out = fmt::format("\nm: the median rank ({}); *: the rank furthest from it ({}, {}{} allocated at its "
                                "peak)\n", median, rank, delta < 0 ? "-" : "+",
                                format_bytes(static_cast<uint64_t>(std::llabs(delta))));
  bool any = false;
  for (size_t g = 0; g < kRankGroupings.size(); ++g) {
    GroupChanges c = changes(set, g, top);
    if (c.changed == 0) continue;
    any = true;
    out += fmt::format("\nrank {} against rank {} at their peaks, by {} ({} groups changed):\n", rank, median,
                       to_string(kRankGroupings[g]), c.changed);
    out += group_changes_text(c.rows);
  }
  if (!any) out += "what was live at their peaks is the same by layer, module, category and stack\n";
  return out;
}

}  // namespace

std::string peak_step_and_phase(const RankRecording& r) {
  if (r.peak_step.empty() || r.peak_phase.empty()) return r.peak_step + r.peak_phase;
  return r.peak_step + " / " + r.peak_phase;
}

std::string clock_note(const RankSet& set) {
  if (set.hosts.empty()) return "no host recorded: the ranks' clocks are taken as one (CLOCK_REALTIME)";
  if (!set.aligned_on_steps) return "the ranks ran on one host (" + set.hosts.front() + ") and share its clock";
  std::string note = fmt::format("the ranks ran on {} hosts, whose clocks differ: aligned so that each rank's first "
                                 "training step starts with rank {}'s", set.hosts.size(), set.step_reference);
  if (set.unaligned.empty()) return note;
  return note + fmt::format("; rank{} {} recorded no step and keep their own clock", set.unaligned.size() > 1 ? "s" : "",
                            fmt::join(set.unaligned, ", "));
}

json ranks_json(const RankSet& set, size_t top) {
  json rows = json::array();
  for (size_t i = 0; i < set.ranks.size(); ++i) rows.push_back(rank_row(set, i));
  auto rank_of = [&](const std::optional<size_t>& i) { return i ? json(set.ranks[*i].rank) : json(nullptr); };
  return {{"ranks", rows},
          {"clock", {{"aligned_on", set.aligned_on_steps ? "first step" : "shared clock"}, {"note", clock_note(set)}}},
          {"duration_ns", set.duration_ns},
          {"median_rank", rank_of(set.median)},
          {"furthest_rank", rank_of(set.furthest)},
          {"divergence", divergence_json(set, top)}};
}

std::string ranks_text(const RankSet& set, size_t top) {
  std::string out = fmt::format("{} ranks on one time axis: {}\n\n", set.ranks.size(), clock_note(set));
  out += fmt::format("{:>6}  {:>14} {:>11}  {:>14} {:>11}  {:<22} {:>5}  {}\n", "rank", "peak allocated", "at",
                     "peak reserved", "at", "step / phase", "OOMs", "file");
  for (size_t i = 0; i < set.ranks.size(); ++i) out += rank_line(set, i);
  return set.furthest ? out + divergence_text(set, top) : out;
}

}  // namespace memrec
