// `memrec whatif scale`: predictions at other sizes, replayed from the base run's history rewritten with the fitted
// sizes, and the largest size that fits (memrec/scale.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/analysis.h"
#include "memrec/device_memory.h"
#include "memrec/scale.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

constexpr size_t kGrowthRows = 5;

bool is_block_event(Action a) { return a == Action::alloc || a == Action::free_requested || a == Action::free_completed; }

// The base run's allocations and frees as plain events, to be given other sizes and replayed. Blocks live before the
// recording began become allocations at its start, so that the replay needs no start state; segment events and OOMs
// are left out: the allocator model makes its own. Allocation ids of the rewritten history are the base run's.
class ScaledHistory {
 public:
  ScaledHistory(const ScaleRun& base, const Replay& r) {
    const Snapshot& s = *base.snapshot;
    snapshot_ = s.with_tables();
    snapshot_.scopes = s.scopes;
    std::vector<uint32_t> id_at_step(r.steps(), kNoEvent);
    for (uint32_t id = 0; id < r.alloc_steps().size(); ++id)
      for (uint32_t step : {r.alloc_steps()[id], r.free_steps()[id], r.completed_steps()[id]})
        if (step < r.steps()) id_at_step[step] = id;
    for (uint32_t id = 0; id < r.alloc_steps().size() && r.alloc_steps()[id] == kNoEvent; ++id) {
      Allocation a = r.allocation(id);
      Event e{.time_ns = r.time_of(0), .addr = a.addr, .size = a.size, .stack = a.stack, .stream = a.stream,
              .action = Action::alloc, .device = base.device};
      add(e, id);
      if (a.free_step == kBeforeStart) add(with_action(e, Action::free_requested), id);
    }
    r.for_each_step(0, r.steps(), [&](uint32_t step, const Event& e) {
      if (is_block_event(e.action)) add(e, id_at_step[step]);
    });
  }

  // The history with bytes[id] for each allocation id.
  const Snapshot& with(const std::vector<uint64_t>& bytes) {
    for (size_t i = 0; i < events_.size(); ++i)
      if (ids_[i] != kNoEvent) events_[i].size = bytes[ids_[i]];
    snapshot_.events.assign(events_);
    return snapshot_;
  }

  // Each event's time on the clock of `run` (since its first event): when the allocation's counterpart there had the
  // same event, else the time of the event before; never going back.
  std::vector<int64_t> times_on(const ScaleFit& fit, size_t run) const {
    const Replay& r = fit.replay(run);
    std::vector<int64_t> out(events_.size());
    int64_t t = 0;
    for (size_t i = 0; i < events_.size(); ++i) {
      uint32_t id = ids_[i] == kNoEvent ? kNoEvent : fit.counterpart(run, ids_[i]);
      if (uint32_t step = id == kNoEvent ? kNoEvent : step_of(r, id, events_[i].action); step < r.steps())
        t = std::max(t, r.time_of(step) - r.time_of(0));
      out[i] = t;
    }
    return out;
  }

 private:
  static uint32_t step_of(const Replay& r, uint32_t id, Action a) {
    if (a == Action::alloc) return r.alloc_steps()[id];
    return a == Action::free_requested ? r.free_steps()[id] : r.completed_steps()[id];
  }
  static Event with_action(Event e, Action a) {
    e.action = a;
    return e;
  }
  void add(Event e, uint32_t id) {
    e.rounding = 0;  // the allocator's rounding of the recorded size says nothing of another
    events_.push_back(e);
    ids_.push_back(id);
  }

  Snapshot snapshot_;
  std::vector<Event> events_;
  std::vector<uint32_t> ids_;  // per event: the allocation it allocates or frees; kNoEvent for a free of no block
};

// Predictions at given sizes: the fitted bytes, the rewritten history replayed, the allocator model over it.
class Predictor {
 public:
  Predictor(const ScaleFit& fit, const ScaleRun& base, std::optional<AllocConf> conf, const ScaleMemory& memory,
            std::optional<size_t> curve_run)
      : fit_(fit), base_(base), history_(base, fit.base_replay()), phases_(*base.snapshot, base.device),
        conf_(std::move(conf)), memory_(memory) {
    if (curve_run) times_ = history_.times_on(fit, *curve_run);
    if (memory.bytes) limits_.limit = *memory.bytes;
    limits_.total = memory.given ? *memory.bytes : memory.total ? memory.total : limits_.limit;
    limits_.given = memory.given;
    limits_.recorded_total = !memory.given && memory.total;
  }

