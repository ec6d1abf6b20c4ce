#include "queries.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "memrec/advise_output.h"
#include "memrec/allocator_output.h"
#include "memrec/checkpoint_output.h"
#include "memrec/devices.h"
#include "memrec/growth_output.h"
#include "memrec/info.h"
#include "memrec/load.h"
#include "memrec/ranks_output.h"
#include "memrec/scale_output.h"
#include "memrec/stats_output.h"
#include "memrec/whatif.h"

namespace memrec::cli {
namespace {

GroupBy group_by(const std::string& by) {
  if (std::optional<GroupBy> g = group_by_from_string(by)) return *g;
  throw Error(fmt::format("unknown grouping '{}'", by));
}

// "a,b,c" -> {"a", "b", "c"}; an empty item (",,", a trailing comma) is the error `error`.
std::vector<std::string> split_list(const std::string& text, const std::string& error) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw Error(error);
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> split_layers(const std::string& text) {
  if (text == "all") return {};
  return split_list(text, "--layers: expected 'all' or a list like 0,3,5, got '" + text + "'");
}

// "2,4,8" for --sizes and --predict: whole numbers from 1.
std::vector<uint64_t> parse_sizes(const std::string& text, const std::string& flag) {
  std::string error = flag + ": expected sizes like 2,4,8 (whole numbers from 1), got '" + text + "'";
  std::vector<uint64_t> out;
  for (const std::string& item : split_list(text, error)) {
    if (item.size() > 18 || item.find_first_not_of("0123456789") != std::string::npos) throw Error(error);
    out.push_back(std::stoull(item));
    if (out.back() == 0) throw Error(error);
  }
  return out;
}

// "80GiB", "81559N" bytes, "40GB": a byte count with an optional unit (KiB/MiB/GiB/TiB, KB/MB/GB/TB, B).
uint64_t parse_memory(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  for (const auto& [name, scale] : kUnits)
    if (used > 0 && unit == name && value > 0 && value * scale < 0x1p63) return static_cast<uint64_t>(value * scale);
  throw Error("--device-memory: expected a size like 80GiB or 85899345920, got '" + text + "'");
}

}  // namespace

Answer stats_answer(const StatsQuery& q) {
  if (q.full_stack && q.by != "stack") throw Error(fmt::format("--full-stack goes with --by stack, not --by {}", q.by));
  std::optional<Range> part = q.part.parsed();
  if (q.by == "rank") {
    if (part) throw Error(fmt::format("{} reads a part of one file; --by rank compares the ranks' whole runs", part->flag));
    if (q.at != "peak" || q.kernels) throw Error("--by rank compares the ranks at their peaks: --at and --kernels take one file");
    return ranks_answer({.files = q.files, .top = q.top, .device = q.device});
  }
  if (q.files.size() != 1) throw Error(fmt::format("stats reads one file ({} given); several only with --by rank", q.files.size()));
  StatsOptions o{.at_ns = parse_at(q.at), .by = group_by(q.by), .top = q.top, .device = q.device,
                 .kernels = q.kernels, .full_stack = q.full_stack};
  StatsResult r = stats(load_snapshot(q.files.front(), stderr, part), o);
  return {stats_json(r), stats_text(r)};
}

Answer diff_answer(const DiffQuery& q) {
  std::optional<Range> part = q.part.parsed();
  if (!part)  // two ranks' files: their summaries, when both have one
    if (std::optional<DiffResult> d = diff_ranks(q.a, q.b, group_by(q.by), q.top, q.device)) return {diff_json(*d), diff_text(*d)};
  Snapshot a = load_snapshot(q.a, stderr, part), b = load_snapshot(q.b, stderr, part);
  DiffResult d = diff(a, b, {.at_ns = std::nullopt, .by = group_by(q.by), .top = q.top, .device = q.device});
  d.ranks = different_ranks(a, q.a, b, q.b);
  return {diff_json(d), diff_text(d)};
}

Answer ranks_answer(const RanksQuery& q) {
  RankSet set = load_ranks(q.files, {.device = q.device});
  for (const RankRecording& r : set.ranks)
    for (const std::string& w : r.warnings) fmt::print(stderr, "memrec: note: {}\n", w);
  return {ranks_json(set, q.top), ranks_text(set, q.top)};
}

Answer checkpoint_answer(const CheckpointQuery& q) {
  Snapshot s = load_snapshot(q.file, stderr);
  CheckpointPrediction p = predict_checkpoint(s, choose_device(s, q.device), split_layers(q.layers));
  return {checkpoint_json(p, s.warnings), checkpoint_text(p)};
}

Answer allocator_answer(const AllocatorQuery& q) {
  Snapshot s = load_snapshot(q.file, stderr);
  AllocatorWhatifOptions w{.conf = q.conf, .device_memory = std::nullopt, .sweep = q.sweep};
  if (!q.device_memory.empty()) w.device_memory = parse_memory(q.device_memory);
  AllocatorWhatif result = allocator_whatif(s, choose_device(s, q.device), w);
  return {allocator_whatif_json(result), allocator_whatif_text(result)};
}

ScaleWhatif scale_prediction(const ScaleQuery& q, std::optional<size_t> drawn_over) {
  std::vector<uint64_t> sizes = parse_sizes(q.sizes, "--sizes");
  if (sizes.size() != q.files.size())
    throw Error(fmt::format("--sizes gives {} size{} for {} runs: give one size per run, in the runs' order",
                            sizes.size(), sizes.size() == 1 ? "" : "s", q.files.size()));
  if (q.predict.empty() && !q.fit) throw Error("give the sizes to predict with --predict 8,16, or --fit for the largest size that fits");
  ScaleWhatifOptions w{
      .predict = {}, .fit = q.fit, .conf = q.conf, .device_memory = std::nullopt, .curve_run = std::nullopt};
  if (!q.predict.empty()) w.predict = parse_sizes(q.predict, "--predict");
  if (!q.device_memory.empty()) w.device_memory = parse_memory(q.device_memory);
  std::vector<size_t> order(q.files.size());
  std::iota(order.begin(), order.end(), 0);
  if (drawn_over) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] < sizes[b]; });
    w.curve_run = static_cast<size_t>(std::find(order.begin(), order.end(), *drawn_over) - order.begin());
  }
  std::vector<Snapshot> snapshots;
  for (size_t i : order) snapshots.push_back(load_snapshot(q.files[i], stderr));
  std::vector<ScaleRun> runs;
  for (size_t j = 0; j < order.size(); ++j)
    runs.push_back({q.files[order[j]], &snapshots[j], choose_device(snapshots[j], q.device), sizes[order[j]]});
  return scale_whatif(runs, w);
}

