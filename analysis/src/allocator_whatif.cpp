#include "memrec/allocator_whatif.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "memrec/analysis.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

constexpr uint64_t kUnknown = UINT64_MAX;

// What the model does at each replay step: the kind in the low 2 bits, the allocation id above (kNoOp with id 1:
// torch.cuda.empty_cache()).
enum Op : uint32_t { kNoOp = 0, kAlloc = 1, kFreeRequested = 2, kFreeCompleted = 3 };
constexpr uint32_t kEmptyCache = 1 << 2 | kNoOp;

// The program's own releases (torch.cuda.empty_cache()): segments freed or unmapped outside a request. Inside one,
// releases come only when a new segment would not fit (release-and-retry) or reserved is above the garbage collection
// threshold, and the request's new segment or its OOM follows them before any other event.
void mark_empty_cache(const Snapshot& s, const Replay& r, const DeviceLimits& memory, std::vector<uint32_t>& ops) {
  AllocConf run = recorded_alloc_conf(s).value_or(AllocConf{});
  double allowed = run.memory_fraction > 0 && memory.total != kUnknown ? run.memory_fraction * static_cast<double>(memory.total) : 0;
  const std::vector<uint32_t>& steps = r.segment_steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!is_segment_shrink(r.event(steps[i]).action)) continue;
    uint32_t first = steps[i], last = first;
    while (i + 1 < steps.size() && steps[i + 1] == last + 1 && is_segment_shrink(r.event(last + 1).action)) last = steps[++i];
    Event next = last + 1 < r.steps() ? r.event(last + 1) : Event{.action = Action::snapshot};
    if (next.action == Action::oom) continue;
    if (is_segment_grow(next.action)) {
      double before = static_cast<double>(first == 0 ? r.initial().reserved : r.after(first - 1).reserved);
      double grown = before + static_cast<double>(next.size);
      bool retry = (memory.limit != kUnknown && grown > static_cast<double>(memory.limit)) || (allowed > 0 && grown > allowed);
      bool collect = allowed > 0 && run.garbage_collection_threshold > 0 && before > run.garbage_collection_threshold * allowed;
      if (retry || collect) continue;
    }
    ops[last] = kEmptyCache;
  }
}

std::vector<uint32_t> ops_by_step(const Snapshot& s, const Replay& r, const DeviceLimits& memory) {
  std::vector<uint32_t> ops(r.steps(), kNoOp);
  mark_empty_cache(s, r, memory, ops);
  const auto &a = r.alloc_steps(), &f = r.free_steps(), &c = r.completed_steps();
  for (uint32_t id = 0; id < a.size(); ++id) {
    if (a[id] != kNoEvent) ops[a[id]] = id << 2 | kAlloc;
    if (f[id] != kNoEvent && f[id] != kBeforeStart) ops[f[id]] = id << 2 | kFreeRequested;
    if (c[id] != kNoEvent) ops[c[id]] = id << 2 | kFreeCompleted;  // also a free_requested when it was none
  }
  return ops;
}

// The blocks live when recording began, as the model's first allocations. `adopt`: take over the recorded start
// segments as they are (right under the run's own settings); else replay the live blocks as allocations (what other
// settings would have made of them). Returns the model's handle per allocation id.
std::vector<uint32_t> rebuild_start(const Snapshot& s, const Replay& r, AllocatorModel& m, bool adopt) {
  uint32_t n = static_cast<uint32_t>(r.alloc_steps().size());
  std::vector<uint32_t> handle(n, AllocatorModel::kNone);
  if (adopt && s.has_segments_start) {
    std::vector<const Segment*> segments;
    for (const Segment& seg : s.segments_start)
      if (seg.device == r.device()) segments.push_back(&seg);
    std::sort(segments.begin(), segments.end(), [](const Segment* a, const Segment* b) { return a->addr < b->addr; });
    uint32_t id = 0;  // pre-existing allocations are the start state's active blocks in address order
    for (const Segment* seg : segments) {
      std::vector<AllocatorModel::StartBlock> blocks;
      for (const Block& b : seg->blocks)
        blocks.push_back({b.size, b.state, b.state == BlockState::inactive ? AllocatorModel::kNone : id++});
      std::vector<uint32_t> handles = m.adopt_segment(seg->addr, seg->stream, !seg->is_large, seg->is_expandable, blocks);
      for (size_t i = 0; i < handles.size(); ++i)
        if (blocks[i].tag != AllocatorModel::kNone && blocks[i].tag < n) handle[blocks[i].tag] = handles[i];
    }
    return handle;
  }
  for (uint32_t id = 0; id < n && r.alloc_steps()[id] == kNoEvent; ++id) {
    handle[id] = m.malloc(r.size_of(id), r.field_of<&Allocation::stream, &Event::stream>(id), id);
    if (r.free_steps()[id] == kBeforeStart) m.free_requested(handle[id]);
  }
  return handle;
}