  bool caching() const { return conf_.has_value(); }

  // The allocated peak alone: a replay, without the allocator model.
  uint64_t peak_allocated(uint64_t size) {
    return Replay(history_.with(fit_.bytes_at(size)), base_.device).peak_allocated().bytes;
  }

  ScalePrediction at(uint64_t size, std::vector<uint32_t>* below) {
    std::vector<uint64_t> bytes = fit_.bytes_at(size, below);
    const Snapshot& s = history_.with(bytes);
    Replay r(s, base_.device);
    ScalePrediction p;
    p.size = size;
    p.peak_allocated = r.peak_allocated().bytes;
    uint64_t peak = p.peak_allocated;
    AllocatorPrediction a;
    if (conf_) {
      a = predict_allocator(s, r, *conf_, limits_, {.keep_reserved = times_.has_value()});
      p.peak_reserved = peak = a.reserved_peak;
      p.ooms = a.ooms;
    }
    if (memory_.bytes) p.oom = conf_ ? p.ooms > 0 : peak > *memory_.bytes;
    place(p, r);
    p.growth = growth(r, bytes);
    if (times_) p.curve = curve(r, std::move(a));
    return p;
  }

 private:
  // The replay's totals and the model's reserved bytes after each step, at the times of the run drawn under them.
  ScaleCurve curve(const Replay& r, AllocatorPrediction a) const {
    ScaleCurve c;
    c.time_ns = *times_;
    c.reserved = std::move(a.reserved_after);
    c.allocated.reserve(r.steps());
    r.for_each_after(0, r.steps(), [&](uint32_t, const Totals& t) { c.allocated.push_back(t.allocated); });
    if (r.peak_allocated().step < r.steps()) c.peak = r.peak_allocated().step;
    if (conf_ && a.first_oom_step < r.steps()) c.oom = a.first_oom_step;
    if (!conf_ && memory_.bytes) {
      auto over = std::find_if(c.allocated.begin(), c.allocated.end(), [&](uint64_t b) { return b > *memory_.bytes; });
      if (over != c.allocated.end()) c.oom = static_cast<size_t>(over - c.allocated.begin());
    }
    return c;
  }

  // The step and phase holding the allocated peak, on the base run's clock.
  void place(ScalePrediction& p, const Replay& r) {
    const Peak& peak = r.peak_allocated();
    if (peak.step == kNoEvent) return;
    const Snapshot& s = *base_.snapshot;
    p.peak_ns = peak.time_ns - r.time_of(0);
    if (uint32_t step = scope_at(s, ScopeKind::step, base_.device, peak.time_ns)) p.step = s.strings[s.scopes[step].name];
    if (uint32_t phase = phases_.at(peak.time_ns)) p.phase = to_string(phases_.kind(phase));
  }

  static uint64_t change(const ScaleGrowth& g) { return g.bytes > g.recorded ? g.bytes - g.recorded : g.recorded - g.bytes; }

  // The live blocks at the allocated peak by owner, else site: what they weigh and what they weighed in the base run,
  // most changed first (below the base run's size, what shrinks most).
  std::vector<ScaleGrowth> growth(const Replay& r, const std::vector<uint64_t>& bytes) {
    if (r.peak_allocated().step == kNoEvent) return {};
    std::map<std::string, ScaleGrowth> by_key;
    for (uint32_t id : r.live_after(r.peak_allocated().step)) {
      ScaleGrowth& g = by_key[label(id)];
      g.bytes += bytes[id];
      g.recorded += fit_.base_replay().size_of(id);
    }
    std::vector<ScaleGrowth> out;
    for (auto& [key, g] : by_key) {
      g.key = key;
      out.push_back(g);
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return change(a) > change(b); });
    if (out.size() > kGrowthRows) out.resize(kGrowthRows);
    return out;
  }

  std::string label(uint32_t id) {
    const Replay& r = fit_.base_replay();
    if (std::string owner = owner_label(*base_.snapshot, r, id); !owner.empty()) return owner;
    auto [it, fresh] = sites_.try_emplace(r.stack_of(id));
    if (fresh) it->second = allocation_site(*base_.snapshot, r.stack_of(id));
    return it->second;
  }

  const ScaleFit& fit_;
  const ScaleRun& base_;
  ScaledHistory history_;
  PhaseIndex phases_;
  std::optional<AllocConf> conf_;  // unset on a CPU: no caching allocator to model
  ScaleMemory memory_;
  DeviceLimits limits_;
  std::optional<std::vector<int64_t>> times_;  // per step of the rewritten history, when curves are asked for
  std::unordered_map<uint32_t, std::string> sites_;  // by stack
};

