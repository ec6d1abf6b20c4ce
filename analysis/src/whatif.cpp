#include "memrec/whatif.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "memrec/analysis.h"
#include "memrec/replay.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

// Addresses for recomputed blocks: above any real device address, one per original block.
constexpr uint64_t kRecomputedBase = uint64_t{1} << 62;
// Addresses for the inputs a checkpoint holds past the time the program freed them, one per original block.
constexpr uint64_t kHeldBase = kRecomputedBase + (uint64_t{1} << 40);

// One layer's forward within one forward phase, the activations it allocated, and when its backward began.
struct LayerPass {
  int64_t start = INT64_MAX, end = INT64_MIN;
  std::vector<uint32_t> activations;  // allocation ids
  uint32_t first = 0, last = 0;       // the ids of every block allocated during the pass: [first, last)
  int64_t backward = INT64_MAX;       // the layer's first module scope in a backward phase after the pass
  std::vector<uint32_t> inputs;       // blocks made before the pass that the program freed as soon as it returned
};
using PassKey = std::pair<std::string, uint32_t>;  // layer, forward phase scope id

// The first allocation id made at or after `t` (ids go in allocation order, blocks older than the recording first).
uint32_t first_allocated_at(const Replay& r, int64_t t) {
  const std::vector<uint32_t>& made = r.alloc_steps();
  auto recorded = std::partition_point(made.begin(), made.end(), [](uint32_t step) { return step == kNoEvent; });
  auto it = std::partition_point(recorded, made.end(), [&](uint32_t step) { return r.time_of(step) < t; });
  return static_cast<uint32_t>(it - made.begin());
}

// When each layer's module scopes in backward phases began, in order: where a checkpointed layer is recomputed.
std::map<std::string, std::vector<int64_t>> backward_starts(const Snapshot& s, uint8_t device,
                                                            const PhaseIndex& phases) {
  std::map<std::string, std::vector<int64_t>> out;
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    if (sc.kind != ScopeKind::module || sc.device != device) continue;
    if (phases.kind(phases.at(sc.start_ns)) == PhaseKind::backward)
      out[layer_of(s.strings[sc.name])].push_back(sc.start_ns);
  }
  for (auto& [layer, starts] : out) std::sort(starts.begin(), starts.end());
  return out;
}

// The layer's input where the caller dropped it on its return (`x = self.drop(x)`): the block made last before
// `pass`, when one of the frees right after the pass (before the next alloc) frees it. `frees` is every (free step,
// id), sorted.
std::vector<uint32_t> freed_on_return(const Replay& r, const std::vector<std::pair<uint32_t, uint32_t>>& frees,
                                      const LayerPass& pass) {
  std::vector<uint32_t> out;
  for (uint32_t step = r.first_step_at(pass.end + 1); step < r.steps(); ++step) {
    Action a = r.event(step).action;
    if (a != Action::free_requested && a != Action::free_completed) break;
    auto it = std::lower_bound(frees.begin(), frees.end(), std::pair{step, uint32_t{0}});
    if (it != frees.end() && it->first == step && it->second + 1 == pass.first) out.push_back(it->second);
  }
  return out;
}

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
  auto backwards = backward_starts(s, r.device(), phases);
  std::vector<std::pair<uint32_t, uint32_t>> frees;  // (free step, id) of every freed block
  for (uint32_t id = 0; id < r.free_steps().size(); ++id)
    if (r.free_steps()[id] != kNoEvent) frees.emplace_back(r.free_steps()[id], id);
  std::sort(frees.begin(), frees.end());
  for (auto& [key, pass] : passes) {
    pass.first = first_allocated_at(r, pass.start);
    pass.last = first_allocated_at(r, pass.end + 1);
    const std::vector<int64_t>& starts = backwards[key.first];
    auto after = std::upper_bound(starts.begin(), starts.end(), pass.end);
    if (after != starts.end()) pass.backward = *after;
    pass.inputs = freed_on_return(r, frees, pass);
  }
  return passes;
}

