// Opening a snapshot whatever its format.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "memrec/range.h"
#include "memrec/snapshot.h"

namespace memrec {

// Reads a .memrec file or a PyTorch snapshot pickle, chosen by the file's first bytes; with `range`, only that part
// of it (memrec/range.h). With `notes` (stderr for a command), prints the snapshot's warnings there:
// "memrec: note: run.memrec was cut short: ...".
Snapshot load_snapshot(const std::string& path, std::FILE* notes = nullptr, const std::optional<Range>& range = {});

// One "memrec: note: ..." line per Snapshot::warnings entry.
void print_warnings(const Snapshot& s, std::FILE* out);

}  // namespace memrec
