#include "memrec/ranks.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <sys/stat.h>

#include <fmt/format.h>

#include "memrec/devices.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/stats.h"

namespace memrec {
namespace {

std::optional<int64_t> first_step_start(const Snapshot& s, uint8_t device) {
  std::optional<int64_t> first;
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step && sc.device == device && (!first || sc.start_ns < *first)) first = sc.start_ns;
  return first;
}

std::string scope_name(const Snapshot& s, uint32_t id) { return id ? s.strings[s.scopes[id].name] : ""; }

// The recorded phase scope's name; in PyTorch's snapshots, which have none, the phase inferred from the frames.
std::string phase_name_at(const Snapshot& s, uint8_t device, int64_t t) {
  if (uint32_t scope = scope_at(s, ScopeKind::phase, device, t)) return scope_name(s, scope);
  PhaseIndex phases(s, device);
  uint32_t phase = phases.at(t);
  return phase ? std::string(to_string(phases.kind(phase))) : "";
}

// The highest totals in force during each bucket: the state carried in from before it and every state inside.
void fill_curve(const Replay& r, RankRecording& out) {
  constexpr size_t buckets = kSummaryCurve;
  out.bucket_ns = std::max<int64_t>(1, (out.end_ns - out.begin_ns) / static_cast<int64_t>(buckets) + 1);
  out.allocated_max.assign(buckets, 0);
  out.reserved_max.assign(buckets, 0);
  Totals carried = r.initial();
  size_t current = 0;
  auto include = [&](size_t b, const Totals& t) {
    out.allocated_max[b] = std::max(out.allocated_max[b], t.allocated);
    out.reserved_max[b] = std::max(out.reserved_max[b], t.reserved);
  };
  include(0, carried);
  r.for_each_after(0, r.steps(), [&](uint32_t step, const Totals& t) {
    // Threads' events are in stamp order, whose times may step back a little (the last even before the first):
    // clamped into the curve, whose buckets then hold every time.
    int64_t t_ns = std::clamp(r.time_of(step), out.begin_ns, std::max(out.begin_ns, out.end_ns));
    size_t b = static_cast<size_t>((t_ns - out.begin_ns) / out.bucket_ns);
    for (; current < b; include(++current, carried)) {}
    include(b, t);
    carried = t;
  });
}

// The kSummaryGroups largest groups, the others summed under kOtherGroups; key, bytes and count only, so that a
// summary read back compares equal to one just made.
std::vector<Group> largest_groups(std::vector<Group> groups) {
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.bytes > b.bytes; });
  std::vector<Group> out;
  Group rest = summary_group(std::string(kOtherGroups), 0, 0);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i < kSummaryGroups) out.push_back(summary_group(std::move(groups[i].key), groups[i].bytes, groups[i].count));
    else rest.bytes += groups[i].bytes, rest.count += groups[i].count;
  }
  if (rest.count) out.push_back(std::move(rest));
  return out;
}

std::array<std::vector<Group>, kRankGroupings.size()> groups_after(const Snapshot& s, const Replay& r, uint32_t step) {
  std::vector<uint32_t> live = r.live_after(step);
  std::array<std::vector<Group>, kRankGroupings.size()> out;
  for (size_t g = 0; g < kRankGroupings.size(); ++g) out[g] = largest_groups(group_allocations(s, r, live, kRankGroupings[g]));
  return out;
}

// Each step scope's start with the totals in force then (after the events before it), in one pass.
std::vector<StepStart> step_starts(const Snapshot& s, const Replay& r) {
  std::vector<StepStart> out;
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step && sc.device == r.device() && sc.name) out.push_back({s.strings[sc.name], sc.start_ns});
  std::stable_sort(out.begin(), out.end(), [](const StepStart& a, const StepStart& b) { return a.start_ns < b.start_ns; });
  size_t next = 0;
  auto settle = [&](int64_t before, const Totals& t) {
    for (; next < out.size() && out[next].start_ns <= before; ++next) out[next].allocated = t.allocated, out[next].reserved = t.reserved;
  };
  Totals carried = r.initial();
  r.for_each_after(0, r.steps(), [&](uint32_t step, const Totals& t) {
    settle(r.time_of(step), carried);  // steps that start at or before this event see the state before it
    carried = t;
  });
  settle(INT64_MAX, carried);
  return out;
}

