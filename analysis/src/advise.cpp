#include "memrec/advise.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/allocator_whatif.h"
#include "memrec/analysis.h"
#include "memrec/growth.h"
#include "memrec/sites.h"
#include "memrec/whatif.h"

namespace memrec {
namespace {

constexpr size_t kEvidenceRows = 5;

// What every lever reads: the recorded replay, its peak and what is live there.
struct Run {
  Run(const Snapshot& s, uint8_t device)
      : s(s), r(s, device), cpu(is_cpu_device(s, device)), phases(s, device), categories(categorize(s, r)),
        live(r.live_after(r.peak_allocated().step)) {
    peak.allocated = r.peak_allocated().bytes;
    if (!cpu) peak.reserved = r.peak_reserved().bytes;
  }
  const Snapshot& s;
  Replay r;
  bool cpu;
  PhaseIndex phases;
  std::vector<Category> categories;
  std::vector<uint32_t> live;  // at the allocated peak
  PeakBytes peak;
  bool curves = false;  // AdviseOptions::curves
  int64_t peak_ns() const { return r.time_of(r.peak_allocated().step); }
};

Advice made(AdviceKind kind, std::string change, AdviceMethod method) {
  Advice a;
  a.kind = kind, a.change = std::move(change), a.method = method;
  return a;
}

// A counted change: `bytes` live at the peak freed, the reserved memory left to a replay that does not exist.
Advice counted(AdviceKind kind, std::string change, uint64_t bytes, const Run& run) {
  Advice a = made(kind, std::move(change), AdviceMethod::counted);
  a.saves.allocated = static_cast<int64_t>(bytes);
  a.peak_after.allocated = run.peak.allocated - bytes;
  return a;
}

// Blocks live at the peak: their ids, their total and the evidence by allocation site (most bytes first).
struct LiveSites {
  uint64_t bytes = 0;
  std::vector<Evidence> evidence;
  std::vector<uint32_t> blocks;
};

// The live blocks at the peak that `keep` picks.
template <class Keep> LiveSites live_by_site(const Run& run, Keep keep) {
  std::map<std::string, uint64_t> sites;
  LiveSites out;
  for (uint32_t id : run.live) {
    if (!keep(id)) continue;
    uint64_t bytes = run.r.size_of(id);
    out.bytes += bytes;
    out.blocks.push_back(id);
    uint32_t owner = run.r.owner_of(id);
    std::string key = owner != kNoOwner ? run.s.strings[run.s.owners[owner].name]
                                        : allocation_site(run.s, run.r.stack_of(id));
    sites[key] += bytes;
  }
  std::vector<Evidence> rows;
  for (auto& [what, bytes] : sites) rows.push_back({what, bytes});
  std::stable_sort(rows.begin(), rows.end(), [](const Evidence& a, const Evidence& b) { return a.bytes > b.bytes; });
  if (rows.size() > kEvidenceRows) rows.resize(kEvidenceRows);
  out.evidence = std::move(rows);
  return out;
}

// A counted change of the blocks `live` names.
Advice counted(AdviceKind kind, std::string change, LiveSites live, const Run& run) {
  Advice a = counted(kind, std::move(change), live.bytes, run);
  a.evidence = std::move(live.evidence);
  a.blocks = std::move(live.blocks);
  return a;
}

// The optimizer the run steps, from PyTorch's "Optimizer.step#Adam.step" annotations: "torch.optim.Adam", or a
// "" where the run does not say.
std::string optimizer_name(const Snapshot& s, uint8_t device) {
  constexpr std::string_view kPrefix = "Optimizer.step#";
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    if (s.scopes[i].device != device) continue;
    std::string_view name = s.strings[s.scopes[i].name];
    if (!name.starts_with(kPrefix)) continue;
    name.remove_prefix(kPrefix.size());
    return fmt::format("torch.optim.{}", name.substr(0, name.find('.')));
  }
  return "";
}

// "torch.optim.SGD", or `unknown` where the run does not name its optimizer.
std::string optimizer_or(const Snapshot& s, uint8_t device, std::string unknown) {
  std::string name = optimizer_name(s, device);
  return name.empty() ? unknown : name;
}

// ---- checkpointing ----

// Each layer's recompute cost: its forward passes' kernel time where kernels were traced (`traced`), else their
// wall time (a CPU's compute), which ranks layers but is no GPU cost to show.
std::map<std::string, int64_t> recompute_costs(const Snapshot& s, uint8_t device, const CheckpointPredictor& cp,
                                               bool& traced) {
  std::vector<std::pair<int64_t, int64_t>> kernels;
  for (const Kernel& k : s.kernels)
    if (k.device == device && k.kind == KernelKind::kernel) kernels.emplace_back(k.start_ns, k.end_ns - k.start_ns);
  std::sort(kernels.begin(), kernels.end());
  traced = !kernels.empty();
  std::map<std::string, int64_t> cost;
  for (const CheckpointPredictor::Forward& f : cp.forwards()) {
    int64_t& c = cost[f.layer];
    if (!traced) {
      c += f.end_ns - f.start_ns;
      continue;
    }
    auto it = std::lower_bound(kernels.begin(), kernels.end(), std::pair{f.start_ns, INT64_MIN});
    for (; it != kernels.end() && it->first <= f.end_ns; ++it) c += it->second;
  }
  return cost;
}

// The allocator model's reserved peak of a history under `conf`.
uint64_t reserved_peak(const Snapshot& history, uint8_t device, const AllocConf& conf, const DeviceLimits& memory) {
  Replay r(history, device);
  return predict_allocator(history, r, conf, memory).reserved_peak;
}

// What the allocator model says about the recorded run: its own settings and their reserved peak (the baseline
// every replayed reserved saving is taken against, as `whatif allocator --sweep` takes it).
struct AllocatorBase {
  AllocConf own;
  DeviceLimits memory;
  uint64_t reserved = 0;
};

// The run under a change, its history replayed, on the recorded run's clock: allocated after each event and, with
// `base`, reserved under `conf` (the run's own settings where null).
ScaleCurve changed_curve(const Snapshot& history, const Run& run, const AllocatorBase* base,
                         const AllocConf* conf = nullptr) {
  Replay r(history, run.r.device());
  ScaleCurve c;
  int64_t origin = run.r.time_of(0);
  c.time_ns.reserve(r.steps());
  c.allocated.reserve(r.steps());
  r.for_each_after(0, r.steps(), [&](uint32_t step, const Totals& t) {
    int64_t before = c.time_ns.empty() ? 0 : c.time_ns.back();
    c.time_ns.push_back(std::max(before, r.time_of(step) - origin));
    c.allocated.push_back(t.allocated);
  });
  if (base) {
    AllocatorReplayOptions keep{.keep_reserved = true};
    c.reserved = predict_allocator(history, r, conf ? *conf : base->own, base->memory, keep).reserved_after;
  }
  if (r.peak_allocated().step < r.steps()) c.peak = r.peak_allocated().step;
  return c;
}

// The layers a program can wrap: all but those whose forward holds another layer's (the root module, "transformer"
// around "transformer.h.0"), as wrapping one of those recomputes the layers inside it too.
std::vector<std::string> wrappable_layers(const CheckpointPredictor& cp) {
  std::vector<CheckpointPredictor::Forward> f = cp.forwards();
  std::sort(f.begin(), f.end(), [](const auto& a, const auto& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  std::set<std::string> containers;  // passes nest: the one starting next inside a pass lies in it
  for (size_t i = 0; i + 1 < f.size(); ++i)
    if (f[i + 1].start_ns <= f[i].end_ns && f[i + 1].layer != f[i].layer) containers.insert(f[i].layer);
  std::vector<std::string> out;
  for (const std::string& layer : cp.layers())
    if (!containers.contains(layer)) out.push_back(layer);
  return out;
}

class CheckpointLever {
 public:
  CheckpointLever(const Run& run, const CheckpointPredictor& cp, const std::optional<AllocatorBase>& base)
      : run_(run), cp_(cp), base_(base), all_(wrappable_layers(cp)) {}

  // Every layer, and the layers with the best saving per recompute cost.
  void add(Advise& out) {
    bool traced = false;
    std::map<std::string, int64_t> cost = recompute_costs(run_.s, run_.r.device(), cp_, traced);
    std::map<std::string, uint64_t> alone;
    for (const std::string& layer : all_) alone[layer] = cp_.predict({layer}).saving;
    std::vector<std::string> left_out = leave_out_savers_of_nothing(alone);
    const std::vector<std::string>& all = all_;
    auto ratio = [&](const std::string& l) { return double(alone[l]) / double(std::max<int64_t>(cost[l], 1)); };
    std::vector<std::string> order = all;
    std::stable_sort(order.begin(), order.end(), [&](auto& a, auto& b) { return ratio(a) > ratio(b); });
    std::string but = left_out.empty() ? ""
                      : fmt::format("; not {}, which {} nothing checkpointed", span_of(left_out),
                                    left_out.size() == 1 ? "saves" : "save");
    Advice every = advice(all, fmt::format("checkpoint every layer ({}{}): wrap each one's forward in "
                                           "torch.utils.checkpoint.checkpoint", span_of(all), but),
                          cost, traced, alone);
    std::optional<std::vector<std::string>> best = best_prefix(order, cost, every.saves.allocated);
    out.advice.push_back(std::move(every));  // first: a tie in saving ranks every layer first
    if (!best) return;
    std::vector<std::string> chosen = *best;
    std::sort(chosen.begin(), chosen.end(), natural_less);
    out.advice.push_back(advice(chosen, fmt::format("checkpoint {} (the layers that save most per recompute time): "
                                                    "wrap each one's forward in torch.utils.checkpoint.checkpoint",
                                                    fmt::join(chosen, ", ")),
                                cost, traced, alone));
  }

  // Leaves out of every layer those whose checkpointing saves nothing alone and nothing among the others (a layer
  // whose only activation is its output, or whose held input outweighs what it drops): they only cost recompute.
  // Returns those left out.
  std::vector<std::string> leave_out_savers_of_nothing(const std::map<std::string, uint64_t>& alone) {
    uint64_t every = cp_.predict(all_).saving;
    std::vector<std::string> kept = all_, left_out;
    for (const std::string& layer : all_) {
      if (alone.at(layer) > 0 || kept.size() == 1) continue;
      std::vector<std::string> without = kept;
      std::erase(without, layer);
      uint64_t saving = cp_.predict(without).saving;
      if (saving < every) continue;
      kept = std::move(without), every = saving;
      left_out.push_back(layer);
    }
    all_ = std::move(kept);
    return left_out;
  }

  // Every wrappable layer that saves, and their history for the combined prediction.
  const std::vector<std::string>& every_layer() const { return all_; }
  Snapshot all_layers() const { return cp_.history(all_); }

 private:
  // "layers.0, layers.1, layers.2", or "layers.0, layers.1, ..., layers.11 (12 layers)" for many (in ASCII: the
  // viewer's font has no ellipsis).
  static std::string span_of(const std::vector<std::string>& layers) {
    constexpr size_t kNamed = 4;
    if (layers.size() <= kNamed) return fmt::format("{}", fmt::join(layers, ", "));
    return fmt::format("{}, {}, ..., {} ({} layers)", layers[0], layers[1], layers.back(), layers.size());
  }

  // The shortest run of layers, in order of saving per cost, with the best saving per cost among those saving at
  // least half of what every layer saves; unset where that is every layer.
  std::optional<std::vector<std::string>> best_prefix(const std::vector<std::string>& order,
                                                      std::map<std::string, int64_t>& cost, int64_t all_saving) {
    double best_ratio = -1;
    size_t best = order.size();
    int64_t spent = 0;
    for (size_t k = 1; k < order.size(); ++k) {
      spent += cost[order[k - 1]];
      auto saving = static_cast<int64_t>(cp_.predict({order.begin(), order.begin() + k}).saving);
      if (2 * saving < all_saving) continue;
      double r = double(saving) / double(std::max<int64_t>(spent, 1));
      if (r > best_ratio) best_ratio = r, best = k;
    }
    if (best == order.size()) return std::nullopt;
    return std::vector<std::string>(order.begin(), order.begin() + best);
  }

  Advice advice(const std::vector<std::string>& layers, std::string change, std::map<std::string, int64_t>& cost,
                bool traced, std::map<std::string, uint64_t>& alone) const {
    CheckpointPrediction p = cp_.predict(layers);
    Advice a = made(AdviceKind::checkpoint, std::move(change), AdviceMethod::replayed);
    a.saves.allocated = static_cast<int64_t>(p.saving);
    a.peak_after.allocated = run_.peak.allocated - p.saving;
    if (base_) {
      auto saved = static_cast<int64_t>(base_->reserved) -
                   static_cast<int64_t>(reserved_peak(cp_.history(layers), run_.r.device(), base_->own, base_->memory));
      a.saves.reserved = saved;
      a.peak_after.reserved = static_cast<uint64_t>(static_cast<int64_t>(*run_.peak.reserved) - saved);
    }
    if (traced) {
      a.cost_ns = 0;
      for (const std::string& l : layers) *a.cost_ns += cost[l];
    }
    std::vector<std::string> by_saving = layers;
    std::stable_sort(by_saving.begin(), by_saving.end(), [&](auto& x, auto& y) { return alone[x] > alone[y]; });
    for (size_t i = 0; i < by_saving.size() && i < kEvidenceRows; ++i)
      a.evidence.push_back({fmt::format("{} alone", by_saving[i]), alone[by_saving[i]]});
    a.layers = layers;
    a.blocks = forward_blocks(layers);
    if (run_.curves) a.curve = changed_curve(cp_.history(layers), run_, base_ ? &*base_ : nullptr);
    return a;
  }

  // The blocks live at the peak that the layers' forward passes made: the activations checkpointing frees.
  std::vector<uint32_t> forward_blocks(const std::vector<std::string>& layers) const {
    std::set<std::string> chosen(layers.begin(), layers.end());
    std::vector<std::pair<int64_t, int64_t>> passes;
    for (const CheckpointPredictor::Forward& f : cp_.forwards())
      if (chosen.contains(f.layer)) passes.emplace_back(f.start_ns, f.end_ns);
    std::vector<uint32_t> out;
    for (uint32_t id : run_.live) {
      uint32_t made = run_.r.alloc_steps()[id];
      int64_t t = made == kNoEvent ? INT64_MIN : run_.r.time_of(made);
      if (std::any_of(passes.begin(), passes.end(), [&](auto& p) { return t >= p.first && t <= p.second; }))
        out.push_back(id);
    }
    return out;
  }

  const Run& run_;
  const CheckpointPredictor& cp_;
  const std::optional<AllocatorBase>& base_;
  std::vector<std::string> all_;
};

// ---- allocator settings ----

// Settings as PYTORCH_CUDA_ALLOC_CONF spells them, "the defaults" for none.
std::string settings_name(const AllocConf& c) {
  std::string name = to_string(c);
  return name.empty() ? "the defaults" : name;
}

// The best common setting that fits and saves reserved memory, with the fragmentation it removes.
std::optional<Advice> allocator_advice(const Run& run, const AllocatorBase& base, std::optional<uint64_t> memory,
                                       AllocConf* best_conf) {
  AllocatorWhatif w = allocator_whatif(run.s, run.r.device(), {.conf = std::nullopt, .device_memory = memory,
                                                               .sweep = true});
  const SettingPrediction* best = nullptr;
  for (const SettingPrediction& row : w.sweep->rows)
    if (!row.own && row.fits() && row.saving && *row.saving > 0) {
      best = &row;
      break;
    }
  if (!best) return std::nullopt;
  Advice a = made(AdviceKind::allocator,
                  fmt::format("set PYTORCH_CUDA_ALLOC_CONF={} (the run used {})", best->settings, settings_name(base.own)),
                  AdviceMethod::replayed);
  // Settings move no tensor, so the allocated peak stays the recorded one (the model's counts block bytes, each
  // request rounded up to 512 B, a little above the recorded requested bytes).
  a.saves.reserved = *best->saving;
  a.peak_after = {run.peak.allocated,
                  static_cast<uint64_t>(static_cast<int64_t>(*run.peak.reserved) - *best->saving)};
  AllocatorPrediction own = predict_allocator(run.s, run.r, base.own, base.memory);
  a.evidence.push_back({fmt::format("free in segments at the reserved peak under {}", settings_name(base.own)),
                        own.free_at_peak});
  a.evidence.push_back({fmt::format("free in segments at the reserved peak under {}", best->settings),
                        best->free_at_peak});
  std::vector<FragmentationCulprit> culprits =
      fragmentation_culprits(run.s, run.r, base.own, base.memory, own.reserved_peak_step);
  std::set<uint32_t> stacks;
  for (size_t i = 0; i < culprits.size() && i < kEvidenceRows - 2; ++i) {
    a.evidence.push_back({fmt::format("free bytes held by {}", allocation_site(run.s, culprits[i].stack)),
                          culprits[i].free_bytes});
    stacks.insert(culprits[i].stack);
  }
  for (uint32_t id : run.r.live_after(own.reserved_peak_step))
    if (stacks.contains(run.r.stack_of(id))) a.blocks.push_back(id);
  a.settings = best->settings;
  *best_conf = parse_alloc_conf(best->settings);
  if (run.curves) a.curve = changed_curve(run.s, run, &base, best_conf);
  return a;
}

// ---- growth ----

// Each site that `memrec growth` finds growing, with the bytes of its blocks live at the peak that outlived the step
// they were made in (what stops growing once the program lets them go).
void growth_advice(const Run& run, std::optional<uint64_t> memory, Advise& out) {
  GrowthResult g = growth(run.s, {.device = run.r.device(), .device_memory = memory, .first_step = std::nullopt,
                                  .last_step = std::nullopt});
  if (g.steps.empty()) {
    out.not_assessed.push_back("growth: no steps (no 'step N' scopes, and no forward and optimizer phases to infer "
                               "them from)");
    return;
  }
  if (g.verdict == GrowthVerdict::too_few_steps) {
    auto settled = std::count_if(g.steps.begin(), g.steps.end(),
                                 [&](const GrowthStep& st) { return st.step >= g.settled_from.value_or(0); });
    out.not_assessed.push_back(fmt::format("growth: {} step{} after the warm-up, fewer than the {} that tell growth "
                                           "from noise",
                                           settled, settled == 1 ? "" : "s", kGrowthMinSteps));
    return;
  }
  int64_t origin = run.r.time_of(kNoEvent), step_start = INT64_MIN;
  for (const GrowthStep& st : g.steps)
    if (st.start_ns + origin <= run.peak_ns()) step_start = st.start_ns + origin;
  for (const GrowingGroup& group : g.growing) {
    uint64_t held = 0;
    for (uint32_t id : run.live) {
      uint32_t made = run.r.alloc_steps()[id];
      if ((made == kNoEvent || run.r.time_of(made) < step_start) &&
          allocation_site(run.s, run.r.stack_of(id)) == group.site)
        held += run.r.size_of(id);
    }
    if (held == 0) continue;
    std::string where = group.module.empty() ? "" : fmt::format(" in {}", group.module);
    Advice a = counted(AdviceKind::growth,
                       fmt::format("let go of what {}{} allocates once its step is done: it grows every step from step "
                                   "{} on", group.site, where, group.first_step),
                       held, run);
    a.evidence.push_back({"growth per step (memrec growth)", static_cast<uint64_t>(std::llround(group.bytes_per_step))});
    a.evidence.push_back({"live at the end of the last step (memrec growth)", group.live_at_end});
    a.blocks = group.blocks;
    out.advice.push_back(std::move(a));
  }
}

// ---- blocks live at the peak ----

// When the pass holding `t` began: the start of the last forward phase at or before it (every gradient its
// backward makes comes after, however the backward's phases nest or split), else of the phase holding it, else `t`.
int64_t current_pass_start(const PhaseIndex& phases, int64_t t) {
  std::optional<int64_t> forward;
  for (uint32_t p = 1; p <= phases.size() && phases.start(p) <= t; ++p)
    if (phases.kind(p) == PhaseKind::forward) forward = phases.start(p);
  uint32_t phase = phases.at(t);
  return forward.value_or(phase ? phases.start(phase) : t);
}

// What zero_grad() does in the recorded torch: "torch 1.13.1's zero_grad()" where the run says its version and it
// keeps the gradients (before 2.0), else the setting that keeps them.
std::string zero_grad_default(const Snapshot& s) {
  for (const char* key : {"python.torch_version", "torch_version"}) {
    auto it = s.metadata.find(key);
    if (it == s.metadata.end() || it->second.empty()) continue;
    const std::string& v = it->second;
    if (v.size() > 1 && v[1] == '.' && (v[0] == '0' || v[0] == '1'))
      return fmt::format("torch {}'s zero_grad()", v);
    break;
  }
  return "zero_grad(set_to_none=False)";
}

// Gradients live at the peak that an earlier backward made: zero_grad() keeps them (set_to_none=False, the default
// before torch 2.0), or gradient accumulation holds them, through the forward pass. None when the peak is in the
// optimizer's step, which needs them.
void grads_outside_backward(const Run& run, Advise& out) {
  uint32_t phase = run.phases.at(run.peak_ns());
  PhaseKind kind = phase ? run.phases.kind(phase) : PhaseKind::none;
  if (kind == PhaseKind::optimizer) return;
  int64_t made_before = current_pass_start(run.phases, run.peak_ns());
  bool stepped = false;  // an optimizer step ran between the oldest held gradient and the peak
  int64_t oldest = INT64_MAX;
  LiveSites held = live_by_site(run, [&](uint32_t id) {
    uint32_t made = run.r.alloc_steps()[id];
    if (run.categories[id] != Category::gradient || made == kNoEvent || run.r.time_of(made) >= made_before)
      return false;
    oldest = std::min(oldest, run.r.time_of(made));
    return true;
  });
  if (held.bytes == 0) return;
  for (uint32_t p = 1; p <= run.phases.size(); ++p)
    stepped |= run.phases.kind(p) == PhaseKind::optimizer && run.phases.start(p) > oldest &&
               run.phases.end(p) < made_before;
  std::string where = kind == PhaseKind::none ? "at the peak" : fmt::format("at the peak, in {}", to_string(kind));
  std::string change =
      stepped ? fmt::format("call {}.zero_grad(set_to_none=True) ({} keeps the gradients allocated, zeroed): the "
                            "gradients are held {}",
                            optimizer_or(run.s, run.r.device(), "optimizer"), zero_grad_default(run.s), where)
              : fmt::format("the gradients accumulated over micro-batches are held {}: fewer accumulation steps, "
                            "or gradients kept in lower precision or sharded, free them",
                            where);
  out.advice.push_back(counted(AdviceKind::grads_outside_backward, std::move(change), std::move(held), run));
}

// The optimizer step's own temporaries where the peak is inside it and the step is a multi-tensor (foreach) one,
// which holds a temporary per parameter at once.
void optimizer_temporaries(const Run& run, Advise& out) {
  uint32_t phase = run.phases.at(run.peak_ns());
  if (!phase || run.phases.kind(phase) != PhaseKind::optimizer) return;
  int64_t start = run.phases.start(phase);
  LiveSites temporaries = live_by_site(run, [&](uint32_t id) {
    return run.categories[id] == Category::temporary && run.r.alloc_steps()[id] != kNoEvent &&
           run.r.time_of(run.r.alloc_steps()[id]) >= start;
  });
  // Only a multi-tensor (foreach) step holds a temporary per parameter at once; a per-parameter loop is the fix.
  const std::vector<Evidence>& evidence = temporaries.evidence;
  bool foreach = std::any_of(evidence.begin(), evidence.end(), [](const Evidence& e) {
    return e.what.find("_multi_tensor") != std::string::npos || e.what.find("foreach") != std::string::npos;
  });
  if (temporaries.bytes == 0 || !foreach) return;
  std::string opt = optimizer_or(run.s, run.r.device(), "the optimizer");
  std::string fix = run.cpu ? "foreach=False" : "fused=True (or foreach=False)";
  out.advice.push_back(counted(AdviceKind::optimizer_temporaries,
                               fmt::format("construct {} with {}: the peak is inside its step, on its temporaries",
                                           opt, fix),
                               std::move(temporaries), run));
}

// The loss's log-softmax of the logits (and its float32 copies) live at the peak.
void loss_logits(const Run& run, Advise& out) {
  LiveSites logits = live_by_site(run, [&](uint32_t id) {
    std::string site = allocation_site(run.s, run.r.stack_of(id));
    return site.find("log_softmax") != std::string::npos || site.find("cross_entropy") != std::string::npos;
  });
  if (logits.bytes == 0) return;
  std::string change = fmt::format("compute the loss over chunks of the sequence (or with a fused cross-entropy): "
                                   "the log-softmax of the logits at {} is live at the peak",
                                   logits.evidence.front().what);
  out.advice.push_back(counted(AdviceKind::loss_logits, std::move(change), std::move(logits), run));
}

// Parameters held twice: owner names equal but for their first component ("model.fc.weight", "ema.fc.weight"),
// of equal size. The copies (all but the first name seen) are counted.
void duplicate_parameters(const Run& run, Advise& out) {
  std::map<std::pair<std::string, uint64_t>, std::string> first;  // (name less its first part, bytes) -> its name
  std::map<std::string, uint64_t> copies;                           // the copy's top-level module -> bytes
  uint64_t bytes = 0;
  std::vector<uint32_t> blocks;
  for (uint32_t id : run.live) {
    uint32_t row = run.r.owner_of(id);
    if (row == kNoOwner || run.s.owners[row].kind != OwnerKind::parameter) continue;
    std::string name = run.s.strings[run.s.owners[row].name];
    size_t dot = name.find('.');
    // A model's own children ("0.weight", "2.weight" of an nn.Sequential) are no copies: the first part must be a
    // name, the rest a module path with its parameter.
    if (dot == std::string::npos || std::isdigit(static_cast<unsigned char>(name[0])) ||
        name.find('.', dot + 1) == std::string::npos)
      continue;
    auto [it, fresh] = first.try_emplace({name.substr(dot + 1), run.r.size_of(id)}, name);
    if (fresh || it->second.substr(0, it->second.find('.')) == name.substr(0, dot)) continue;
    copies[fmt::format("{} copies {}", name.substr(0, dot), it->second.substr(0, it->second.find('.')))] +=
        run.r.size_of(id);
    bytes += run.r.size_of(id);
    blocks.push_back(id);
  }
  if (bytes == 0) return;
  std::vector<Evidence> evidence;
  for (auto& [what, b] : copies) evidence.push_back({what, b});
  Advice a = counted(AdviceKind::duplicate_parameters,
                     fmt::format("keep the second copy of the parameters ({}) off this device, or in lower precision",
                                 evidence.front().what),
                     bytes, run);
  a.evidence = std::move(evidence);
  a.blocks = std::move(blocks);
  out.advice.push_back(std::move(a));
}

// ---- ranking ----

int64_t ranked_saving(const Advice& a, bool cpu) {
  return !cpu && a.saves.reserved ? *a.saves.reserved : a.saves.allocated;
}

void rank(Advise& out) {
  std::erase_if(out.advice, [&](const Advice& a) { return ranked_saving(a, out.cpu) <= 0; });
  std::stable_sort(out.advice.begin(), out.advice.end(), [&](const Advice& a, const Advice& b) {
    return ranked_saving(a, out.cpu) > ranked_saving(b, out.cpu);
  });
}

// The top checkpointing (every layer) and allocator changes replayed together: the checkpointed history through the
// allocator model under the best settings.
std::optional<Advice> combined(const Run& run, const CheckpointLever& checkpoint, const Advice& every,
                               const AllocConf& conf, const AllocatorBase& base) {
  Snapshot history = checkpoint.all_layers();
  uint64_t reserved = reserved_peak(history, run.r.device(), conf, base.memory);
  Advice a = made(AdviceKind::combined,
                  fmt::format("both: checkpoint every layer and set PYTORCH_CUDA_ALLOC_CONF={}", to_string(conf)),
                  AdviceMethod::replayed);
  a.saves.allocated = every.saves.allocated;
  a.saves.reserved = static_cast<int64_t>(base.reserved) - static_cast<int64_t>(reserved);
  a.peak_after = {every.peak_after.allocated,
                  static_cast<uint64_t>(static_cast<int64_t>(*run.peak.reserved) - *a.saves.reserved)};
  a.layers = every.layers;
  a.settings = to_string(conf);
  if (*a.saves.reserved <= 0) return std::nullopt;
  a.blocks = every.blocks;
  if (run.curves) a.curve = changed_curve(history, run, &base, &conf);
  return a;
}

// ---- batch ----

// The largest size that fits, and the one that fits with the top change's saving, taken as if it held at every size
// (a checkpointed run saves more at a larger batch, so the size is a floor).
void batch_advice(const Run& run, const AdviseOptions& o, Advise& out) {
  std::optional<Advice> top;
  if (!out.advice.empty()) top = out.advice.front();
  std::optional<size_t> curve_run;  // this run's clock
  if (run.curves) curve_run = 0;
  ScaleWhatif w = scale_whatif(o.scale_runs, {.predict = {}, .fit = true, .conf = std::nullopt,
                                              .device_memory = o.device_memory, .curve_run = curve_run});
  if (!w.fit || w.predictions.empty()) return;
  const ScalePrediction& largest = w.predictions.front();
  uint64_t size = o.scale_runs.front().size;
  auto batch = [&](uint64_t fits, const ScalePrediction& p, std::string change) {
    Advice a = made(AdviceKind::batch, std::move(change), AdviceMethod::scaled);
    a.peak_after = {p.peak_allocated, p.peak_reserved};
    a.saves.allocated = static_cast<int64_t>(run.peak.allocated) - static_cast<int64_t>(p.peak_allocated);
    if (p.peak_reserved && run.peak.reserved)
      a.saves.reserved = static_cast<int64_t>(*run.peak.reserved) - static_cast<int64_t>(*p.peak_reserved);
    a.evidence.push_back({fmt::format("device memory for size {}", fits), w.fit->device_memory});
    a.curve = p.curve;
    return a;
  };
  out.advice.push_back(batch(w.fit->largest, largest,
                             fmt::format("size {} is the largest that fits in the device's memory (this run: {})",
                                         w.fit->largest, size)));
  if (!top || !w.memory.bytes) return;
  uint64_t freed = static_cast<uint64_t>(ranked_saving(*top, run.cpu));
  ScaleWhatif after = scale_whatif(o.scale_runs, {.predict = {}, .fit = true, .conf = std::nullopt,
                                                  .device_memory = *w.memory.bytes + freed, .curve_run = curve_run});
  if (!after.fit || after.predictions.empty() || after.fit->largest <= w.fit->largest) return;
  out.advice.push_back(batch(after.fit->largest, after.predictions.front(),
                             fmt::format("with the top change ({}), size {} fits, if what it frees at this size is "
                                         "freed at that one",
                                         to_string(top->kind), after.fit->largest)));
}

AllocatorBase allocator_base(const Run& run, std::optional<uint64_t> memory) {
  AllocatorBase b{recorded_alloc_conf(run.s).value_or(AllocConf{}), device_limits(run.s, run.r, memory), 0};
  b.reserved = predict_allocator(run.s, run.r, b.own, b.memory).reserved_peak;
  return b;
}

}  // namespace

std::string_view to_string(AdviceKind k) {
  static constexpr std::array<std::string_view, 10> names = {
      "checkpoint", "allocator", "growth", "batch", "grads_outside_backward", "optimizer_temporaries", "loss_logits",
      "precision", "duplicate_parameters", "combined"};
  return names.at(static_cast<size_t>(k));
}

std::string_view to_string(AdviceMethod m) {
  static constexpr std::array<std::string_view, 3> names = {"replayed", "scaled", "counted"};
  return names.at(static_cast<size_t>(m));
}

Advise advise(const Snapshot& s, uint8_t device, const AdviseOptions& o) {
  Run run(s, device);
  run.curves = o.curves;
  Advise out;
  out.device = device;
  out.cpu = run.cpu;
  out.peak = run.peak;
  out.warnings = s.warnings;
  std::optional<AllocatorBase> base;
  if (!run.cpu) base = allocator_base(run, o.device_memory);

  std::optional<CheckpointPredictor> cp;
  std::optional<CheckpointLever> checkpoint;
  try {
    cp.emplace(s, device);
    checkpoint.emplace(run, *cp, base);
    checkpoint->add(out);
  } catch (const Error& e) {
    checkpoint.reset();
    out.not_assessed.push_back(fmt::format("checkpoint: {}", e.what()));
  }
  AllocConf best_conf;
  if (run.cpu) {
    out.not_assessed.push_back("allocator: a CPU run has no caching allocator to tune");
  } else if (std::optional<Advice> a = allocator_advice(run, *base, o.device_memory, &best_conf)) {
    out.advice.push_back(std::move(*a));
  }
  growth_advice(run, o.device_memory, out);
  if (run.phases.size() == 0) {
    out.not_assessed.push_back("grads_outside_backward, optimizer_temporaries: no forward, backward or optimizer "
                               "phases in the recording");
  } else {
    grads_outside_backward(run, out);
    optimizer_temporaries(run, out);
  }
  bool stacks = std::any_of(run.live.begin(), run.live.end(), [&](uint32_t id) { return run.r.stack_of(id) != 0; });
  if (stacks) loss_logits(run, out);
  else out.not_assessed.push_back("loss_logits: the blocks at the peak have no call stacks to find the loss by");
  if (run.r.has_owners()) duplicate_parameters(run, out);
  else out.not_assessed.push_back("duplicate_parameters: no owner names (parameters) in the recording");
  out.not_assessed.push_back("precision: the recording holds no tensor dtypes to tell float32 from bf16 by");
  rank(out);

  auto every = std::find_if(out.advice.begin(), out.advice.end(), [&](const Advice& a) {
    return a.kind == AdviceKind::checkpoint && a.layers == checkpoint->every_layer();
  });
  bool allocator = std::any_of(out.advice.begin(), out.advice.end(),
                               [](const Advice& a) { return a.kind == AdviceKind::allocator; });
  if (checkpoint && every != out.advice.end() && allocator)
    if (std::optional<Advice> c = combined(run, *checkpoint, *every, best_conf, *base)) out.advice.push_back(*c);
  if (!o.scale_runs.empty()) {
    batch_advice(run, o, out);
  } else {
    out.not_assessed.push_back("batch: give --scale-with OTHER --sizes A,B (runs at other sizes) for the largest "
                               "size that fits");
  }
  return out;
}

}  // namespace memrec
