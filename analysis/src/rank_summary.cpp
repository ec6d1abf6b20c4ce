// A rank's summary as JSON (docs/ranks.md, Summaries): what a summary chunk holds and what `.summary.json` files
// beside the recordings hold. The peak fields are those of `memrec stats --json`'s peak_allocated and peak_reserved.
#include <fstream>

#include <fmt/format.h>

#include "memrec/format.h"
#include "memrec/ranks.h"

namespace memrec {
namespace {

using nlohmann::json;

constexpr int kSummaryVersion = 1;

json groups_json(const std::array<std::vector<Group>, kRankGroupings.size()>& by) {
  json out = json::object();
  for (size_t g = 0; g < kRankGroupings.size(); ++g) {
    json rows = json::array();
    for (const Group& group : by[g]) rows.push_back({{"key", group.key}, {"bytes", group.bytes}, {"count", group.count}});
    out[std::string(to_string(kRankGroupings[g]))] = std::move(rows);
  }
  return out;
}

std::array<std::vector<Group>, kRankGroupings.size()> groups_from(const json& j) {
  std::array<std::vector<Group>, kRankGroupings.size()> out;
  for (size_t g = 0; g < kRankGroupings.size(); ++g) {
    auto it = j.find(std::string(to_string(kRankGroupings[g])));
    if (it == j.end()) continue;  // a grouping this summary does not hold compares as empty
    for (const json& row : *it)
      out[g].push_back(summary_group(row.at("key"), row.at("bytes"), row.at("count")));
  }
  return out;
}

// stats --json's peak fields (time_ns counts from the recording's first event), and the step, phase and groups.
json peak_json(const RankRecording& r, const Peak& p, const std::array<std::vector<Group>, kRankGroupings.size()>& live,
               const std::string& step, const std::string& phase) {
  return {{"bytes", p.bytes},  {"time_ns", p.time_ns - r.begin_ns}, {"event", p.step == kNoEvent ? json(nullptr) : json(p.step)},
          {"training_step", step}, {"phase", phase}, {"live", groups_json(live)}};
}

Peak peak_from(const json& j, int64_t begin_ns) {
  return {j.at("bytes"), j.at("event").is_null() ? kNoEvent : j.at("event").get<uint32_t>(), begin_ns + j.at("time_ns").get<int64_t>()};
}

json curve_json(const RankRecording& r) {
  return {{"bucket_ns", r.bucket_ns}, {"allocated", r.allocated_max}, {"reserved", r.reserved_max}};
}

void curve_from(const json& j, RankRecording& r) {  // r.path named in the error
  r.bucket_ns = j.at("bucket_ns");
  r.allocated_max = j.at("allocated").get<std::vector<uint64_t>>();
  r.reserved_max = j.at("reserved").get<std::vector<uint64_t>>();
  if (r.bucket_ns < 1 || r.allocated_max.empty() || r.allocated_max.size() != r.reserved_max.size())
    throw Error(fmt::format("{}: not a memrec rank summary: its memory curve is malformed", r.path));
}

}  // namespace

bool is_summary_json(const std::string& path) { return path.ends_with(".summary.json"); }

json rank_summary_json(const RankRecording& r) {
  json steps = json::array(), collectives = json::array();
  for (const StepStart& s : r.steps)
    steps.push_back({{"name", s.name}, {"start_ns", s.start_ns}, {"allocated", s.allocated}, {"reserved", s.reserved}});
  for (const Collective& c : r.collectives)
    collectives.push_back({{"name", c.name}, {"seq", c.seq}, {"start_ns", c.start_ns}, {"end_ns", c.end_ns}});
  json out = {{"memrec_summary", kSummaryVersion},
              {"rank", r.rank < 0 ? json(nullptr) : json(r.rank)}, {"rank_from", r.rank_from}, {"host", r.host},
              {"pid", r.pid}, {"world_size", r.world_size}, {"device", r.device}, {"events", r.events},
              {"complete", r.complete}, {"warnings", r.warnings}, {"dropped_events", r.dropped_events},
              {"begin_ns", r.begin_ns}, {"end_ns", r.end_ns}, {"duration_ns", r.end_ns - r.begin_ns},
              {"peak_allocated", peak_json(r, r.peak_allocated, r.at_peak, r.peak_step, r.peak_phase)},
              {"peak_reserved", peak_json(r, r.peak_reserved, r.at_reserved_peak, "", "")},
              {"ooms", r.ooms}, {"steps", steps}, {"collectives", collectives}};
  if (!r.allocated_max.empty()) out["curve"] = curve_json(r);  // a summary the viewer draws the rank from
  return out;
}

RankRecording rank_from_summary_json(const json& j, const std::string& path) {
  try {
    if (!j.is_object() || j.value("memrec_summary", 0) != kSummaryVersion)
      throw Error(fmt::format("{}: not a memrec rank summary (version {})", path, kSummaryVersion));
    RankRecording r;
    r.path = path;
    if (!j.at("rank").is_null()) r.rank = j.at("rank"), r.rank_from = j.at("rank_from");
    r.host = j.at("host");
    r.pid = j.at("pid");
    r.world_size = j.at("world_size");
    r.device = j.at("device");
    r.events = j.at("events");
    r.complete = j.at("complete");
    r.warnings = j.at("warnings").get<std::vector<std::string>>();
    r.dropped_events = j.at("dropped_events");
    r.begin_ns = j.at("begin_ns");
    r.end_ns = j.at("end_ns");
    const json &pa = j.at("peak_allocated"), &pr = j.at("peak_reserved");
    r.peak_allocated = peak_from(pa, r.begin_ns);
    r.peak_reserved = peak_from(pr, r.begin_ns);
    r.peak_step = pa.at("training_step");
    r.peak_phase = pa.at("phase");
    r.at_peak = groups_from(pa.at("live"));
    r.at_reserved_peak = groups_from(pr.at("live"));
    r.ooms = j.at("ooms");
    for (const json& s : j.at("steps")) r.steps.push_back({s.at("name"), s.at("start_ns"), s.at("allocated"), s.at("reserved")});
    for (const json& c : j.at("collectives")) r.collectives.push_back({c.at("name"), c.at("seq"), c.at("start_ns"), c.at("end_ns")});
    if (auto curve = j.find("curve"); curve != j.end()) curve_from(*curve, r);  // older summaries lack one
    if (!r.steps.empty()) r.first_step_ns = r.steps.front().start_ns;
    return r;
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not a memrec rank summary: {}", path, e.what()));
  }
}

std::string write_summary(const Snapshot& s, const std::string& path) {
  RankRecording r = summarize_recording(s, path, {.device = std::nullopt, .curve = true});
  std::string text = rank_summary_json(r).dump();
  attach_summary(path, text);
  std::string beside = path + ".summary.json";
  std::ofstream out(beside, std::ios::binary | std::ios::trunc);
  out << text << '\n';
  if (!out.flush()) throw Error(fmt::format("{}: cannot write", beside));
  return beside;
}

}  // namespace memrec