// At most kSummarySteps of them, evenly spaced, and the one holding the allocated peak.
std::vector<StepStart> thinned(std::vector<StepStart> steps, int64_t peak_ns) {
  if (steps.size() <= kSummarySteps) return steps;
  size_t stride = (steps.size() + kSummarySteps - 1) / kSummarySteps;
  auto at_peak = std::partition_point(steps.begin(), steps.end(), [&](const StepStart& s) { return s.start_ns <= peak_ns; });
  size_t peak_step = at_peak == steps.begin() ? 0 : size_t(at_peak - steps.begin()) - 1;
  std::vector<StepStart> out;
  for (size_t i = 0; i < steps.size(); ++i)
    if (i % stride == 0 || i == peak_step) out.push_back(std::move(steps[i]));
  return out;
}

bool is_collective(std::string_view op) { return op.starts_with("c10d::"); }

// The process group's collectives in call order, numbered; kept: the first ones and those around each peak.
std::vector<Collective> collectives(const Snapshot& s, std::initializer_list<int64_t> peaks) {
  std::vector<Collective> all;
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::op && sc.name && is_collective(s.strings[sc.name]))
      all.push_back({s.strings[sc.name], 0, sc.start_ns, sc.end_ns});
  std::stable_sort(all.begin(), all.end(), [](const Collective& a, const Collective& b) { return a.start_ns < b.start_ns; });
  std::vector<bool> keep(all.size());
  for (size_t i = 0; i < all.size(); ++i) all[i].seq = i, keep[i] = i < kSummaryCollectives;
  for (int64_t t : peaks) {
    auto at = std::partition_point(all.begin(), all.end(), [&](const Collective& c) { return c.start_ns <= t; }) - all.begin();
    size_t half = kSummaryCollectives / 2;
    for (size_t i = at > ptrdiff_t(half) ? at - half : 0; i < std::min(all.size(), size_t(at) + half); ++i) keep[i] = true;
  }
  std::vector<Collective> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (keep[i]) out.push_back(std::move(all[i]));
  return out;
}

// One whole file reduced to what the comparison keeps; the snapshot is freed when this returns.
RankRecording read_whole(const std::string& path, const RankOptions& o) {
  RankRecording r = summarize_recording(load_snapshot(path), path, o);
  r.read_from = "whole file";
  return r;
}

// The summary chunk of a .memrec file, when it has one of the device asked for.
std::optional<RankRecording> read_file_summary(const std::string& path, const RankOptions& o) {
  if (!is_memrec_file(path)) return std::nullopt;
  std::optional<std::string> text = read_summary(path);
  if (!text) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) throw Error(fmt::format("{}: its summary chunk is not JSON", path));
  RankRecording r = rank_from_summary_json(j, path);
  if (o.device && *o.device != r.device) return std::nullopt;
  r.read_from = "file summary";
  return r;
}

// A summary first (the .summary.json given, or the file's own chunk), else the whole file. A device other than the
// summary's, or a memory curve the summary lacks, needs the whole file.
RankRecording read_rank(const std::string& path, const RankOptions& o) {
  if (is_summary_json(path)) {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!in || j.is_discarded()) throw Error(fmt::format("{}: not JSON: give a .summary.json that memrec wrote", path));
    RankRecording r = rank_from_summary_json(j, path);
    bool no_curve = o.curve && r.allocated_max.empty();
    if (no_curve || (o.device && *o.device != r.device))
      throw Error(fmt::format("{} is a summary of device {}: {}", path, r.device,
                              no_curve ? "it holds no memory curve: give the .memrec file" : "give the .memrec file for --device"));
    r.read_from = "summary JSON";
    return r;
  }
  std::optional<RankRecording> r = read_file_summary(path, o);
  return r && !(o.curve && r->allocated_max.empty()) ? std::move(*r) : read_whole(path, o);
}

