#include "memrec/ranks_output.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/stats_output.h"
#include "memrec/units.h"

namespace memrec {
namespace {

using nlohmann::json;

constexpr size_t kAllRankRows = 64;  // more ranks than this: the text shows the median and the outliers
constexpr size_t kOutlierRanks = 8;  // from this many ranks: the outliers, the histogram and the spreads too

json rank_row(const RankSet& set, size_t i) {
  const RankRecording& r = set.ranks[i];
  return {{"rank", r.rank}, {"file", r.path}, {"rank_from", r.rank_from}, {"host", r.host}, {"device", r.device},
          {"events", r.events}, {"peak_allocated", r.peak_allocated.bytes},
          {"peak_allocated_ns", set.on_axis(i, r.peak_allocated.time_ns)}, {"peak_reserved", r.peak_reserved.bytes},
          {"peak_reserved_ns", set.on_axis(i, r.peak_reserved.time_ns)}, {"training_step", r.peak_step},
          {"phase", r.peak_phase}, {"ooms", r.ooms}, {"warnings", r.warnings}, {"read_from", r.read_from}};
}

json outliers_json(const RankSet& set) {
  json out = json::array();
  for (const Outlier& o : set.outliers) {
    json against = nullptr;
    if (o.against)
      against = {{"name", o.against->collective.name}, {"seq", o.against->collective.seq},
                 {"peak_to_collective_ns", o.against->peak_to_collective_ns},
                 {"others_after", o.against->others_after}, {"others_with_it", o.against->others_with_it}};
    out.push_back({{"rank", set.ranks[o.index].rank}, {"delta_peak_allocated", o.delta_peak_allocated},
                   {"peak_allocated", set.ranks[o.index].peak_allocated.bytes}, {"collective", against}});
  }
  return out;
}

json spreads_json(const RankSet& set, size_t top) {
  json out = json::array();
  for (size_t i = 0; i < std::min(top, set.spreads.size()); ++i) {
    const GroupSpread& g = set.spreads[i];
    out.push_back({{"by", to_string(g.by)}, {"key", g.key}, {"min_bytes", g.min_bytes}, {"median_bytes", g.median_bytes},
                   {"max_bytes", g.max_bytes}, {"min_rank", g.min_rank}, {"max_rank", g.max_rank}});
  }
  return out;
}

// "rank 517 peaked 40 ms before c10d::allgather_ #1234, after which 1022 of the 1023 other ranks that recorded it peaked"
std::string against_text(const RankSet& set, const Outlier& o) {
  const PeakAgainstCollective& a = *o.against;
  int64_t d = a.peak_to_collective_ns;
  return fmt::format("rank {} peaked {} {} {} #{}; of the {} other ranks that recorded it, {} peaked after its start",
                     set.ranks[o.index].rank, format_duration(std::llabs(d)), d >= 0 ? "before" : "after",
                     a.collective.name, a.collective.seq, a.others_with_it, a.others_after);
}

std::string outliers_text(const RankSet& set, size_t top) {
  std::string out = fmt::format("\nthe {} ranks furthest from the median rank ({}, {}):\n", set.outliers.size(),
                                set.ranks[*set.median].rank, format_bytes(set.ranks[*set.median].peak_allocated.bytes));
  for (const Outlier& o : set.outliers) {
    out += fmt::format("  rank {:>5}  {:>14}  {}{}\n", set.ranks[o.index].rank, format_bytes(set.ranks[o.index].peak_allocated.bytes),
                       o.delta_peak_allocated < 0 ? "-" : "+", format_bytes(static_cast<uint64_t>(std::llabs(o.delta_peak_allocated))));
    if (o.against) out += "           " + against_text(set, o) + "\n";
  }
  const PeakHistogram& h = set.histogram;
  out += "\nallocated peaks across the ranks:\n";
  for (size_t i = 0; i < h.counts.size(); ++i)
    out += fmt::format("  {:>12} .. {:<12} {:>6}\n", format_bytes(h.lo + i * h.width), format_bytes(h.lo + (i + 1) * h.width), h.counts[i]);
  if (!set.spreads.empty()) {
    out += "\ngroups whose bytes at the allocated peak differ between ranks, largest spread first:\n";
    for (size_t i = 0; i < std::min(top, set.spreads.size()); ++i) {
      const GroupSpread& g = set.spreads[i];
      out += fmt::format("  {:>12} (rank {}) .. {:>12} (rank {}), median {:>12}  by {}: {}\n", format_bytes(g.min_bytes),
                         g.min_rank, format_bytes(g.max_bytes), g.max_rank, format_bytes(g.median_bytes), to_string(g.by), g.key);
    }
  }
  return out;
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
  if (!any) out += "what was live at their peaks is the same by layer, module, category, owner and stack\n";
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
  bool collectives = set.aligned_on == "collectives";
  std::string note = fmt::format("the ranks ran on {} hosts, whose clocks differ: aligned on rank {}'s clock by the {} "
                                 "they share with it{}", set.hosts.size(), set.step_reference,
                                 collectives ? "collectives (their ends)" : "training steps (their starts)",
                                 set.uncertainty_ns >= 0 ? ", to within " + format_duration(set.uncertainty_ns) : "");
  if (set.unaligned.empty()) return note;
  return note + fmt::format("; rank{} {} shared none and keep their own clock", set.unaligned.size() > 1 ? "s" : "",
                            fmt::join(set.unaligned, ", "));
}

json ranks_json(const RankSet& set, size_t top) {
  json rows = json::array();
  for (size_t i = 0; i < set.ranks.size(); ++i) rows.push_back(rank_row(set, i));
  auto rank_of = [&](const std::optional<size_t>& i) { return i ? json(set.ranks[*i].rank) : json(nullptr); };
  return {{"ranks", rows},
          {"clock", {{"aligned_on", set.aligned_on.empty() ? "shared clock" : set.aligned_on},
                     {"uncertainty_ns", set.uncertainty_ns < 0 ? json(nullptr) : json(set.uncertainty_ns)},
                     {"reference_rank", set.step_reference < 0 ? json(nullptr) : json(set.step_reference)},
                     {"note", clock_note(set)}}},
          {"read_whole", set.read_whole},
          {"outliers", outliers_json(set)},
          {"peak_histogram", {{"lo", set.histogram.lo}, {"width", set.histogram.width}, {"counts", set.histogram.counts}}},
          {"group_spreads", spreads_json(set, top)},
          {"duration_ns", set.duration_ns},
          {"median_rank", rank_of(set.median)},
          {"furthest_rank", rank_of(set.furthest)},
          {"divergence", divergence_json(set, top)}};
}

std::string ranks_text(const RankSet& set, size_t top) {
  std::string out = fmt::format("{} ranks on one time axis: {}\n", set.ranks.size(), clock_note(set));
  if (set.read_whole)
    out += fmt::format("{} of them read whole: their files hold no summary (written before memrec kept one, or cut "
                       "short)\n", set.read_whole);
  out += fmt::format("\n{:>6}  {:>14} {:>11}  {:>14} {:>11}  {:<22} {:>5}  {}\n", "rank", "peak allocated", "at",
                     "peak reserved", "at", "step / phase", "OOMs", "file");
  // Many ranks: the median rank and the outliers only.
  auto shown = [&](size_t i) {
    return set.ranks.size() <= kAllRankRows || i == set.median ||
           std::any_of(set.outliers.begin(), set.outliers.end(), [&](const Outlier& o) { return o.index == i; });
  };
  size_t hidden = 0;
  for (size_t i = 0; i < set.ranks.size(); ++i)
    if (shown(i)) out += rank_line(set, i);
    else ++hidden;
  if (hidden) out += fmt::format("  ({} other ranks: --json lists every rank)\n", hidden);
  if (!set.furthest) return out;
  out += divergence_text(set, top);
  return set.ranks.size() < kOutlierRanks ? out : out + outliers_text(set, top);
}

}  // namespace memrec