Answer scale_answer(const ScaleQuery& q) {
  ScaleWhatif result = scale_prediction(q);
  return {scale_whatif_json(result), scale_whatif_text(result)};
}

std::vector<std::string> GhostFlags::args() const {
  std::vector<std::string> out;
  for (const std::string& run : with) out.insert(out.end(), {"--scale-with", run});
  out.insert(out.end(), {"--sizes", sizes, "--predict", predict});
  if (!device_memory.empty()) out.insert(out.end(), {"--device-memory", device_memory});
  if (conf) out.insert(out.end(), {"--alloc-conf", *conf});
  return out;
}

ScaleWhatif ghost_prediction(const GhostFlags& g, const std::string& file, std::optional<uint8_t> device) {
  if (g.sizes.empty() || g.predict.empty())
    throw Error("--scale-with needs --sizes (this run's size, then each --scale-with run's) and --predict with the "
                "size to draw");
  if (parse_sizes(g.predict, "--predict").size() != 1)
    throw Error(fmt::format("--predict takes the one size drawn over the timeline here, got '{}' (memrec whatif "
                            "scale predicts several)", g.predict));
  ScaleQuery q{.files = {file}, .sizes = g.sizes, .predict = g.predict, .device_memory = g.device_memory,
               .conf = g.conf, .device = device, .fit = false};
  q.files.insert(q.files.end(), g.with.begin(), g.with.end());
  return scale_prediction(q, 0);
}

Answer advise_answer(const AdviseQuery& q) {
  if (q.scale_with.empty() != q.sizes.empty())
    throw Error("--scale-with and --sizes go together: --scale-with OTHER --sizes A,B gives this run's size, then "
                "each other run's");
  std::vector<std::string> files{q.file};
  files.insert(files.end(), q.scale_with.begin(), q.scale_with.end());
  std::vector<uint64_t> sizes;
  if (!q.sizes.empty()) sizes = parse_sizes(q.sizes, "--sizes");
  if (!q.scale_with.empty() && sizes.size() != files.size())
    throw Error(fmt::format("--sizes gives {} size{} for {} runs: give this run's size, then each --scale-with run's",
                            sizes.size(), sizes.size() == 1 ? "" : "s", files.size()));
  std::vector<Snapshot> snapshots;
  for (const std::string& f : files) snapshots.push_back(load_snapshot(f, stderr));
  uint8_t device = choose_device(snapshots.front(), q.device);
  std::vector<ScaleRun> runs;
  for (size_t i = 0; i < sizes.size(); ++i)
    runs.push_back({files[i], &snapshots[i], choose_device(snapshots[i], q.device), sizes[i]});
  AdviseOptions o{.device_memory = std::nullopt, .scale_runs = runs};
  if (!q.device_memory.empty()) o.device_memory = parse_memory(q.device_memory);
  Advise a = advise(snapshots.front(), device, o);
  return {advise_json(a), advise_text(a)};
}

Answer growth_answer(const GrowthQuery& q) {
  GrowthOptions o{.device = q.device, .device_memory = std::nullopt, .first_step = std::nullopt, .last_step = std::nullopt};
  if (!q.device_memory.empty()) o.device_memory = parse_memory(q.device_memory);
  if (std::optional<Range> part = parse_range("", q.steps)) o.first_step = part->first, o.last_step = part->last;
  GrowthResult g = growth(load_snapshot(q.file, stderr), o);
  return {growth_json(g), growth_text(g)};
}

Answer info_answer(const std::string& file) {
  FileInfo info = file_info(load_snapshot(file, stderr));
  return {info_json(info), info_text(info)};
}

void print_answer(const Answer& a, bool json) { fmt::print("{}", json ? a.json.dump(2) + "\n" : a.text); }

}  // namespace memrec::cli