std::vector<RankRecording> summarize_all(const std::vector<std::string>& paths, const RankOptions& o) {
  std::vector<RankRecording> out(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());
  std::atomic<size_t> next = 0;
  auto work = [&] {
    for (size_t i; (i = next++) < paths.size();) {
      try {
        out[i] = read_rank(paths[i], o);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::jthread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, paths.size()); ++t) pool.emplace_back(work);
  work();
  pool.clear();  // joins
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

// Ranks from neither metadata nor name take their position among the files; two files of one rank are an error.
void number_ranks(std::vector<RankRecording>& ranks) {
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].rank < 0) ranks[i].rank = static_cast<int>(i), ranks[i].rank_from = "order";
  std::sort(ranks.begin(), ranks.end(), [](const RankRecording& a, const RankRecording& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i].rank == ranks[i - 1].rank)
      throw Error(fmt::format("{} and {} are both rank {} ({}): give each rank's file once", ranks[i - 1].path,
                              ranks[i].path, ranks[i].rank,
                              ranks[i - 1].rank_from == ranks[i].rank_from
                                  ? "both by " + ranks[i].rank_from
                                  : "by " + ranks[i - 1].rank_from + " and by " + ranks[i].rank_from));
}

// Paths naming one file: checked before reading, and by file, since a file's rank may come from its name or order.
void check_distinct_files(const std::vector<std::string>& paths) {
  std::map<std::pair<dev_t, ino_t>, const std::string*> seen;
  for (const std::string& path : paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;  // reading it names the error
    auto [it, fresh] = seen.emplace(std::pair(st.st_dev, st.st_ino), &path);
    if (!fresh) throw Error(fmt::format("{} and {} are one file: give each rank's file once", *it->second, path));
  }
}

// One process is one rank: two recordings of it (a copy, or two windows) are not two ranks.
void check_one_process_each(const std::vector<RankRecording>& ranks) {
  std::map<std::pair<std::string, std::string>, const RankRecording*> by_process;
  for (const RankRecording& r : ranks) {
    if (r.pid.empty()) continue;
    auto [it, fresh] = by_process.emplace(std::pair(r.host, r.pid), &r);
    if (!fresh)
      throw Error(fmt::format("{} and {} were recorded by one process (pid {}): give one file per rank of one run",
                              it->second->path, r.path, r.pid));
  }
}

void check_world_size(const std::vector<RankRecording>& ranks) {
  const RankRecording* sized = nullptr;
  for (const RankRecording& r : ranks) {
    if (r.world_size.empty()) continue;
    if (sized && sized->world_size != r.world_size)
      throw Error(fmt::format("{} and {} are ranks of different runs (WORLD_SIZE {} and {}): give the ranks of one run",
                              sized->path, r.path, sized->world_size, r.world_size));
    sized = sized ? sized : &r;
  }
}

std::set<std::string> hosts_of(const std::vector<RankRecording>& ranks) {
  std::set<std::string> hosts;
  for (const RankRecording& r : ranks)
    if (!r.host.empty()) hosts.insert(r.host);
  return hosts;
}

// The ranks of a run record at the same time, so no recording begins after another ended; hosts' clocks may
// disagree, by far less than this.
constexpr int64_t kHostClockSlackNs = 600'000'000'000;

void check_at_once(const std::vector<RankRecording>& ranks) {
  const RankRecording *ended = nullptr, *began = nullptr;  // the first to end, the last to begin
  for (const RankRecording& r : ranks) {
    if (r.events == 0) continue;
    if (!ended || r.end_ns < ended->end_ns) ended = &r;
    if (!began || r.begin_ns > began->begin_ns) began = &r;
  }
  int64_t slack = hosts_of(ranks).size() > 1 ? kHostClockSlackNs : 0;
  if (ended && began->begin_ns - ended->end_ns > slack)
    throw Error(fmt::format("{} and {} are not ranks of one run: the second began after the first ended, and a "
                            "run's ranks record at the same time", ended->path, began->path));
}

// Points two ranks both recorded: each collective's end (all ranks leave it together), else each step's start.
using Points = std::map<std::pair<std::string, uint64_t>, int64_t>;

// Those inside the training loop when it recorded one: the set-up's (DDP's first broadcast) follow each process's
// start, which ranks reach seconds apart.
Points collective_points(const RankRecording& r) {
  Points out;
  for (const Collective& c : r.collectives)
    if (!r.first_step_ns || c.start_ns >= *r.first_step_ns) out[{c.name, c.seq}] = c.end_ns >= 0 ? c.end_ns : c.start_ns;
  return out;
}

Points step_points(const RankRecording& r) {
  Points out;
  for (const StepStart& st : r.steps) out.try_emplace({st.name, 0}, st.start_ns);
  return out;
}