// The layers with activations in their forward passes, by name; none is an error.
std::vector<std::string> known_layers(const std::map<PassKey, LayerPass>& passes) {
  std::set<std::string, decltype(&natural_less)> known(&natural_less);
  for (const auto& [key, pass] : passes) known.insert(key.first);
  if (known.empty()) throw Error("no activations inside module scopes: record with module scopes to predict checkpointing");
  return {known.begin(), known.end()};
}

// `wanted` by the names of the run's layers (a layer without activations drops nothing); none: every known layer.
std::vector<std::string> resolve_layers(const std::vector<std::string>& known, const std::vector<std::string>& run,
                                        const std::vector<std::string>& wanted) {
  if (wanted.empty()) return known;
  std::vector<std::string> out;
  for (const std::string& w : wanted) {
    std::string layer = find_layer(run, w);
    if (std::find(out.begin(), out.end(), layer) != out.end()) throw Error("layer " + layer + " is given twice");
    out.push_back(layer);
  }
  return out;
}

// The device's steps in time order, equal times in recorded order: the order the predicted history has them in.
// Empty where that is the recorded order (nearly every recording), so that no copy is held.
std::vector<uint32_t> time_order(const Replay& r) {
  bool sorted = true;
  int64_t last = INT64_MIN;
  r.for_each_step(0, r.steps(), [&](uint32_t, const Event& e) __attribute__((always_inline)) {
    sorted = sorted && e.time_ns >= last;
    last = e.time_ns;
  });
  if (sorted) return {};
  std::vector<int64_t> times;
  times.reserve(r.steps());
  r.for_each_step(0, r.steps(), [&](uint32_t, const Event& e) __attribute__((always_inline)) {
    times.push_back(e.time_ns);
  });
  std::vector<uint32_t> order(r.steps());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return times[a] < times[b]; });
  return order;
}

// An event of the predicted history; `order` places recomputation first and early frees last at equal times.
struct Placed {
  int64_t t;
  int order;
  uint32_t seq;
  Event e;
  bool operator<(const Placed& o) const { return std::tie(t, order, seq) < std::tie(o.t, o.order, o.seq); }
};

// The allocated peak of a predicted history, and its time since the history's first event.
struct PredictedPeak {
  uint64_t bytes = 0;
  int64_t since_first_ns = 0;
};

// Where the device's owner rows go in the predicted history: each before the event that the recorded event it came
// before went to, so that it names the same block.
class OwnerPlaces {
 public:
  OwnerPlaces(const Snapshot& s, const Replay& r) : s_(s) {
    for (uint32_t row = 0; row < s.owners.size(); ++row) {
      if (s.owners[row].device != r.device()) continue;
      rows_.push_back(row);
      steps_.push_back(r.step_at_event(s.owners[row].event));
    }
    wanted_ = steps_;
    std::sort(wanted_.begin(), wanted_.end());
    wanted_.erase(std::unique(wanted_.begin(), wanted_.end()), wanted_.end());
    positions_.assign(wanted_.size(), 0);
  }

  // The recorded `step` went to `position`.
  void note(uint32_t step, uint64_t position) {
    if (wanted_.empty()) return;
    auto it = std::lower_bound(wanted_.begin(), wanted_.end(), step);
    if (it != wanted_.end() && *it == step) positions_[it - wanted_.begin()] = position;
  }

  // The rows, placed, with `steps` the recorded steps and `end` the predicted history's events.
  PackedVector<Owner> placed(uint32_t steps, uint64_t end) const {
    PackedVector<Owner> out;
    for (size_t i = 0; i < rows_.size(); ++i) {
      Owner o = s_.owners[rows_[i]];
      auto it = std::lower_bound(wanted_.begin(), wanted_.end(), steps_[i]);
      o.event = steps_[i] >= steps ? end : positions_[it - wanted_.begin()];
      out.push_back(o);
    }
    return out;
  }

 private:
  const Snapshot& s_;
  std::vector<uint32_t> rows_, steps_;  // owner rows and the recorded steps they come before
  std::vector<uint32_t> wanted_;        // those steps, sorted, once each
  std::vector<uint64_t> positions_;     // where each of wanted_ went
};

