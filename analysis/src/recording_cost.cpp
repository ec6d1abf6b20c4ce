#include "memrec/recording_cost.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

namespace memrec {
namespace {

std::optional<int64_t> number(const Snapshot& s, const std::string& key) {
  auto it = s.metadata.find(key);
  int64_t v = 0;
  if (it == s.metadata.end()) return std::nullopt;
  const std::string& text = it->second;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (err != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::optional<RecordingCost> recording_cost(const Snapshot& s) {
  auto events = number(s, "recorder.hook_ns.events"), ops = number(s, "recorder.hook_ns.ops"),
       scopes = number(s, "recorder.hook_ns.scopes");
  if (!events || !ops || !scopes) return std::nullopt;
  RecordingCost c;
  c.events = s.events.size();
  c.events_ns = *events, c.ops_ns = *ops, c.scopes_ns = *scopes;
  c.op_calls = number(s, "recorder.hook_calls.ops").value_or(0);
  c.scope_calls = number(s, "recorder.hook_calls.scopes").value_or(0);
  std::vector<int64_t> steps;
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step && sc.end_ns >= sc.start_ns) steps.push_back(sc.end_ns - sc.start_ns);
  c.steps = steps.size();
  if (!steps.empty()) {
    std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
    c.step_ns = steps[steps.size() / 2];
  }
  if (!s.events.empty()) {
    auto [first, last] = std::minmax_element(s.events.begin(), s.events.end(),
                                             [](const Event& a, const Event& b) { return a.time_ns < b.time_ns; });
    c.span_ns = last->time_ns - first->time_ns;
  }
  return c;
}

double RecordingCost::share() const {
  int64_t whole = steps ? step_ns : span_ns;
  return whole > 0 ? double(hooks_per_step_ns()) / double(whole) : 0.0;
}

}  // namespace memrec