void check_sizes(std::span<const ScaleRun> runs) {
  if (runs.size() < 2 || runs.size() > kMaxScaleRuns)
    throw Error(fmt::format("memrec whatif scale takes two or three runs of one program at different sizes, got {}",
                            runs.size()));
  bool up = true, down = true;
  for (size_t j = 1; j < runs.size(); ++j) {
    up &= runs[j].size > runs[j - 1].size;
    down &= runs[j].size < runs[j - 1].size;
  }
  if (up || down) return;
  std::vector<uint64_t> sizes;
  for (const ScaleRun& run : runs) sizes.push_back(run.size);
  throw Error(fmt::format("--sizes must be all different and in order, rising or falling, got {}: give the runs in the "
                          "order of their sizes", fmt::join(sizes, ",")));
}

// The device's memory: --device-memory, else the recording's total less the most NVML saw outside the allocator.
ScaleMemory scale_memory(const ScaleRun& base, const Replay& r, std::optional<uint64_t> given) {
  const Snapshot& s = *base.snapshot;
  ScaleMemory m;
  if (auto it = s.metadata.find(fmt::format("device.{}.total_memory", base.device)); it != s.metadata.end()) {
    try {
      m.total = std::stoull(it->second);
    } catch (const std::exception&) {
    }
  }
  if (given) {
    m.bytes = *given;
    m.given = true;
    return m;
  }
  if (m.total == 0) return m;
  DeviceMemory dm = device_memory(s, r);
  for (const DeviceMemoryPoint& p : dm.points) m.outside = std::max(m.outside.value_or(0), p.used - std::min(p.used, p.reserved));
  m.bytes = m.total - std::min(m.total, m.outside.value_or(0));
  return m;
}

void add_notes(ScaleWhatif& w, bool cpu) {
  if (cpu) w.notes.push_back(ScaleNote::cpu);
  if (!w.memory.bytes) w.notes.push_back(ScaleNote::memory_unknown);
  else if (!w.memory.given && !w.memory.outside) w.notes.push_back(ScaleNote::outside_unmeasured);
  if (!cpu && w.source == SettingsSource::assumed) w.notes.push_back(ScaleNote::assumed_defaults);
}

// Predictions by size, each computed once.
class Predictions {
 public:
  explicit Predictions(Predictor& p) : p_(p) {}
  const ScalePrediction& at(uint64_t size) {
    auto it = seen_.find(size);
    if (it == seen_.end()) it = seen_.emplace(size, p_.at(size, &below_[size])).first;
    return it->second;
  }
  uint64_t peak_allocated(uint64_t size) {
    if (auto done = seen_.find(size); done != seen_.end()) return done->second.peak_allocated;
    auto it = allocated_.find(size);
    if (it == allocated_.end()) it = allocated_.emplace(size, p_.peak_allocated(size)).first;
    return it->second;
  }
  bool caching() const { return p_.caching(); }
  // The allocations whose fit falls below zero at `size`, once predicted there.
  const std::vector<uint32_t>& below(uint64_t size) const { return below_.at(size); }

 private:
  Predictor& p_;
  std::map<uint64_t, ScalePrediction> seen_;
  std::map<uint64_t, std::vector<uint32_t>> below_;
  std::map<uint64_t, uint64_t> allocated_;  // peak allocated by size
};

