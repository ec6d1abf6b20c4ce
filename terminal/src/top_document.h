// What `memrec top` shows, apart from the terminal: a recording replayed on one device, drawn on the time axis and
// series of memrec/time_series.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "memrec/replay.h"
#include "memrec/snapshot.h"
#include "memrec/time_series.h"

namespace memrec::terminal {

// A loaded recording. The snapshot sits behind a pointer: the replay keeps a reference to it.
struct TopDocument {
  std::unique_ptr<Snapshot> snapshot;
  std::unique_ptr<Replay> replay;
  int64_t duration_ns = 0;  // from the device's first event to its last
  std::string growth;       // with `growth`: the slope across steps (growth_summary), "" without enough steps
};

// Loads `path` (a .memrec file, whole or still being written, or a pickle) on `device` (unset: choose_device's);
// with `growth`, the slope across its steps too (memrec growth), which following a run shows.
TopDocument load_document(const std::string& path, std::optional<uint8_t> device, bool growth = false);

}  // namespace memrec::terminal