// The Python statements of one forward pass, read from its blocks' stacks: when the program lets go of a block it made
// once autograd keeps none (a checkpointed forward). A block an op made for the next call of its statement goes when
// that call returns (`fc2(gelu(fc1(x)))`, `act(c_fc(x))`); a statement's result goes up to the caller where the
// function returns it, else stays a local until the function returns (`q, k, v = qkv(x).split()`).
class Statements {
 public:
  // A pass of more blocks is left to the next-op rule: each block's search walks its statement's blocks.
  static constexpr uint32_t kMaxBlocks = 4096;

  Statements(const Snapshot& s, const Replay& r, const LayerPass& pass)
      : s_(s), r_(r), first_(pass.first), end_(pass.end) {
    if (pass.last - pass.first > kMaxBlocks) return;
    for (uint32_t id = pass.first; id < pass.last; ++id) {
      Event e = r.event(r.alloc_steps()[id]);
      frames_.push_back(python_frames(e.stack));
      ops_.push_back(outermost_op(e.scope));
    }
    auto first = std::find_if(frames_.begin(), frames_.end(), [](auto& x) { return !x.empty(); });
    if (first == frames_.end()) return;
    common_ = first->size();
    for (const std::vector<uint32_t>& f : frames_) {
      if (f.empty()) continue;
      size_t shared = std::mismatch(f.begin(), f.end(), first->begin(), first->end()).first - f.begin();
      common_ = std::min(common_, shared);
    }
  }

  // When block `id` goes: right after the alloc that ends the call or function holding it; the pass's end for a local
  // of the layer's own function; nullopt where its stack has no Python frames.
  std::optional<int64_t> released(uint32_t id) const {
    size_t i = id - first_;
    if (i >= frames_.size() || frames_[i].empty()) return std::nullopt;
    const std::vector<uint32_t>& f = frames_[i];
    for (size_t k = f.size(); k-- > common_;) {
      auto statement = run(i, 0, frames_.size() - 1, [&](size_t j) { return prefix(j, i, k + 1); });
      auto call = run(i, statement.first, statement.second, [&](size_t j) { return same_call(j, i, k + 1); });
      if (call.second < statement.second) {
        size_t next = call.second + 1;
        return made(run(next, next, statement.second, [&](size_t j) { return same_call(j, next, k + 1); }).second);
      }
      auto frame = run(i, 0, frames_.size() - 1, [&](size_t j) { return prefix(j, i, k) && same_function(j, i, k); });
      if (frame.second > statement.second) return made(frame.second);
    }
    return end_;
  }

 private:
  int64_t made(size_t j) const { return r_.time_of(r_.alloc_steps()[first_ + j]); }

