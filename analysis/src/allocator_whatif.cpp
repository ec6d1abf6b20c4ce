#include "memrec/allocator_whatif.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "memrec/sites.h"
#include "memrec/units.h"

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
    m.source = "--device-memory";
    return m;
  }
  if (auto it = s.metadata.find(fmt::format("device.{}.total_memory", r.device())); it != s.metadata.end()) {
    try {
      m.total = m.limit = std::stoull(it->second);
      m.source = "the recording's device.total_memory";
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
    m.source += std::string(m.source.empty() ? "" : "; ") + "limit from the recorded OOM (reserved + free then)";
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
  drive(s, r, memory, m, conf == recorded_alloc_conf(s), end, [&](uint32_t step, const AllocatorModel& model) __attribute__((always_inline)) {
    if (step == kNoEvent) start_actions = model.segment_actions().size();
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

nlohmann::json prediction_json(const AllocatorPrediction& p, const Replay& r) {
  int64_t t0 = r.time_of(0);
  return {{"settings", to_string(p.conf)},
          {"predicted_reserved_peak", p.reserved_peak},
          {"predicted_allocated_peak", p.allocated_peak},
          {"predicted_peak_ns", p.reserved_peak_step == kNoEvent ? 0 : r.time_of(p.reserved_peak_step) - t0},
          {"segments", p.segments_at_peak},
          {"device_allocs", p.device_allocs},
          {"device_frees", p.device_frees},
          {"free_at_peak", p.free_at_peak},
          {"predicted_ooms", p.ooms},
          {"fits", p.ooms == 0}};
}

std::string settings_label(const std::string& text) { return text.empty() ? "(defaults)" : text; }

// What a setting saves against `base`; none when it runs out of memory, since the run would not finish.
nlohmann::json saving(uint64_t base, const AllocatorPrediction& p) {
  if (p.ooms) return nullptr;
  return static_cast<int64_t>(base) - static_cast<int64_t>(p.reserved_peak);
}

// Settings that fit first, each part by its reserved peak: one that runs out of memory is no choice however low.
bool better_setting(const nlohmann::json& a, const nlohmann::json& b) {
  if (a["fits"] != b["fits"]) return a["fits"].get<bool>();
  return a["predicted_reserved_peak"].get<uint64_t>() < b["predicted_reserved_peak"].get<uint64_t>();
}

std::string runs_out(const nlohmann::json& row) {
  uint64_t n = row["predicted_ooms"].get<uint64_t>();
  return fmt::format("runs out ({} OOM{})", n, n == 1 ? "" : "s");
}

std::string out_of_memory_note(const AllocatorPrediction& p, const DeviceLimits& memory) {
  return fmt::format("out of memory: {} request{} would not fit in the device's {} ({}); the run stops at the first, "
                     "and the predicted peaks go on past it as if the device had room",
                     p.ooms, p.ooms == 1 ? "" : "s", format_bytes(memory.limit), memory.source);
}

}  // namespace

nlohmann::json allocator_whatif_json(const Snapshot& s, uint8_t device, const AllocatorWhatifOptions& o) {
  if (auto type = s.metadata.find(fmt::format("device.{}.type", device)); type != s.metadata.end() && type->second == "cpu")
    throw Error(fmt::format("device {} is a CPU recording: libtorch's CPU allocator keeps no cache, so there is no "
                            "caching allocator to replay", device));
  Replay r(s, device);
  std::vector<std::string> notes;
  std::optional<AllocConf> recorded = recorded_alloc_conf(s);
  AllocConf conf;
  std::string source;
  if (o.conf) {
    conf = parse_alloc_conf(*o.conf), source = "--alloc-conf";
  } else if (recorded) {
    conf = *recorded, source = "recorded";
  } else {
    source = "assumed";
    notes.push_back("the file does not say which allocator settings the run used: assuming PyTorch's defaults "
                    "(give them with --alloc-conf)");
  }
  DeviceLimits memory = device_limits(s, r, o.device_memory);
  if (memory.total == kUnknown)
    notes.push_back("the device's memory is unknown: no limit assumed, so no release-and-retry or OOM is modelled "
                    "(give it with --device-memory)");
  if ((conf.garbage_collection_threshold > 0 || conf.memory_fraction > 0) && memory.total == kUnknown)
    notes.push_back("per_process_memory_fraction and garbage_collection_threshold need the device's memory: ignored");
  else if (conf.garbage_collection_threshold > 0 && conf.memory_fraction == 0)
    notes.push_back("garbage_collection_threshold acts only with a memory fraction set (per_process_memory_fraction "
                    "or torch.cuda.set_per_process_memory_fraction): without one it changes nothing");

  AllocatorPrediction p = predict_allocator(s, r, conf, memory);
  if (p.ooms) notes.push_back(out_of_memory_note(p, memory));
  uint64_t recorded_ooms = 0;
  r.for_each_step(0, r.steps(), [&](uint32_t, const Event& e) { recorded_ooms += e.action == Action::oom; });
  nlohmann::json j = prediction_json(p, r);
  j["device"] = device;
  j["settings_source"] = source;
  j["recorded_settings"] = recorded ? nlohmann::json(to_string(*recorded)) : nlohmann::json(nullptr);
  j["recorded_reserved_peak"] = r.peak_reserved().bytes;
  j["recorded_segment_allocs"] = std::count_if(r.segment_steps().begin(), r.segment_steps().end(),
                                               [&](uint32_t step) { return is_segment_grow(r.event(step).action); });
  j["recorded_ooms"] = recorded_ooms;
  j["requests"] = r.alloc_steps().size();
  j["device_memory"] = {{"total", memory.total == kUnknown ? nlohmann::json(nullptr) : nlohmann::json(memory.total)},
                        {"limit", memory.limit == kUnknown ? nlohmann::json(nullptr) : nlohmann::json(memory.limit)},
                        {"source", memory.source}};
  j["notes"] = notes;
  if (o.sweep) {
    AllocConf own = recorded.value_or(AllocConf{});
    uint64_t base = predict_allocator(s, r, own, memory).reserved_peak;
    nlohmann::json rows = nlohmann::json::array();
    for (const AllocConf& c : sweep_settings(own)) {
      AllocatorPrediction setting = predict_allocator(s, r, c, memory);
      nlohmann::json row = prediction_json(setting, r);
      row["saving"] = saving(base, setting);
      row["own"] = c == own;
      rows.push_back(row);
    }
    std::stable_sort(rows.begin(), rows.end(), better_setting);
    j["sweep_baseline"] = base;
    j["sweep"] = rows;
  }
  return j;
}

namespace {

nlohmann::json culprits_json(const Snapshot& s, const Replay& r, size_t top) {
  if (r.steps() > kCulpritsMaxEvents)
    return {{"skipped", fmt::format("more than {} events: run memrec whatif allocator for who fragmented the reserved "
                                    "memory and what other settings would reserve", kCulpritsMaxEvents)}};
  std::optional<AllocConf> recorded = recorded_alloc_conf(s);
  AllocConf own = recorded.value_or(AllocConf{});
  DeviceLimits memory = device_limits(s, r, std::nullopt);
  AllocatorPrediction p = predict_allocator(s, r, own, memory);
  int64_t t0 = r.time_of(0);
  // Stacks that differ only below the program's own frames read as one site: merge them.
  std::vector<std::pair<std::string, FragmentationCulprit>> sites;
  for (const FragmentationCulprit& c : fragmentation_culprits(s, r, own, memory, p.reserved_peak_step)) {
    std::string site = allocation_site(s, c.stack);
    auto it = std::find_if(sites.begin(), sites.end(), [&](const auto& x) { return x.first == site; });
    if (it == sites.end()) {
      sites.emplace_back(site, c);
      continue;
    }
    FragmentationCulprit& m = it->second;
    m.free_bytes += c.free_bytes, m.blocks += c.blocks, m.block_bytes += c.block_bytes;
    m.first_ns = std::min(m.first_ns, c.first_ns), m.last_ns = std::max(m.last_ns, c.last_ns);
  }
  std::stable_sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) { return a.second.free_bytes > b.second.free_bytes; });
  nlohmann::json culprits = nlohmann::json::array();
  for (const auto& [site, c] : sites) {
    if (culprits.size() >= top) break;
    culprits.push_back({{"site", site}, {"free_bytes", c.free_bytes}, {"blocks", c.blocks},
                        {"block_bytes", c.block_bytes}, {"first_ns", c.first_ns}, {"last_ns", c.last_ns}});
  }
  nlohmann::json savings = nlohmann::json::array();
  for (const AllocConf& c : sweep_settings(own)) {
    if (c == own) continue;
    AllocatorPrediction setting = predict_allocator(s, r, c, memory);
    savings.push_back({{"settings", to_string(c)}, {"predicted_reserved_peak", setting.reserved_peak},
                       {"predicted_ooms", setting.ooms}, {"fits", setting.ooms == 0},
                       {"saving", saving(p.reserved_peak, setting)}});
  }
  std::stable_sort(savings.begin(), savings.end(), better_setting);
  return {{"settings", to_string(own)},
          {"settings_source", recorded ? "recorded" : "assumed"},
          {"time_ns", p.reserved_peak_step == kNoEvent ? 0 : r.time_of(p.reserved_peak_step) - t0},
          {"reserved", p.reserved_peak},
          {"free", p.free_at_peak},
          {"culprits", culprits},
          {"settings_savings", savings}};
}

}  // namespace

nlohmann::json fragmentation_culprits_json(const Snapshot& s, const Replay& r, size_t top) {
  if (r.segment_steps().empty()) return nlohmann::json::object();
  try {
    return culprits_json(s, r, top);
  } catch (const Error& e) {  // a part of stats: its failure must not take the rest of the report with it
    return {{"skipped", e.what()}};
  }
}

void render_fragmentation_culprits(std::string& out, const nlohmann::json& j) {
  if (j.contains("skipped")) {
    out += fmt::format("fragmentation culprits: {}\n", j["skipped"].get<std::string>());
    return;
  }
  if (!j.contains("culprits")) return;
  out += fmt::format("\nwho fragmented the reserved memory at its peak (+{}, {} reserved, {} free; replayed under {}{}):\n",
                     format_duration(j["time_ns"]), format_bytes(j["reserved"]), format_bytes(j["free"]),
                     settings_label(j["settings"]), j["settings_source"] == "assumed" ? ", assumed" : "");
  if (j["culprits"].empty()) out += "  no segment holds both free space and live blocks\n";
  else out += fmt::format("  {:>12} {:>8} {:>12}  {:<23} {}\n", "free held", "blocks", "their bytes", "allocated", "site");
  for (const auto& c : j["culprits"])
    out += fmt::format("  {:>12} {:>8} {:>12}  {:<23} {}\n", format_bytes(c["free_bytes"]), c["blocks"].get<uint64_t>(),
                       format_bytes(c["block_bytes"]),
                       fmt::format("+{} .. +{}", format_duration(c["first_ns"]), format_duration(c["last_ns"])),
                       c["site"].get<std::string>());
  out += "what other allocator settings would reserve at the peak (memrec whatif allocator --sweep):\n";
  for (const auto& row : j["settings_savings"]) {
    std::string what = runs_out(row);
    if (row["fits"].get<bool>()) {
      int64_t saving = row["saving"].get<int64_t>();
      what = fmt::format("{} {:>10}", saving < 0 ? "costs" : "saves", format_bytes(static_cast<uint64_t>(saving < 0 ? -saving : saving)));
    }
    out += fmt::format("  {:>12}  {:<16}  {}\n", format_bytes(row["predicted_reserved_peak"]), what, row["settings"].get<std::string>());
  }
}

std::string allocator_whatif_text(const nlohmann::json& j) {
  auto bytes = [](const nlohmann::json& v) { return format_bytes(v.get<uint64_t>()); };
  std::string out;
  for (const auto& n : j["notes"]) out += fmt::format("note: {}\n", n.get<std::string>());
  std::string settings = settings_label(j["settings"].get<std::string>());
  std::string from = j["settings_source"] == "recorded" ? "the run's own" : j["settings_source"] == "assumed" ? "assumed" : "given";
  out += fmt::format("device {}: {} requests replayed through the caching allocator model under {} ({})\n",
                     j["device"].get<int>(), j["requests"].get<uint64_t>(), settings, from);
  if (!j["recorded_settings"].is_null() && j["settings_source"] != "recorded")
    out += fmt::format("the run was recorded with {}\n", settings_label(j["recorded_settings"].get<std::string>()));
  out += fmt::format("  {:<26}{:>12}{:>14}\n", "", "predicted", "recorded");
  out += fmt::format("  {:<26}{:>12}{:>14}\n", "peak reserved", bytes(j["predicted_reserved_peak"]),
                     bytes(j["recorded_reserved_peak"]));
  out += fmt::format("  {:<26}{:>12}\n", "peak allocated (blocks)", bytes(j["predicted_allocated_peak"]));
  out += fmt::format("  {:<26}{:>12}\n", "segments at the peak", j["segments"].get<uint64_t>());
  out += fmt::format("  {:<26}{:>12}{:>14}\n", "cudaMalloc / map calls", j["device_allocs"].get<uint64_t>(),
                     j["recorded_segment_allocs"].get<uint64_t>());
  out += fmt::format("  {:<26}{:>12}\n", "free at the peak", bytes(j["free_at_peak"]));
  if (j["predicted_ooms"].get<uint64_t>() || j["recorded_ooms"].get<uint64_t>())
    out += fmt::format("  {:<26}{:>12}{:>14}\n", "OOMs", j["predicted_ooms"].get<uint64_t>(), j["recorded_ooms"].get<uint64_t>());
  if (j.contains("sweep")) {
    out += fmt::format("\nsettings, best first (saving against the run's own settings, {} predicted):\n",
                       bytes(j["sweep_baseline"]));
    for (const auto& row : j["sweep"]) {
      std::string what = runs_out(row);
      if (row["fits"].get<bool>()) {
        int64_t saving = row["saving"].get<int64_t>();
        uint64_t base = j["sweep_baseline"].get<uint64_t>();
        what = fmt::format("{:>11} {:>6.1f}%", (saving < 0 ? "-" : "") + format_bytes(static_cast<uint64_t>(saving < 0 ? -saving : saving)),
                           base ? 100.0 * static_cast<double>(saving) / static_cast<double>(base) : 0.0);
      }
      out += fmt::format("  {:>12} {:>19}  {}{}\n", bytes(row["predicted_reserved_peak"]), what,
                         settings_label(row["settings"].get<std::string>()), row["own"].get<bool>() ? "  (the run's)" : "");
    }
  }
  return out;
}

}  // namespace memrec
