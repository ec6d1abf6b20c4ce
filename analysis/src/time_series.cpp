#include "memrec/time_series.h"

#include <algorithm>
#include <optional>

namespace memrec {

int TimeAxis::column_of(int64_t offset_ns) const {
  // In 128 bits: a recording of hours in nanoseconds times a wide terminal passes 2^63.
  auto c = static_cast<__int128>(std::max<int64_t>(offset_ns, 0)) * columns / (static_cast<__int128>(duration_ns) + 1);
  return static_cast<int>(std::min<__int128>(c, columns - 1));
}

int64_t TimeAxis::end_of(int column) const {
  auto span = static_cast<__int128>(duration_ns) + 1;
  return static_cast<int64_t>(static_cast<__int128>(column + 1) * span / columns - 1);
}

int64_t duration_of(const Replay& r) { return r.steps() == 0 ? 0 : r.time_of(r.steps() - 1) - r.time_of(kNoEvent); }

Series series(const Replay& r, const TimeAxis& axis) {
  std::vector<int> column(r.steps());  // read in one pass over the events, as decoding each alone costs more
  int64_t start = r.time_of(kNoEvent);
  r.for_each_step(0, r.steps(),
                  [&](uint32_t step, const Event& e) { column[step] = axis.column_of(e.time_ns - start); });
  std::vector<std::optional<Totals>> last(axis.columns);  // each column's state after its last event
  Series out{std::vector<uint64_t>(axis.columns, 0), std::vector<uint64_t>(axis.columns, 0)};
  r.for_each_after(0, r.steps(), [&](uint32_t step, const Totals& t) {
    int c = column[step];
    out.allocated[c] = std::max(out.allocated[c], t.allocated);
    out.reserved[c] = std::max(out.reserved[c], t.reserved);
    last[c] = t;
  });
  Totals held = r.initial();  // what each column starts with: the state the columns before it ended in
  for (int c = 0; c < axis.columns; ++c) {
    out.allocated[c] = std::max(out.allocated[c], held.allocated);
    out.reserved[c] = std::max(out.reserved[c], held.reserved);
    if (last[c]) held = *last[c];
  }
  return out;
}

std::vector<Span> spans(const Snapshot& s, const Replay& r, ScopeKind kind) {
  int64_t start = r.time_of(kNoEvent), duration = duration_of(r);
  std::vector<Span> out;
  for (size_t i = 1; i < s.scopes.size(); ++i) {  // scope 0 is the "no scope" sentinel
    const Scope& sc = s.scopes[i];
    if (sc.kind != kind || sc.device != r.device()) continue;
    int64_t end = sc.end_ns < sc.start_ns ? duration : std::min(sc.end_ns - start, duration);
    if (end >= 0 && sc.start_ns - start <= duration)
      out.push_back({std::max<int64_t>(sc.start_ns - start, 0), end, s.strings[sc.name]});
  }
  std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.start_ns < b.start_ns; });
  return out;
}

}  // namespace memrec
