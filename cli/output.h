// Where commands write: checked before any work, written so that a failure leaves nothing half-done.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace memrec {
struct Snapshot;
}

namespace memrec::cli {

// An output the user named, with the flag that named it, for messages: {"-o", "run.pickle"}.
struct Output {
  std::string flag, path;
};

// Refuses (throws memrec::Error) when an output is one of the inputs or another output: the same file by device
// and inode, so hard and symbolic links count, or the same path when it does not exist yet. Also refuses an
// output that is a folder, or whose folder does not exist or cannot be written to, so a run fails before it
// starts, not after. Call before any work.
void check_outputs(const std::vector<std::string>& inputs, const std::vector<Output>& outputs);

// The export format of `out`: `format` (--format) when given, else from the extension (.pickle/.pkl: "pickle",
// .json: "perfetto", .db/.sqlite/.sqlite3: "sqlite"); throws memrec::Error naming both ways to choose otherwise.
std::string export_format(const std::string& out, const std::string& format);

// Writes `s` to `out` as export_format() named it, through write_output().
void export_file(const Snapshot& s, const std::string& format, const std::string& out);

// Writes through a temporary file next to `out`, renamed over it only once complete: a failed write (full disk,
// bad path) leaves no partial file that could pass for a finished one, and an existing `out` stays as it was.
// Errors name `out` with the system's reason, never the temporary name. Devices and pipes are written directly.
void write_output(const std::string& out, const std::function<void(const std::string& path)>& write);

}  // namespace memrec::cli
