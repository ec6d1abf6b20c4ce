// The bytes held over a recording, column by column, and the named spans (steps, phases) along it: what the
// terminal's sparkline and report's timeline picture draw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memrec/replay.h"
#include "memrec/snapshot.h"

namespace memrec {

// The time axis cut into `columns` equal spans: column c holds the offsets from the first event in
// [c * (duration + 1) / columns, (c + 1) * (duration + 1) / columns).
struct TimeAxis {
  int64_t duration_ns = 0;
  int columns = 1;
  int column_of(int64_t offset_ns) const;
  // The last offset of column c: `stats --at` of that time shows the instant the column ends at.
  int64_t end_of(int column) const;
};

// From the device's first event to its last.
int64_t duration_of(const Replay& r);

// The most bytes held during each column; a column without events holds what the one before it ended with.
struct Series {
  std::vector<uint64_t> allocated, reserved;
};
Series series(const Replay& r, const TimeAxis& axis);

// A scope of one kind on the device, as offsets from its first event (a scope still open ends with the recording).
struct Span {
  int64_t start_ns = 0, end_ns = 0;
  std::string name;
};
// The device's scopes of `kind`, in start order.
std::vector<Span> spans(const Snapshot& s, const Replay& r, ScopeKind kind);

}  // namespace memrec
