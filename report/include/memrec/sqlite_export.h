// `memrec export --format sqlite`: a recording as SQL tables for sqlite3, pandas or DuckDB. The tables and their
// columns are a contract documented in docs/sql.md: keep them.
#pragma once

#include <string>

#include "memrec/snapshot.h"

namespace memrec {

// Writes `s` into a new SQLite database at `path`, which must not exist: the raw facts (events, frames, stacks,
// scopes, kernels, segments, metadata) and, per device, each block's life with the keys `memrec stats` groups it
// by, and the totals after each event. Throws Error naming `path` when it cannot.
void export_sqlite_file(const Snapshot& s, const std::string& path);

}  // namespace memrec