// The offset that puts `r`'s shared points on the reference's (the median difference) and the largest residual;
// nullopt when they share none.
std::optional<std::pair<int64_t, int64_t>> fit(const Points& ref, const Points& r) {
  std::vector<int64_t> d;
  for (const auto& [key, t] : r)
    if (auto it = ref.find(key); it != ref.end()) d.push_back(it->second - t);
  if (d.empty()) return std::nullopt;
  std::vector<int64_t> sorted = d;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  int64_t offset = sorted[sorted.size() / 2], worst = 0;
  for (int64_t x : d) worst = std::max(worst, std::abs(x - offset));
  return std::pair{offset, worst};
}

// One host (or none recorded): the ranks share CLOCK_REALTIME. Several: each rank is put on the clock of the
// lowest rank that recorded collectives (else steps), by the points it shares with it.
void align_clocks(RankSet& set) {
  std::set<std::string> hosts = hosts_of(set.ranks);
  set.hosts.assign(hosts.begin(), hosts.end());
  set.aligned_on = "shared clock";
  if (hosts.size() > 1) {
    set.aligned_on_steps = true;
    bool on_collectives = std::any_of(set.ranks.begin(), set.ranks.end(), [](const RankRecording& r) { return !r.collectives.empty(); });
    auto points = on_collectives ? collective_points : step_points;
    set.aligned_on = on_collectives ? "collectives" : "steps";
    auto ref = std::find_if(set.ranks.begin(), set.ranks.end(), [&](const RankRecording& r) {
      return on_collectives ? !r.collectives.empty() : !r.steps.empty();
    });
    if (ref != set.ranks.end()) set.step_reference = ref->rank;
    Points reference = ref != set.ranks.end() ? points(*ref) : Points{};
    set.uncertainty_ns = ref != set.ranks.end() ? 0 : -1;
    for (RankRecording& r : set.ranks) {
      std::optional<std::pair<int64_t, int64_t>> f = fit(reference, points(r));
      if (!f) {
        set.unaligned.push_back(r.rank);
        continue;
      }
      r.offset_ns = f->first;
      set.uncertainty_ns = std::max(set.uncertainty_ns, f->second);
    }
  }
  int64_t begin = INT64_MAX, end = INT64_MIN;
  for (const RankRecording& r : set.ranks) {
    begin = std::min(begin, r.begin_ns + r.offset_ns);
    end = std::max(end, r.end_ns + r.offset_ns);
  }
  set.origin_ns = set.ranks.empty() ? 0 : begin;
  set.duration_ns = set.ranks.empty() ? 0 : end - begin;
}

std::optional<PeakAgainstCollective> against_collective(const RankSet& set, size_t i);

void find_divergence(RankSet& set, size_t k) {
  if (set.ranks.size() < 2) return;
  std::vector<size_t> order(set.ranks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto peak = [&](size_t i) { return set.ranks[i].peak_allocated.bytes; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return peak(a) < peak(b); });
  size_t median = order[(order.size() - 1) / 2];
  auto distance = [&](size_t i) { return peak(i) > peak(median) ? peak(i) - peak(median) : peak(median) - peak(i); };
  size_t furthest = order.back();  // the highest peak wins ties
  for (size_t i : order)
    if (i != median && distance(i) > distance(furthest)) furthest = i;
  set.median = median;
  set.furthest = furthest;
  const RankRecording &m = set.ranks[median], &f = set.ranks[furthest];
  set.delta_peak_allocated = int64_t(f.peak_allocated.bytes) - int64_t(m.peak_allocated.bytes);
  set.delta_peak_reserved = int64_t(f.peak_reserved.bytes) - int64_t(m.peak_reserved.bytes);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return distance(a) > distance(b); });
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return i == furthest; });  // first among ties
  for (size_t i : order) {
    if (i == median || set.outliers.size() == k) continue;
    set.outliers.push_back({i, int64_t(peak(i)) - int64_t(peak(median)), against_collective(set, i)});
  }
}