  // The stack's Python frames, outermost first, without torch's module-call frames.
  std::vector<uint32_t> python_frames(uint32_t stack) const {
    std::vector<uint32_t> out;
    if (!stack) return out;
    for (uint32_t id : s_.stacks[stack]) {
      std::string_view file = s_.strings[s_.frames[id].file];
      if (is_python_file(file) && !file.ends_with("torch/nn/modules/module.py")) out.push_back(id);
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

  uint32_t outermost_op(uint32_t scope) const {
    uint32_t op = 0;
    for (; scope && s_.scopes[scope].kind == ScopeKind::op; scope = s_.scopes[scope].parent) op = scope;
    return op;
  }

  // The widest run of the pass's blocks around `i`, within [lo, hi], that `in` holds for.
  template <class F>
  static std::pair<size_t, size_t> run(size_t i, size_t lo, size_t hi, F in) {
    size_t a = i, b = i;
    while (a > lo && in(a - 1)) --a;
    while (b < hi && in(b + 1)) ++b;
    return {a, b};
  }

  // Blocks j and i share their outermost `n` frames (the same lines).
  bool prefix(size_t j, size_t i, size_t n) const {
    const auto &a = frames_[j], &b = frames_[i];
    return a.size() >= n && b.size() >= n && std::equal(a.begin(), a.begin() + n, b.begin());
  }

  // Frame `k` of blocks j and i is the same function (maybe at other lines).
  bool same_function(size_t j, size_t i, size_t k) const {
    if (frames_[j].size() <= k || frames_[i].size() <= k) return false;
    const Frame &a = s_.frames[frames_[j][k]], &b = s_.frames[frames_[i][k]];
    return a.function == b.function && a.file == b.file;
  }

  // Blocks j and i of one statement (sharing `k` frames) come from one call in it: the same function called (frame
  // k), or the same op where the statement runs an op itself.
  bool same_call(size_t j, size_t i, size_t k) const {
    size_t a = frames_[j].size(), b = frames_[i].size();
    if (a > k && b > k) return same_function(j, i, k);
    return a == k && b == k && ops_[j] == ops_[i] && ops_[i];
  }

  const Snapshot& s_;
  const Replay& r_;
  uint32_t first_;
  int64_t end_;
  std::vector<std::vector<uint32_t>> frames_;  // per block of the pass
  std::vector<uint32_t> ops_;                  // per block: its outermost op scope
  size_t common_ = 0;                          // frames every block shares: the layer's callers
};

// The recorded history with some blocks freed early and allocated again: the new events, and the recorded frees that
// now free the block allocated again; and the allocated peak of that history.
class Rewriter {
 public:
  Rewriter(const Snapshot& s, const Replay& r) : s_(s), r_(r) {}

  // Frees the pass's activations (but its output) when it ends, and runs the pass again when the layer's backward
  // begins (or, without backward scopes, at the first free of one of them), as torch.utils.checkpoint does: the
  // pass's blocks are allocated again in their order, those it freed within the pass freed again, up to the last of
  // the activations, where the recompute stops (PyTorch's early stop) and frees the rest, the output among them.
  // The output is the activation freed first: only the ops after the layer save it, and their backward runs
  // before the layer's own (the last one allocated is no guide: layer_norm allocates mean and rstd after it).
  uint64_t checkpoint(const LayerPass& pass) {
    std::vector<uint32_t> dropped;
    uint32_t output = kNoEvent;
    for (uint32_t id : pass.activations) {
      uint32_t freed = r_.free_steps()[id];
      if (freed == kNoEvent || r_.time_of(freed) <= pass.end) continue;
      if (output == kNoEvent || freed < r_.free_steps()[output]) output = id;
      dropped.push_back(id);
    }
    std::erase(dropped, output);
    if (dropped.empty()) return 0;
    int64_t recompute = pass.backward;
    for (uint32_t id : dropped) recompute = std::min(recompute, r_.time_of(r_.free_steps()[id]));
    std::sort(dropped.begin(), dropped.end());
    std::vector<int64_t> goes = releases(pass, dropped);
    for (size_t i = 0; i < dropped.size(); ++i) drop(dropped[i], goes[i]);
    recompute_pass(pass, dropped, output, recompute);
    uint32_t last_free = 0;
    for (uint32_t id : dropped) last_free = std::max(last_free, r_.free_steps()[id]);
    for (uint32_t id : pass.inputs) hold(id, r_.time_of(last_free));
    return dropped.size();
  }

  // The predicted allocated peak where the recorded events are in time order (nearly every recording): the recorded
  // totals with the new events' bytes among them, without building the history.
  PredictedPeak peak_in_place() {
    std::sort(added_.begin(), added_.end());
    int64_t first = std::min(r_.time_of(kNoEvent), added_.empty() ? INT64_MAX : added_.front().t);
    PredictedPeak peak{r_.initial().allocated, 0};
    uint64_t recorded = r_.initial().allocated, change = 0;
    auto note = [&](auto time_of) {
      if (recorded + change > peak.bytes) peak = {recorded + change, time_of() - first};
    };
    auto next = added_.begin();
    auto add_before = [&](uint32_t step) {
      for (; next != added_.end() && steps_before(*next) <= step; ++next) {
        change += default_delta(next->e).allocated;
        note([&] { return next->t; });
      }
    };
    r_.for_each_after(0, r_.steps(), [&](uint32_t step, const Totals& t) {
      add_before(step);
      recorded = t.allocated;
      note([&] { return r_.time_of(step); });
    });
    add_before(r_.steps());
    return peak;
  }

  // The predicted allocated peak of any history: replays the device's events in time order (`order`, as
  // time_order() gives it) with the new ones among them.
  PredictedPeak replayed_peak(const Snapshot& s, const std::vector<uint32_t>& order) {
    Snapshot predicted = history(s, order);
    Replay after(predicted, r_.device());
    return {after.peak_allocated().bytes, after.time_of(after.peak_allocated().step) - after.time_of(kNoEvent)};
  }

  // The events and the start state and owner rows a replay of the predicted history needs.
  Snapshot history(const Snapshot& s, const std::vector<uint32_t>& order) {
    std::sort(added_.begin(), added_.end());
    std::sort(moved_.begin(), moved_.end());
    Snapshot out;
    out.segments_start = s.segments_start, out.segments_end = s.segments_end;
    out.has_segments_start = s.has_segments_start;
    OwnerPlaces owners(s, r_);
    auto next = added_.begin();
    for (uint32_t i = 0; i < r_.steps(); ++i) {
      uint32_t step = order[i];
      Event e = r_.event(step);
      for (; next != added_.end() && *next < Placed{e.time_ns, 1, step, {}}; ++next) out.events.push_back(next->e);
      auto moved = std::lower_bound(moved_.begin(), moved_.end(), std::pair{step, uint64_t{0}});
      if (moved != moved_.end() && moved->first == step) e.addr = moved->second;
      owners.note(step, out.events.size());
      out.events.push_back(e);
    }
    for (; next != added_.end(); ++next) out.events.push_back(next->e);
    out.owners = owners.placed(r_.steps(), out.events.size());
    return out;
  }

 private:

  // How many recorded steps come before a new event: where it goes among recorded events in time order.
  uint32_t steps_before(const Placed& p) {
    if (p.t == last_.t && p.order == last_.order) return last_steps_;
    uint32_t lo = 0, hi = r_.steps();
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo) / 2;
      int64_t t = r_.time_of(mid);
      (t < p.t || (t == p.t && p.order > 1) ? lo = mid + 1 : hi = mid);
    }
    last_ = p, last_steps_ = lo;
    return lo;
  }

