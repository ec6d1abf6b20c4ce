// What `memrec top` shows, apart from the terminal: a recording replayed on one device, the instants of its time
// axis, and the bytes held over time, column by column.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memrec/replay.h"
#include "memrec/snapshot.h"

namespace memrec::terminal {

// A loaded recording. The snapshot sits behind a pointer: the replay keeps a reference to it.
struct TopDocument {
  std::unique_ptr<Snapshot> snapshot;
  std::unique_ptr<Replay> replay;
  int64_t duration_ns = 0;  // from the device's first event to its last
};

// Loads `path` (a .memrec file, whole or still being written, or a pickle) on `device` (unset: choose_device's).
TopDocument load_document(const std::string& path, std::optional<uint8_t> device);

// The time axis cut into `columns` equal spans: column c holds the offsets from the first event in
// [c * (duration + 1) / columns, (c + 1) * (duration + 1) / columns).
struct TimeAxis {
  int64_t duration_ns = 0;
  int columns = 1;
  int column_of(int64_t offset_ns) const;
  // The last offset of column c: `stats --at` of that time shows the instant the column ends at.
  int64_t end_of(int column) const;
};

// The most bytes held during each column; a column without events holds what the one before it ended with.
struct Series {
  std::vector<uint64_t> allocated, reserved;
};
Series series(const Replay& r, const TimeAxis& axis);

}  // namespace memrec::terminal