// The collective nearest the rank's allocated peak, and how the other ranks' peaks fall against it.
std::optional<PeakAgainstCollective> against_collective(const RankSet& set, size_t i) {
  const RankRecording& r = set.ranks[i];
  int64_t peak = r.peak_allocated.time_ns;
  const Collective* nearest = nullptr;
  for (const Collective& c : r.collectives)
    if (!nearest || std::abs(c.start_ns - peak) < std::abs(nearest->start_ns - peak)) nearest = &c;
  if (!nearest) return std::nullopt;
  PeakAgainstCollective out{*nearest, nearest->start_ns - peak};
  for (size_t j = 0; j < set.ranks.size(); ++j) {
    if (j == i) continue;
    const RankRecording& o = set.ranks[j];
    auto it = std::find_if(o.collectives.begin(), o.collectives.end(),
                           [&](const Collective& c) { return c.seq == nearest->seq && c.name == nearest->name; });
    if (it == o.collectives.end()) continue;
    ++out.others_with_it;
    out.others_after += o.peak_allocated.time_ns >= it->start_ns;
  }
  return out;
}

void fill_histogram(RankSet& set, size_t bins) {
  if (set.ranks.empty() || bins == 0) return;
  auto [lo, hi] = std::minmax_element(set.ranks.begin(), set.ranks.end(), [](const RankRecording& a, const RankRecording& b) {
    return a.peak_allocated.bytes < b.peak_allocated.bytes;
  });
  PeakHistogram& h = set.histogram;
  h.lo = lo->peak_allocated.bytes;
  h.width = std::max<uint64_t>(1, (hi->peak_allocated.bytes - h.lo) / bins + 1);
  h.counts.assign(bins, 0);
  for (const RankRecording& r : set.ranks) ++h.counts[std::min<size_t>(bins - 1, (r.peak_allocated.bytes - h.lo) / h.width)];
}

// Each grouping's keys across the ranks (a rank without a key holds 0 bytes of it), by spread: max - min.
void find_spreads(RankSet& set) {
  for (size_t g = 0; g < kRankGroupings.size(); ++g) {
    std::map<std::string, std::vector<std::pair<uint64_t, int>>> by_key;
    for (const RankRecording& r : set.ranks)
      for (const Group& group : r.at_peak[g]) by_key[group.key].push_back({group.bytes, r.rank});
    for (auto& [key, held] : by_key) {
      for (size_t missing = set.ranks.size() - held.size(); missing; --missing) held.push_back({0, -1});
      std::sort(held.begin(), held.end());
      if (held.front().first == held.back().first) continue;
      int min_rank = held.front().second;
      if (min_rank < 0) {  // some rank without the key: the lowest one
        std::set<int> holding;
        for (const auto& [bytes, rank] : held) holding.insert(rank);
        auto lacking = std::find_if(set.ranks.begin(), set.ranks.end(), [&](const RankRecording& r) { return !holding.count(r.rank); });
        min_rank = lacking->rank;
      }
      set.spreads.push_back({kRankGroupings[g], key, held.front().first, held[(held.size() - 1) / 2].first,
                             held.back().first, min_rank, held.back().second});
    }
  }
  std::stable_sort(set.spreads.begin(), set.spreads.end(), [](const GroupSpread& a, const GroupSpread& b) {
    return a.max_bytes - a.min_bytes > b.max_bytes - b.min_bytes;
  });
}

}  // namespace

RankRecording summarize_recording(const Snapshot& s, const std::string& path, const RankOptions& o) {
  RankRecording out;
  out.path = path;
  out.warnings = s.warnings;
  out.complete = s.complete;
  out.dropped_events = s.dropped_events;
  auto metadata = [&](const char* key) { return s.metadata.contains(key) ? s.metadata.at(key) : std::string(); };
  out.host = metadata("host");
  out.pid = metadata("pid");
  out.world_size = metadata("world_size");
  if (auto rank = recording_rank(s, path)) out.rank = rank->first, out.rank_from = rank->second;
  out.device = choose_device(s, o.device);
  Replay r(s, out.device);
  out.events = r.steps();
  out.begin_ns = r.time_of(kNoEvent);
  out.end_ns = r.steps() ? r.time_of(r.steps() - 1) : out.begin_ns;
  out.first_step_ns = first_step_start(s, out.device);
  out.peak_allocated = r.peak_allocated();
  out.peak_reserved = r.peak_reserved();
  out.peak_step = scope_name(s, scope_at(s, ScopeKind::step, out.device, out.peak_allocated.time_ns));
  out.peak_phase = phase_name_at(s, out.device, out.peak_allocated.time_ns);
  out.ooms = explain_ooms(s, r).size();
  out.at_peak = groups_after(s, r, out.peak_allocated.step);
  out.at_reserved_peak = groups_after(s, r, out.peak_reserved.step);
  out.steps = thinned(step_starts(s, r), out.peak_allocated.time_ns);
  out.collectives = collectives(s, {out.peak_allocated.time_ns, out.peak_reserved.time_ns});
  if (o.curve) fill_curve(r, out);
  return out;
}