  // The block freed in the forward at `forward_end`; its recorded frees now free the copy the recompute makes.
  void drop(uint32_t id, int64_t forward_end) {
    Allocation a = r_.allocation(id);
    Event e = r_.event(a.alloc_step);
    add(forward_end, 2, with(e, Action::free_requested, a.addr, forward_end));
    add(forward_end, 2, with(e, Action::free_completed, a.addr, forward_end));
    moved_.emplace_back(a.free_step, again(id));
    if (a.completed_step != kNoEvent) moved_.emplace_back(a.completed_step, again(id));
  }

  // The pass's allocs and frees again at `t`, in their recorded order, up to the last of `dropped` (sorted ids):
  // the dropped blocks stay, the blocks the pass freed within itself and the output are freed.
  void recompute_pass(const LayerPass& pass, const std::vector<uint32_t>& dropped, uint32_t output, int64_t t) {
    uint32_t stop = r_.alloc_steps()[dropped.back()];
    std::vector<std::pair<uint32_t, uint32_t>> steps;  // (recorded step, id): the id's alloc or its free
    for (uint32_t id = pass.first; id < pass.last && r_.alloc_steps()[id] <= stop; ++id) {
      bool kept = std::binary_search(dropped.begin(), dropped.end(), id);
      uint32_t freed = r_.free_steps()[id];
      bool within = freed != kNoEvent && r_.time_of(freed) <= pass.end;
      if (!kept && !within && id != output) continue;
      steps.emplace_back(r_.alloc_steps()[id], id);
      if (!kept) steps.emplace_back(within && freed <= stop ? freed : kNoEvent, id);
    }
    std::stable_sort(steps.begin(), steps.end());
    std::vector<bool> made(pass.last - pass.first);
    for (auto [step, id] : steps) {
      Event e = r_.event(r_.alloc_steps()[id]);
      bool alloc = !made[id - pass.first];
      made[id - pass.first] = true;
      if (alloc) {
        add(t, 0, with(e, Action::alloc, again(id), t));
        continue;
      }
      add(t, 0, with(e, Action::free_requested, again(id), t));
      add(t, 0, with(e, Action::free_completed, again(id), t));
    }
  }