// The largest size whose value is at most `limit`, for a value that grows with the size (a peak: close to linear or
// quadratic in it). `fails_at`: a size known to be over the limit; without one, none beyond kLargestFitted is looked
// for (unset). Each guess is where the line through the last two sizes tried meets the limit, inside the bracket
// found so far; without such a line it doubles up, or steps down from the bracket's top by doubling strides; when
// two guesses have not halved the bracket, the next is its middle. Each try is a replay, so the guesses count.
class LimitSearch {
 public:
  LimitSearch(uint64_t limit, std::optional<uint64_t> fails_at) : limit_(limit), fails_(fails_at) {}

  template <class V> std::optional<uint64_t> largest(V value, uint64_t start) {
    for (uint64_t size = start;; size = guess()) {
      uint64_t v = value(size);
      if (v <= limit_) fits_ = size;
      else fails_ = size;
      if (fails_ && *fails_ - fits_ <= 1) return fits_;
      if (!fails_ && fits_ >= kLargestFitted) return std::nullopt;
      before_ = last_;
      last_ = {{static_cast<double>(size), static_cast<double>(v)}};
    }
  }

 private:
  uint64_t guess() {
    double line = NAN;  // where the line through the last two tries meets the limit
    if (before_ && (*before_)[1] != (*last_)[1])
      line = (*last_)[0] + (static_cast<double>(limit_) - (*last_)[1]) * ((*last_)[0] - (*before_)[0]) / ((*last_)[1] - (*before_)[1]);
    if (!fails_) {
      double up = line > static_cast<double>(fits_) ? line : 2.0 * static_cast<double>(fits_);
      return std::max(fits_ + 1, static_cast<uint64_t>(std::min(up, static_cast<double>(kLargestFitted))));
    }
    uint64_t width = *fails_ - fits_;
    bool slow = width > widths_[0] / 2;
    widths_ = {widths_[1], width};
    if (!slow && line > static_cast<double>(fits_) && line < static_cast<double>(*fails_))
      return std::clamp(static_cast<uint64_t>(line), fits_ + 1, *fails_ - 1);
    if (slow || fits_ > 0) return fits_ + width / 2;
    stride_ *= 2;  // nothing fits yet and no line to follow
    return *fails_ > stride_ ? *fails_ - stride_ : *fails_ / 2;
  }

  uint64_t limit_;
  uint64_t fits_ = 0;  // the largest size known to fit (0: none yet, nothing runs at size 0)
  std::optional<uint64_t> fails_;  // the smallest known not to
  std::optional<std::array<double, 2>> last_, before_;  // (size, value) of the last two tries
  std::array<uint64_t, 2> widths_{UINT64_MAX, UINT64_MAX};  // the bracket's width at the last two guesses
  uint64_t stride_ = 1;
};

// --fit: the allocated peak bounds the answer with replays alone (reserved memory holds every allocated byte); on a
// caching allocator the model then searches below the bound for the largest size whose reserved memory fits.
void add_fit(ScaleWhatif& w, Predictions& p, uint64_t start) {
  uint64_t memory = *w.memory.bytes;
  std::optional<uint64_t> largest =
      LimitSearch(memory, std::nullopt).largest([&](uint64_t n) { return p.peak_allocated(n); }, start);
  if (!largest) {
    w.notes.push_back(ScaleNote::no_limit_found);
    return;
  }
  if (p.caching() && *largest > 0) {
    auto reserved = [&](uint64_t n) {  // over the memory exactly when the model ran out of it
      const ScalePrediction& q = p.at(n);
      return *q.oom ? std::max(*q.peak_reserved, memory + 1) : std::min(*q.peak_reserved, memory);
    };
    largest = LimitSearch(memory, *largest + 1).largest(reserved, *largest);
  }
  const ScalePrediction& edge = p.at(std::max<uint64_t>(*largest, 1));
  uint64_t peak = edge.peak_reserved.value_or(edge.peak_allocated);
  w.fit = ScaleWhatif::Fit{*largest, memory, static_cast<int64_t>(memory) - static_cast<int64_t>(peak)};
  for (uint64_t size : {*largest, *largest + 1}) {
    bool shown = std::any_of(w.predictions.begin(), w.predictions.end(), [&](const auto& q) { return q.size == size; });
    if (size > 0 && !shown) w.predictions.push_back(p.at(size));
  }
}