std::optional<std::pair<uint64_t, uint64_t>> RankRecording::highest_in(int64_t t0, int64_t t1) const {
  if (allocated_max.empty() || t1 <= begin_ns || t0 > end_ns) return std::nullopt;
  auto bucket = [&](int64_t t) {
    return static_cast<size_t>(std::clamp<int64_t>((t - begin_ns) / bucket_ns, 0, int64_t(allocated_max.size()) - 1));
  };
  std::pair<uint64_t, uint64_t> out{0, 0};
  for (size_t b = bucket(t0), last = bucket(t1 - 1); b <= last; ++b) {
    out.first = std::max(out.first, allocated_max[b]);
    out.second = std::max(out.second, reserved_max[b]);
  }
  return out;
}

std::optional<std::pair<int, std::string>> recording_rank(const Snapshot& s, const std::string& path) {
  auto it = s.metadata.find("rank");
  if (it != s.metadata.end()) {
    const std::string& rank = it->second;
    if (!rank.empty() && rank.size() < 10 && std::all_of(rank.begin(), rank.end(), [](unsigned char c) { return std::isdigit(c); }))
      return std::pair{std::stoi(rank), std::string("metadata")};
  }
  if (auto named = rank_from_file_name(path)) return std::pair{*named, std::string("file name")};
  return std::nullopt;
}

std::optional<int> rank_from_file_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (size_t at = name.rfind("rank"); at != std::string::npos; at = at ? name.rfind("rank", at - 1) : std::string::npos) {
    size_t digits = at + 4;
    if (digits < name.size() && (name[digits] == '_' || name[digits] == '-')) ++digits;
    size_t end = digits;
    while (end < name.size() && end - digits < 9 && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    bool whole = end > digits && (end == name.size() || !std::isdigit(static_cast<unsigned char>(name[end])));
    if (whole) return std::stoi(name.substr(digits, end - digits));
  }
  return std::nullopt;
}

std::optional<DiffResult> diff_ranks(const std::string& a, const std::string& b, GroupBy by, size_t top,
                                     std::optional<uint8_t> device) {
  auto g = std::find(kRankGroupings.begin(), kRankGroupings.end(), by);
  if (g == kRankGroupings.end()) return std::nullopt;
  std::optional<RankRecording> ra = read_file_summary(a, {.device = device}), rb = read_file_summary(b, {.device = device});
  if (!ra || !rb || ra->rank < 0 || rb->rank < 0 || ra->rank == rb->rank) return std::nullopt;
  size_t i = static_cast<size_t>(g - kRankGroupings.begin());
  DiffResult d;
  d.by = by;
  d.warnings = ra->warnings;
  d.warnings.insert(d.warnings.end(), rb->warnings.begin(), rb->warnings.end());
  auto side = [](const RankRecording& r) {
    return DiffSide{r.device, r.peak_allocated.bytes, r.peak_reserved.bytes, static_cast<uint32_t>(r.events)};
  };
  d.a = side(*ra), d.b = side(*rb);
  d.delta_peak_allocated = int64_t(d.b.peak_allocated) - int64_t(d.a.peak_allocated);
  d.delta_peak_reserved = int64_t(d.b.peak_reserved) - int64_t(d.a.peak_reserved);
  d.changes = group_changes(ra->at_peak[i], rb->at_peak[i], top);
  d.ranks = std::pair{ra->rank, rb->rank};
  return d;
}

RankSet load_ranks(const std::vector<std::string>& paths, const RankOptions& options) {
  RankSet set;
  check_distinct_files(paths);
  set.ranks = summarize_all(paths, options);
  number_ranks(set.ranks);
  check_one_process_each(set.ranks);
  check_world_size(set.ranks);
  check_at_once(set.ranks);
  align_clocks(set);
  find_divergence(set, options.outliers);
  fill_histogram(set, options.histogram_bins);
  find_spreads(set);
  set.read_whole = std::count_if(set.ranks.begin(), set.ranks.end(), [](const RankRecording& r) { return r.read_from == "whole file"; });
  return set;
}

}  // namespace memrec