// Runs the model over the replay's steps [0, end), calling after(step, model) after each (kNoEvent: after the blocks
// live at the start).
template <class F>
void drive(const Snapshot& s, const Replay& r, const DeviceLimits& memory, AllocatorModel& m, bool adopt, uint32_t end,
           F after) {
  std::vector<uint32_t> ops = ops_by_step(s, r, memory);
  if (adopt) {
    std::vector<std::pair<uint64_t, uint64_t>> addresses;
    for (uint32_t step : r.segment_steps())
      if (Event e = r.event(step); e.action == Action::segment_alloc) addresses.emplace_back(e.size, e.addr);
    m.use_segment_addresses(std::move(addresses));
  }
  std::vector<uint32_t> handle = rebuild_start(s, r, m, adopt);
  after(kNoEvent, m);
  r.for_each_step(0, end, [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    uint32_t op = ops[step], id = op >> 2;
    switch (op & 3) {
      case kAlloc: handle[id] = m.malloc(e.size, e.stream, id); break;
      case kFreeRequested: m.free_requested(handle[id]); break;
      case kFreeCompleted: m.free_completed(handle[id]); break;
      default:
        if (op == kEmptyCache) m.empty_cache();
        if (e.action == Action::oom) m.try_malloc(e.size, e.stream);
    }
    after(step, m);
  });
}

}  // namespace

DeviceLimits device_limits(const Snapshot& s, const Replay& r, std::optional<uint64_t> given) {
  DeviceLimits m;
  if (given) {
    m.total = m.limit = *given;
    m.given = true;
    return m;
  }
  if (auto it = s.metadata.find(fmt::format("device.{}.total_memory", r.device())); it != s.metadata.end()) {
    try {
      m.total = m.limit = std::stoull(it->second);
      m.recorded_total = true;
    } catch (const std::exception&) {
    }
  }
  // At an OOM the allocator had released what it could: what it held then plus CUDA's free bytes is all it can get.
  uint32_t oom = kNoEvent;
  r.for_each_step(0, r.steps(), [&](uint32_t step, const Event& e) {
    if (e.action == Action::oom && oom == kNoEvent) oom = step;
  });
  if (oom != kNoEvent) {
    m.limit = r.after(oom).reserved + r.event(oom).addr;
    if (m.total == kUnknown) m.total = m.limit;
    m.oom_limit = true;
  }
  return m;
}

AllocatorPrediction predict_allocator(const Snapshot& s, const Replay& r, const AllocConf& conf,
                                      const DeviceLimits& memory, const AllocatorReplayOptions& o) {
  AllocatorModel m(conf, memory.total, memory.limit);
  m.keep_segment_actions(o.keep_actions);
  AllocatorPrediction p;
  p.conf = conf;
  uint32_t end = o.stop_after == kNoEvent ? r.steps() : std::min(r.steps(), o.stop_after + 1);
  bool first = true;
  size_t start_actions = 0;  // the actions that rebuilt the start state are no part of the recording
  if (o.keep_reserved) p.reserved_after.reserve(end);
  drive(s, r, memory, m, conf == recorded_alloc_conf(s), end, [&](uint32_t step, const AllocatorModel& model) __attribute__((always_inline)) {
    if (step == kNoEvent) start_actions = model.segment_actions().size();
    else if (o.keep_reserved) p.reserved_after.push_back(model.reserved());
    if (p.first_oom_step == kNoEvent && model.ooms() > 0) p.first_oom_step = step;
    if (model.allocated() > p.allocated_peak) p.allocated_peak = model.allocated();
    if (model.reserved() > p.reserved_peak || first) {
      first = false;
      p.reserved_peak = model.reserved();
      p.reserved_peak_step = step;
      p.segments_at_peak = model.segments();
      p.free_at_peak = model.reserved() - model.allocated();
    }
  });
  p.device_allocs = m.device_allocs();
  p.device_frees = m.device_frees();
  p.ooms = m.ooms();
  if (o.keep_actions)
    p.segment_actions.assign(m.segment_actions().begin() + static_cast<ptrdiff_t>(start_actions), m.segment_actions().end());
  return p;
}

std::vector<AllocatorModel::SegmentView> allocator_layout_after(const Snapshot& s, const Replay& r,
                                                                const AllocConf& conf, const DeviceLimits& memory,
                                                                uint32_t step) {
  AllocatorModel m(conf, memory.total, memory.limit);
  drive(s, r, memory, m, conf == recorded_alloc_conf(s), step == kNoEvent ? 0 : step + 1, [](uint32_t, const AllocatorModel&) {});
  return m.layout();
}