  // When the checkpointed forward lets go of each of `dropped` (sorted ids). Blocks that backward frees together
  // (one node's saved tensors) are inputs of one op: an earlier one lives until that op has run, for which the
  // release of a later one is the bound (`0.5 * x * (1 + tanh(...))` holds `0.5 * x` to the last multiply).
  std::vector<int64_t> releases(const LayerPass& pass, const std::vector<uint32_t>& dropped) {
    Statements statements(s_, r_, pass);
    std::vector<int64_t> out;
    for (uint32_t id : dropped) out.push_back(released(pass, statements, id));
    std::vector<size_t> by_free(dropped.size());
    std::iota(by_free.begin(), by_free.end(), 0);
    auto freed = [&](size_t i) { return r_.free_steps()[dropped[i]]; };
    std::sort(by_free.begin(), by_free.end(), [&](size_t a, size_t b) { return freed(a) < freed(b); });
    for (size_t g = 0; g < by_free.size();) {
      size_t e = g + 1;
      while (e < by_free.size() && only_frees(freed(by_free[e - 1]), freed(by_free[e]))) ++e;
      std::vector<size_t> group(by_free.begin() + g, by_free.begin() + e);
      std::sort(group.begin(), group.end());  // allocation order
      int64_t later = INT64_MAX;
      for (size_t k = group.size(); k-- > 0;) {
        if (later != INT64_MAX) out[group[k]] = std::max(out[group[k]], later);
        later = std::min(later, out[group[k]]);
      }
      g = e;
    }
    return out;
  }

  // Whether the recorded steps between `a` and `b` only free blocks.
  bool only_frees(uint32_t a, uint32_t b) const {
    for (uint32_t step = a + 1; step < b; ++step) {
      Action act = r_.event(step).action;
      if (act != Action::free_requested && act != Action::free_completed) return false;
    }
    return true;
  }

  // When the checkpointed forward lets go of block `id`: the checkpoint saves no tensor, so it goes when the program
  // drops it: as its Python statements say, else right after the next op (another scope) allocates its output; the
  // pass's end at the latest.
  int64_t released(const LayerPass& pass, const Statements& statements, uint32_t id) {
    if (std::optional<int64_t> t = statements.released(id)) return *t;
    uint32_t scope = r_.event(r_.alloc_steps()[id]).scope;
    for (uint32_t next = id + 1; next < pass.last; ++next)
      if (r_.event(r_.alloc_steps()[next]).scope != scope) return r_.time_of(r_.alloc_steps()[next]);
    return pass.end;
  }

  // The checkpoint holds the inputs of its call until the layer's backward is done: block `id`, freed by the program
  // as recorded, lives on (as a copy made at once) until `until`, the last free of the layer's saved blocks.
  void hold(uint32_t id, int64_t until) {
    Allocation a = r_.allocation(id);
    int64_t freed = r_.time_of(a.free_step);
    if (until <= freed) return;
    Event e = r_.event(a.alloc_step);
    add(freed, 2, with(e, Action::alloc, kHeldBase + id, freed));
    add(until, 2, with(e, Action::free_requested, kHeldBase + id, until));
    add(until, 2, with(e, Action::free_completed, kHeldBase + id, until));
  }

  static uint64_t again(uint32_t id) { return kRecomputedBase + id; }

  void add(int64_t t, int order, const Event& e) {
    added_.push_back({t, order, static_cast<uint32_t>(r_.steps() + added_.size()), e});
  }

  static Event with(Event e, Action action, uint64_t addr, int64_t t) {
    e.action = action;
    e.addr = addr;
    e.time_ns = t;
    return e;
  }

