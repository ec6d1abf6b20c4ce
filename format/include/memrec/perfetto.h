// Chrome trace event JSON that ui.perfetto.dev and chrome://tracing open: memory counters per device,
// kernel slices per stream, scope slices per kind, and OOM instants.
#pragma once

#include <ostream>
#include <string>

#include "memrec/snapshot.h"

namespace memrec {

void export_perfetto(const Snapshot& s, std::ostream& out);
void export_perfetto_file(const Snapshot& s, const std::string& path);

}  // namespace memrec