std::vector<SegmentAction> recorded_segment_actions(const Snapshot&, const Replay& r) {
  std::vector<SegmentAction> out;
  for (uint32_t step : r.segment_steps()) {
    Event e = r.event(step);
    out.push_back({e.action, e.size, e.stream});
  }
  return out;
}

std::vector<AllocConf> sweep_settings(const AllocConf& own) {
  static const char* kCommon[] = {
      "",
      "expandable_segments:True",
      "max_split_size_mb:64",
      "max_split_size_mb:128",
      "max_split_size_mb:256",
      "max_split_size_mb:512",
      "roundup_power2_divisions:4",
      "roundup_power2_divisions:8",
      "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
      "expandable_segments:True,roundup_power2_divisions:4",
  };
  std::vector<AllocConf> out{own};
  for (const char* text : kCommon) {
    AllocConf c = parse_alloc_conf(text);
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

std::vector<FragmentationCulprit> fragmentation_culprits(const Snapshot& s, const Replay& r, const AllocConf& conf,
                                                         const DeviceLimits& memory, uint32_t step) {
  std::map<uint32_t, FragmentationCulprit> by_stack;
  int64_t t0 = r.time_of(0);
  for (const auto& seg : allocator_layout_after(s, r, conf, memory, step)) {
    uint64_t free = 0;
    uint32_t live = 0;
    for (const auto& b : seg.blocks) {
      if (b.allocated) ++live;
      else free += b.size;
    }
    if (free == 0 || live == 0) continue;
    for (const auto& b : seg.blocks) {
      if (!b.allocated || b.tag == AllocatorModel::kNone) continue;
      FragmentationCulprit& c = by_stack[r.stack_of(b.tag)];
      uint32_t at = r.alloc_steps()[b.tag];
      int64_t t = at == kNoEvent ? 0 : r.time_of(at) - t0;
      if (c.blocks == 0) c.first_ns = c.last_ns = t;
      c.stack = r.stack_of(b.tag);
      c.free_bytes += free / live;
      c.blocks += 1;
      c.block_bytes += b.size;
      c.first_ns = std::min(c.first_ns, t), c.last_ns = std::max(c.last_ns, t);
    }
  }
  std::vector<FragmentationCulprit> out;
  for (auto& [stack, c] : by_stack) out.push_back(c);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.free_bytes > b.free_bytes; });
  return out;
}

namespace {

SettingPrediction prediction_shown(const AllocatorPrediction& p, const Replay& r) {
  return {.settings = to_string(p.conf),
          .reserved_peak = p.reserved_peak,
          .allocated_peak = p.allocated_peak,
          .peak_ns = p.reserved_peak_step == kNoEvent ? 0 : r.time_of(p.reserved_peak_step) - r.time_of(0),
          .segments = p.segments_at_peak,
          .device_allocs = p.device_allocs,
          .device_frees = p.device_frees,
          .free_at_peak = p.free_at_peak,
          .ooms = p.ooms,
          .saving = std::nullopt};
}

// Each setting predicted with what it saves against `base`, settings that fit first, each part by its reserved
// peak: one that runs out of memory is no choice however low.
std::vector<SettingPrediction> predict_settings(const Snapshot& s, const Replay& r, const std::vector<AllocConf>& confs,
                                                const DeviceLimits& memory, uint64_t base, const AllocConf& own) {
  std::vector<SettingPrediction> rows;
  for (const AllocConf& c : confs) {
    SettingPrediction row = prediction_shown(predict_allocator(s, r, c, memory), r);
    if (row.fits()) row.saving = static_cast<int64_t>(base) - static_cast<int64_t>(row.reserved_peak);
    row.own = c == own;
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const SettingPrediction& a, const SettingPrediction& b) {
    if (a.fits() != b.fits()) return a.fits();
    return a.reserved_peak < b.reserved_peak;
  });
  return rows;
}

void note_memory(const AllocConf& conf, const DeviceLimits& memory, std::vector<AllocatorNote>& notes) {
  if (memory.total == kUnknown) notes.push_back(AllocatorNote::memory_unknown);
  if ((conf.garbage_collection_threshold > 0 || conf.memory_fraction > 0) && memory.total == kUnknown)
    notes.push_back(AllocatorNote::fraction_ignored);
  else if (conf.garbage_collection_threshold > 0 && conf.memory_fraction == 0)
    notes.push_back(AllocatorNote::threshold_without_fraction);
}

void add_recorded(AllocatorWhatif& w, const Replay& r) {
  w.recorded_reserved_peak = r.peak_reserved().bytes;
  w.recorded_segment_allocs = std::count_if(r.segment_steps().begin(), r.segment_steps().end(),
                                            [&](uint32_t step) { return is_segment_grow(r.event(step).action); });
  r.for_each_step(0, r.steps(), [&](uint32_t, const Event& e) { w.recorded_ooms += e.action == Action::oom; });
  w.requests = r.alloc_steps().size();
}

}  // namespace

