#include "memrec/whatif.h"

#include <algorithm>
#include <map>
#include <set>

#include "memrec/analysis.h"
#include "memrec/replay.h"

namespace memrec {
namespace {

// Addresses for recomputed blocks: above any real device address, one per original block.
constexpr uint64_t kRecomputedBase = uint64_t{1} << 62;

// One layer's forward within one forward phase, and the activations it allocated.
struct LayerPass {
  int64_t start = INT64_MAX, end = INT64_MIN;
  std::vector<uint32_t> activations;  // allocation ids
};
using PassKey = std::pair<std::string, uint32_t>;  // layer, forward phase scope id

std::map<PassKey, LayerPass> layer_passes(const Snapshot& s, const Replay& r) {
  PhaseIndex phases(s, r.device());
  auto categories = categorize(s, r);
  std::map<PassKey, LayerPass> passes;
  for (uint32_t id = 0; id < r.allocations().size(); ++id) {
    const Allocation& a = r.allocations()[id];
    if (categories[id] != Category::activation) continue;
    std::string module = enclosing_scope(s, a.scope, ScopeKind::module);
    if (module.empty()) continue;
    passes[{layer_of(module), phases.at(r.time_of(a.alloc_step))}].activations.push_back(id);
  }
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    if (sc.kind != ScopeKind::module || sc.device != r.device() || sc.end_ns < sc.start_ns) continue;
    auto it = passes.find({layer_of(s.strings[sc.name]), phases.at(sc.start_ns)});
    if (it == passes.end()) continue;
    it->second.start = std::min(it->second.start, sc.start_ns);
    it->second.end = std::max(it->second.end, sc.end_ns);
  }
  return passes;
}

// `wanted` by the names of the run's layers (a layer without activations drops nothing); none: every layer with some.
std::vector<std::string> resolve_layers(const std::map<PassKey, LayerPass>& passes, const std::vector<std::string>& run,
                                        const std::vector<std::string>& wanted) {
  std::set<std::string, decltype(&natural_less)> known(&natural_less);
  for (const auto& [key, pass] : passes) known.insert(key.first);
  if (known.empty()) throw Error("no activations inside module scopes: record with module scopes to predict checkpointing");
  if (wanted.empty()) return {known.begin(), known.end()};
  std::vector<std::string> out;
  for (const std::string& w : wanted) {
    std::string layer = find_layer(run, w);
    if (std::find(out.begin(), out.end(), layer) != out.end()) throw Error("layer " + layer + " is given twice");
    out.push_back(layer);
  }
  return out;
}

// An event of the predicted history; `order` places recomputation first and early frees last at equal times.
struct Placed {
  int64_t t;
  int order;
  uint32_t seq;
  Event e;
  bool operator<(const Placed& o) const { return std::tie(t, order, seq) < std::tie(o.t, o.order, o.seq); }
};

class Rewriter {
 public:
  Rewriter(const Snapshot& s, const Replay& r) : s_(s), r_(r) {
    for (uint32_t step = 0; step < r.steps(); ++step)
      placed_.push_back({r.time_of(step), 1, step, r.event(step)});
  }

  // Frees the pass's activations (but its output) when it ends; allocates them again before the first is freed.
  // The output is the activation freed first: only the ops after the layer save it, and their backward runs
  // before the layer's own (the last one allocated is no guide: layer_norm allocates mean and rstd after it).
  uint64_t checkpoint(const LayerPass& pass) {
    std::vector<uint32_t> dropped;
    uint32_t output = kNoEvent;
    for (uint32_t id : pass.activations) {
      const Allocation& a = r_.allocations()[id];
      if (a.free_step == kNoEvent || r_.time_of(a.free_step) <= pass.end) continue;
      if (output == kNoEvent || a.free_step < r_.allocations()[output].free_step) output = id;
      dropped.push_back(id);
    }
    std::erase(dropped, output);
    int64_t recompute = INT64_MAX;
    for (uint32_t id : dropped) recompute = std::min(recompute, r_.time_of(r_.allocations()[id].free_step));
    for (uint32_t id : dropped) drop(id, pass.end, recompute);
    return dropped.size();
  }

  std::vector<Event> events() {
    std::sort(placed_.begin(), placed_.end());
    std::vector<Event> out;
    out.reserve(placed_.size());
    for (const Placed& p : placed_) out.push_back(p.e);
    return out;
  }

 private:
  void drop(uint32_t id, int64_t forward_end, int64_t recompute) {
    const Allocation& a = r_.allocations()[id];
    Event e = s_.events[a.event];
    uint64_t again = kRecomputedBase + id;
    auto seq = static_cast<uint32_t>(placed_.size());
    placed_.push_back({forward_end, 2, seq, with(e, Action::free_requested, a.addr, forward_end)});
    placed_.push_back({forward_end, 2, seq + 1, with(e, Action::free_completed, a.addr, forward_end)});
    placed_.push_back({recompute, 0, seq, with(e, Action::alloc, again, recompute)});
    placed_[a.free_step].e.addr = again;  // placed_ still holds the originals at their step positions
    if (a.completed_step != kNoEvent) placed_[a.completed_step].e.addr = again;
  }

  static Event with(Event e, Action action, uint64_t addr, int64_t t) {
    e.action = action;
    e.addr = addr;
    e.time_ns = t;
    return e;
  }

  const Snapshot& s_;
  const Replay& r_;
  std::vector<Placed> placed_;
};

}  // namespace

CheckpointPrediction predict_checkpoint(const Snapshot& s, uint8_t device, const std::vector<std::string>& wanted) {
  Replay r(s, device);
  auto passes = layer_passes(s, r);
  CheckpointPrediction p;
  p.device = device;
  p.layers = resolve_layers(passes, run_layers(s, device), wanted);
  p.recorded_peak = r.peak_allocated().bytes;
  std::set<std::string> chosen(p.layers.begin(), p.layers.end());
  Rewriter rewrite(s, r);
  for (const auto& [key, pass] : passes)
    if (chosen.count(key.first) && pass.end >= pass.start) p.blocks_dropped += rewrite.checkpoint(pass);

  Snapshot predicted = s;
  std::vector<Event> events;
  std::copy_if(s.events.begin(), s.events.end(), std::back_inserter(events), [&](const Event& e) { return e.device != device; });
  auto rewritten = rewrite.events();
  events.insert(events.end(), rewritten.begin(), rewritten.end());
  predicted.events.assign(events);
  Replay after(predicted, device);
  p.predicted_peak = after.peak_allocated().bytes;
  p.predicted_peak_ns = after.time_of(after.peak_allocated().step) - after.time_of(kNoEvent);
  p.saving = p.recorded_peak - std::min(p.recorded_peak, p.predicted_peak);
  if (p.recorded_peak)
    p.saving_percent = 100.0 * (double(p.recorded_peak) - double(p.predicted_peak)) / double(p.recorded_peak);
  return p;
}

}  // namespace memrec