// Allocations whose fit falls below zero at a predicted size, by site: the smallest such size each.
void add_below_zero(ScaleWhatif& w, const ScaleFit& fit, const ScaleRun& base, const Predictions& p) {
  std::vector<uint64_t> sizes;
  for (const ScalePrediction& q : w.predictions) sizes.push_back(q.size);
  std::sort(sizes.begin(), sizes.end());
  std::map<std::string, UnmatchedAllocations> rows;
  std::set<uint32_t> seen;  // ids already counted at a smaller size
  for (uint64_t size : sizes) {
    for (uint32_t id : p.below(size)) {
      if (!seen.insert(id).second) continue;
      std::string site = allocation_site(*base.snapshot, fit.base_replay().stack_of(id));
      auto [it, fresh] = rows.try_emplace(site, UnmatchedAllocations{.run = fit.base(), .reason = UnmatchedAllocations::Reason::below_zero,
                                                                      .at_size = size, .site = site});
      it->second.count += 1;
      it->second.bytes += fit.base_replay().size_of(id);
    }
  }
  for (auto& [site, row] : rows) w.unmatched.push_back(std::move(row));
}

}  // namespace

std::vector<ScaleSpan> curve_spans(const ScaleCurve& c, int64_t first, double dt, size_t n) {
  std::vector<ScaleSpan> out(n);
  if (c.time_ns.empty()) return out;
  auto start = static_cast<int64_t>(std::floor(static_cast<double>(first) * dt));
  size_t j = std::upper_bound(c.time_ns.begin(), c.time_ns.end(), start) - c.time_ns.begin();  // the first after it
  for (size_t i = 0; i < n; ++i) {
    auto end = static_cast<int64_t>(std::floor(static_cast<double>(first + static_cast<int64_t>(i) + 1) * dt));
    ScaleSpan& span = out[i];
    auto take = [&](size_t k) {
      span.allocated = std::max(span.allocated, c.allocated[k]);
      if (!c.reserved.empty()) span.reserved = std::max(span.reserved, c.reserved[k]);
      span.shown = true;
    };
    if (j > 0 && start <= c.time_ns.back()) take(j - 1);
    for (; j < c.time_ns.size() && c.time_ns[j] < end; ++j) take(j);
    start = end;
  }
  return out;
}

ScaleWhatif scale_whatif(std::span<const ScaleRun> runs, const ScaleWhatifOptions& o) {
  check_sizes(runs);
  ScaleFit fit(runs);
  const ScaleRun& base = runs[fit.base()];
  bool cpu = is_cpu_device(*base.snapshot, base.device);
  ScaleWhatif w;
  w.device = base.device;
  w.base = fit.base();
  for (size_t j = 0; j < runs.size(); ++j) {
    w.runs.push_back({runs[j].name, runs[j].size, fit.peak_allocated(j), fit.allocations(j), fit.matched(j)});
    const auto& notes = runs[j].snapshot->warnings;
    w.warnings.insert(w.warnings.end(), notes.begin(), notes.end());
  }
  auto [conf, source] = choose_settings(o.conf, recorded_alloc_conf(*base.snapshot));
  if (!cpu) w.settings = to_string(conf);
  w.source = source;
  w.memory = scale_memory(base, fit.base_replay(), o.device_memory);
  if (o.fit && !w.memory.bytes)
    throw Error(fmt::format("--fit needs the device's memory, which {} does not record ({}): give it with --device-memory",
                            base.name, cpu ? "a CPU run" : "no device.total_memory"));
  add_notes(w, cpu);
  if (o.curve_run && *o.curve_run >= runs.size())
    throw Error(fmt::format("no run {} to draw the prediction over: there are {}", *o.curve_run, runs.size()));
  Predictor predictor(fit, base, cpu ? std::nullopt : std::optional(conf), w.memory, o.curve_run);
  Predictions predictions(predictor);
  for (uint64_t size : o.predict) w.predictions.push_back(predictions.at(size));
  if (o.fit) add_fit(w, predictions, base.size);
  w.unmatched = fit.unmatched();
  add_below_zero(w, fit, base, predictions);
  return w;
}

}  // namespace memrec
