// Phases by time, recorded or inferred from frames (memrec/analysis.h PhaseIndex, phase_of_stack).
#include <algorithm>
#include <array>
#include <unordered_map>

#include "memrec/analysis.h"
#include "memrec/frames.h"

namespace memrec {
namespace {

PhaseKind phase_kind(std::string_view name, ScopeKind kind) {
  if (kind == ScopeKind::annotation)
    return name.starts_with("Optimizer.step") ? PhaseKind::optimizer : PhaseKind::none;
  if (kind != ScopeKind::phase) return PhaseKind::none;
  if (name == "forward") return PhaseKind::forward;
  if (name == "backward") return PhaseKind::backward;
  if (name == "optimizer") return PhaseKind::optimizer;
  if (name == "recompute") return PhaseKind::recompute;
  return PhaseKind::other;
}

bool has(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The phase one frame marks, or none. Python names may be qualified ("Module._call_impl") or not ("_call_impl").
PhaseKind marker(std::string_view name, std::string_view file) {
  if (name.starts_with("torch::autograd::Engine::") || name.starts_with("torch::autograd::python::PythonEngine::") ||
      name.starts_with("torch::autograd::backward"))
    return PhaseKind::backward;
  if (has(file, "torch/autograd/") && (name.ends_with("backward") || name.ends_with("_engine_run_backward")))
    return PhaseKind::backward;
  if (file.ends_with("torch/_tensor.py") && name.ends_with("backward")) return PhaseKind::backward;
  if (has(file, "torch/optim/") || name.starts_with("torch::optim::")) return PhaseKind::optimizer;
  if (file.ends_with("torch/nn/modules/module.py") && name.ends_with("_call_impl")) return PhaseKind::forward;
  return PhaseKind::none;
}

// One device's optimizer annotations (Optimizer.step#...), by start.
std::vector<std::pair<int64_t, int64_t>> optimizer_annotations(const Snapshot& s, uint8_t device) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    if (sc.device == device && phase_kind(s.strings[sc.name], sc.kind) == PhaseKind::optimizer)
      out.emplace_back(sc.start_ns, sc.end_ns < sc.start_ns ? INT64_MAX : sc.end_ns);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool inside(const std::vector<std::pair<int64_t, int64_t>>& intervals, int64_t t) {
  auto it = std::upper_bound(intervals.begin(), intervals.end(), std::pair(t, INT64_MAX));
  return std::any_of(intervals.begin(), it, [&](const auto& iv) { return t <= iv.second; });
}

}  // namespace

std::string_view to_string(PhaseKind k) {
  static constexpr std::array<std::string_view, 6> names = {"", "forward", "backward", "optimizer", "other",
                                                            "recompute"};
  return names.at(static_cast<size_t>(k));
}

PhaseKind phase_of_stack(const Snapshot& s, uint32_t stack) {
  PhaseKind outermost = PhaseKind::none;
  for (uint32_t id : s.stacks[stack]) {
    const Frame& f = s.frames[id];
    PhaseKind k = marker(short_function(s.strings[f.function]), s.strings[f.file]);
    if (k != PhaseKind::none) outermost = k;
  }
  return outermost;
}

PhaseIndex::PhaseIndex(const Snapshot& s, uint8_t device) {
  bool recorded = false;
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    if (sc.device != device) continue;
    recorded |= sc.kind == ScopeKind::phase;
    PhaseKind k = phase_kind(s.strings[sc.name], sc.kind);
    if (k != PhaseKind::none) phases_.push_back({sc.start_ns, sc.end_ns < sc.start_ns ? INT64_MAX : sc.end_ns, k});
  }
  if (!recorded) infer(s, device);
  std::stable_sort(phases_.begin(), phases_.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  for (const Interval& p : phases_) last_end_ = std::max(last_end_, p.end);
  // Phases nest (a recompute or a reentrant backward inside backward): each one's enclosing phase, by a stack of
  // the phases open at its start.
  std::vector<uint32_t> open;
  enclosing_.reserve(phases_.size());
  for (uint32_t i = 0; i < phases_.size(); ++i) {
    while (!open.empty() && phases_[open.back()].end < phases_[i].start) open.pop_back();
    enclosing_.push_back(open.empty() ? 0 : open.back() + 1);
    open.push_back(i);
  }
}

void PhaseIndex::infer(const Snapshot& s, uint8_t device) {
  inferred_ = true;
  auto optimizer = optimizer_annotations(s, device);
  phases_.clear();
  std::unordered_map<uint32_t, PhaseKind> of_stack;
  PhaseKind current = PhaseKind::none;
  for (const Event& e : s.events) {
    if (e.device != device || e.action != Action::alloc) continue;
    PhaseKind k = current;  // no frames: the run before it goes on
    if (inside(optimizer, e.time_ns)) {
      k = PhaseKind::optimizer;
    } else if (e.stack) {
      auto [it, fresh] = of_stack.try_emplace(e.stack, PhaseKind::none);
      if (fresh) it->second = phase_of_stack(s, e.stack);
      k = it->second;
    }
    if (k == current) continue;
    if (!phases_.empty() && phases_.back().end == INT64_MAX)
      phases_.back().end = std::max(phases_.back().start, e.time_ns - 1);
    if (k != PhaseKind::none) phases_.push_back({e.time_ns, INT64_MAX, k});
    current = k;
  }
  if (!phases_.empty() && phases_.back().end == INT64_MAX) {
    int64_t last = INT64_MIN;
    for (const Event& e : s.events)
      if (e.device == device) last = std::max(last, e.time_ns);
    phases_.back().end = last;
  }
}

PhaseKind PhaseIndex::kind(uint32_t phase) const { return phases_.at(phase - 1).kind; }

int64_t PhaseIndex::end(uint32_t phase) const { return phases_.at(phase - 1).end; }


uint32_t PhaseIndex::at(int64_t t) const {
  auto it = std::upper_bound(phases_.begin(), phases_.end(), t, [](int64_t v, const Interval& p) { return v < p.start; });
  uint32_t phase = static_cast<uint32_t>(it - phases_.begin());  // the last one starting at or before t, 1-based
  while (phase && t > phases_[phase - 1].end) phase = enclosing_[phase - 1];
  return phase;
}

int64_t PhaseIndex::next_start(int64_t t) const {
  auto it = std::upper_bound(phases_.begin(), phases_.end(), t, [](int64_t v, const Interval& p) { return v < p.start; });
  return it == phases_.end() ? INT64_MAX : it->start;
}

}  // namespace memrec
