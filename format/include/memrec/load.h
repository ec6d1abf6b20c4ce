// Opening a snapshot whatever its format.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <ctime>
#include <optional>
#include <string>

#include "memrec/range.h"
#include "memrec/snapshot.h"

namespace memrec {

// Reads a .memrec file or a PyTorch snapshot pickle, chosen by the file's first bytes; with `range`, only that part
// of it (memrec/range.h). With `notes` (stderr for a command), prints the snapshot's warnings there:
// "memrec: note: run.memrec was cut short: ...".
Snapshot load_snapshot(const std::string& path, std::FILE* notes = nullptr, const std::optional<Range>& range = {});

// Adds the recorder's notes (metadata keys notes.*, such as errors its hooks repaired) to the warnings.
void add_notes(Snapshot& s);

// One "memrec: note: ..." line per Snapshot::warnings entry.
void print_warnings(const Snapshot& s, std::FILE* out);

// What says a file changed since it was last read (a recording still being written): its size and modification
// time. A file that does not exist has size -1.
struct FileStamp {
  off_t size = -1;
  timespec mtime{};
  bool operator==(const FileStamp& o) const {
    return size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
  }
};
FileStamp file_stamp(const std::string& path);

}  // namespace memrec