ChosenSettings choose_settings(const std::optional<std::string>& given, const std::optional<AllocConf>& recorded) {
  if (given) return {parse_alloc_conf(*given), SettingsSource::given};
  if (recorded) return {*recorded, SettingsSource::recorded};
  return {AllocConf{}, SettingsSource::assumed};
}

AllocatorWhatif allocator_whatif(const Snapshot& s, uint8_t device, const AllocatorWhatifOptions& o) {
  if (is_cpu_device(s, device))
    throw Error(fmt::format("device {} is a CPU recording: libtorch's CPU allocator keeps no cache, so there is no "
                            "caching allocator to replay", device));
  Replay r(s, device);
  AllocatorWhatif w;
  w.device = device;
  w.warnings = s.warnings;
  std::optional<AllocConf> recorded = recorded_alloc_conf(s);
  if (recorded) w.recorded_settings = to_string(*recorded);
  auto [conf, source] = choose_settings(o.conf, recorded);
  w.source = source;
  if (source == SettingsSource::assumed) w.notes.push_back(AllocatorNote::assumed_defaults);
  w.memory = device_limits(s, r, o.device_memory);
  note_memory(conf, w.memory, w.notes);
  w.prediction = prediction_shown(predict_allocator(s, r, conf, w.memory), r);
  if (w.prediction.ooms) w.notes.push_back(AllocatorNote::out_of_memory);
  add_recorded(w, r);
  if (o.sweep) {
    AllocConf own = recorded.value_or(AllocConf{});
    uint64_t base = predict_allocator(s, r, own, w.memory).reserved_peak;
    w.sweep = AllocatorWhatif::Sweep{base, predict_settings(s, r, sweep_settings(own), w.memory, base, own)};
  }
  return w;
}

namespace {

// Stacks that differ only below the program's own frames read as one site: merged, most free bytes first.
std::vector<SiteCulprit> culprit_sites(const Snapshot& s, const std::vector<FragmentationCulprit>& culprits, size_t top) {
  std::vector<SiteCulprit> sites;
  for (const FragmentationCulprit& c : culprits) {
    std::string site = allocation_site(s, c.stack);
    auto it = std::find_if(sites.begin(), sites.end(), [&](const SiteCulprit& x) { return x.site == site; });
    if (it == sites.end()) {
      sites.push_back({site, c});
      continue;
    }
    FragmentationCulprit& m = it->held;
    m.free_bytes += c.free_bytes, m.blocks += c.blocks, m.block_bytes += c.block_bytes;
    m.first_ns = std::min(m.first_ns, c.first_ns), m.last_ns = std::max(m.last_ns, c.last_ns);
  }
  std::stable_sort(sites.begin(), sites.end(),
                   [](const SiteCulprit& a, const SiteCulprit& b) { return a.held.free_bytes > b.held.free_bytes; });
  if (sites.size() > top) sites.resize(top);
  return sites;
}

void find_culprits(FragmentationCulprits& out, const Snapshot& s, const Replay& r, size_t top) {
  std::optional<AllocConf> recorded = recorded_alloc_conf(s);
  AllocConf own = recorded.value_or(AllocConf{});
  DeviceLimits memory = device_limits(s, r, std::nullopt);
  AllocatorPrediction p = predict_allocator(s, r, own, memory);
  out.settings = to_string(own);
  out.assumed = !recorded;
  out.time_ns = p.reserved_peak_step == kNoEvent ? 0 : r.time_of(p.reserved_peak_step) - r.time_of(0);
  out.reserved = p.reserved_peak;
  out.free = p.free_at_peak;
  out.culprits = culprit_sites(s, fragmentation_culprits(s, r, own, memory, p.reserved_peak_step), top);
  std::vector<AllocConf> others = sweep_settings(own);
  others.erase(std::remove(others.begin(), others.end(), own), others.end());
  out.settings_savings = predict_settings(s, r, others, memory, p.reserved_peak, own);
  out.state = FragmentationCulprits::State::found;
}

}  // namespace

FragmentationCulprits stats_fragmentation_culprits(const Snapshot& s, const Replay& r, size_t top) {
  FragmentationCulprits out;
  if (r.segment_steps().empty()) return out;
  if (r.steps() > kCulpritsMaxEvents) {
    out.state = FragmentationCulprits::State::too_many_events;
    return out;
  }
  try {
    find_culprits(out, s, r, top);
  } catch (const Error& e) {  // a part of stats: its failure must not take the rest of the report with it
    out = {};
    out.state = FragmentationCulprits::State::failed;
    out.error = e.what();
  }
  return out;
}

}  // namespace memrec
