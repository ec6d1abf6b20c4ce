#include "cmd_ranks.h"

#include <fmt/format.h>

#include "memrec/load.h"
#include "memrec/ranks.h"
#include "memrec/stats.h"
#include "memrec/units.h"

namespace memrec::cli {
namespace {

using nlohmann::json;

std::string where(const json& row) {
  std::string step = row["training_step"], phase = row["phase"];
  if (step.empty() || phase.empty()) return step + phase;
  return step + " / " + phase;
}

std::string ranks_text(const json& j) {
  std::string out = fmt::format("{} ranks on one time axis: {}\n\n", j["ranks"].size(), j["clock"]["note"].get<std::string>());
  out += fmt::format("{:>6}  {:>14} {:>11}  {:>14} {:>11}  {:<22} {:>5}  {}\n", "rank", "peak allocated", "at",
                     "peak reserved", "at", "step / phase", "OOMs", "file");
  for (const json& r : j["ranks"]) {
    bool reserved = r["peak_reserved"].get<uint64_t>() > 0;
    std::string mark = r["rank"] == j["furthest_rank"] ? " *" : r["rank"] == j["median_rank"] ? " m" : "  ";
    out += fmt::format("{:>4}{}  {:>14} {:>11}  {:>14} {:>11}  {:<22} {:>5}  {}\n", r["rank"].get<int>(), mark,
                       format_bytes(r["peak_allocated"]), "+" + format_duration(r["peak_allocated_ns"]),
                       reserved ? format_bytes(r["peak_reserved"]) : "none",
                       reserved ? "+" + format_duration(r["peak_reserved_ns"]) : "", where(r), r["ooms"].get<size_t>(),
                       r["file"].get<std::string>());
  }
  const json& d = j["divergence"];
  if (d.is_null()) return out;
  int64_t delta = d["delta_peak_allocated"];
  out += fmt::format("\nm: the median rank ({}); *: the rank furthest from it ({}, {}{} allocated at its peak)\n",
                     d["median_rank"].get<int>(), d["rank"].get<int>(), delta < 0 ? "-" : "+",
                     format_bytes(static_cast<uint64_t>(std::llabs(delta))));
  bool any = false;
  for (GroupBy g : kRankGroupings) {
    std::string by(to_string(g));
    const json& changes = d["by"][by];
    if (changes["groups_changed"].get<size_t>() == 0) continue;
    any = true;
    out += fmt::format("\nrank {} against rank {} at their peaks, by {} ({} groups changed):\n", d["rank"].get<int>(),
                       d["median_rank"].get<int>(), by, changes["groups_changed"].get<size_t>());
    out += group_changes_text(changes["rows"]);
  }
  if (!any) out += "what was live at their peaks is the same by layer, module, category and stack\n";
  return out;
}

}  // namespace

void print_rank_stats(const std::vector<std::string>& files, const std::string& at, bool kernels,
                      std::optional<uint8_t> device, size_t top, bool as_json) {
  if (at != "peak" || kernels) throw Error("--by rank compares the ranks at their peaks: --at and --kernels take one file");
  RankSet set = load_ranks(files, {.device = device});
  for (const RankRecording& r : set.ranks)
    for (const std::string& w : r.warnings) fmt::print(stderr, "memrec: note: {}\n", w);
  json j = ranks_json(set, top);
  fmt::print("{}", as_json ? j.dump(2) + "\n" : ranks_text(j));
}

void note_ranks(json& diff, const Snapshot& a, const std::string& path_a, const Snapshot& b, const std::string& path_b) {
  auto ra = recording_rank(a, path_a), rb = recording_rank(b, path_b);
  if (ra && rb && ra->first != rb->first) diff["ranks"] = {{"a", ra->first}, {"b", rb->first}};
}

}  // namespace memrec::cli