  const Snapshot& s_;
  const Replay& r_;
  std::vector<Placed> added_;
  std::vector<std::pair<uint32_t, uint64_t>> moved_;  // a recorded free's step, the address it frees now
  Placed last_{INT64_MIN, 0, 0, {}};  // steps_before()'s last answer
  uint32_t last_steps_ = 0;
};

// The chosen layers' forward passes rewritten: their activations freed after forward and allocated again for backward.
Rewriter rewritten(const Snapshot& s, const Replay& r, const std::map<PassKey, LayerPass>& passes,
                   const std::vector<std::string>& layers, uint64_t* dropped) {
  std::set<std::string> chosen(layers.begin(), layers.end());
  Rewriter rewrite(s, r);
  for (const auto& [key, pass] : passes)
    if (chosen.count(key.first) && pass.end >= pass.start) *dropped += rewrite.checkpoint(pass);
  return rewrite;
}

}  // namespace

struct CheckpointPredictor::Recorded {
  Recorded(const Snapshot& s, uint8_t device)
      : s(s), replay(s, device), passes(layer_passes(s, replay)), known(known_layers(passes)),
        run(run_layers(s, device)), order(time_order(replay)) {}
  const Snapshot& s;
  Replay replay;
  std::map<PassKey, LayerPass> passes;
  std::vector<std::string> known, run;  // layers with activations; every layer of the run
  std::vector<uint32_t> order;
};

CheckpointPredictor::CheckpointPredictor(const Snapshot& s, uint8_t device)
    : recorded_(std::make_unique<Recorded>(s, device)) {}

CheckpointPredictor::~CheckpointPredictor() = default;

CheckpointPrediction CheckpointPredictor::predict(const std::vector<std::string>& wanted) const {
  const Replay& r = recorded_->replay;
  CheckpointPrediction p;
  p.device = r.device();
  p.layers = resolve_layers(recorded_->known, recorded_->run, wanted);
  p.recorded_peak = r.peak_allocated().bytes;
  Rewriter rewrite = rewritten(recorded_->s, r, recorded_->passes, p.layers, &p.blocks_dropped);
  const std::vector<uint32_t>& order = recorded_->order;
  PredictedPeak peak = order.empty() ? rewrite.peak_in_place() : rewrite.replayed_peak(recorded_->s, order);
  p.predicted_peak = peak.bytes;
  p.predicted_peak_ns = peak.since_first_ns;
  p.saving = p.recorded_peak - std::min(p.recorded_peak, p.predicted_peak);
  if (p.recorded_peak)
    p.saving_percent = 100.0 * (double(p.recorded_peak) - double(p.predicted_peak)) / double(p.recorded_peak);
  return p;
}

const std::vector<std::string>& CheckpointPredictor::layers() const { return recorded_->known; }

std::vector<CheckpointPredictor::Forward> CheckpointPredictor::forwards() const {
  std::vector<Forward> out;
  for (const auto& [key, pass] : recorded_->passes)
    if (pass.end >= pass.start) out.push_back({key.first, pass.start, pass.end});
  return out;
}

Snapshot CheckpointPredictor::history(const std::vector<std::string>& wanted) const {
  uint64_t dropped = 0;
  std::vector<std::string> layers = resolve_layers(recorded_->known, recorded_->run, wanted);
  Rewriter rewrite = rewritten(recorded_->s, recorded_->replay, recorded_->passes, layers, &dropped);
  std::vector<uint32_t> order = recorded_->order;
  if (order.empty()) {
    order.resize(recorded_->replay.steps());
    std::iota(order.begin(), order.end(), 0);
  }
  Snapshot out = rewrite.history(recorded_->s, order);
  out.metadata = recorded_->s.metadata;  // the device's memory and allocator settings, for the allocator model
  return out;
}

CheckpointPrediction predict_checkpoint(const Snapshot& s, uint8_t device, const std::vector<std::string>& wanted) {
  return CheckpointPredictor(s, device).predict(wanted);
}

}  // namespace memrec
