// The .memrec file format (docs/format.md): a header, then zstd-compressed chunks appended as a program runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "memrec/snapshot.h"

namespace memrec {

inline constexpr uint32_t kFormatVersion = 1;

struct WriterOptions {
  // How often the index stores the allocator's live state, which a range read starts from (docs/format.md, The
  // index): after this many events at least, and at least 8 events per live block.
  uint64_t events_per_live_state = uint64_t{1} << 20;
};

// Where each row table of a snapshot that Writer::flush_and_release() trimmed begins in the whole recording: the
// rows before it are in the file only.
struct RowStart {
  uint64_t scopes = 0, events = 0, kernels = 0, device_memory = 0, samples = 0, owners = 0;
};

// Streaming writer. Each flush() appends what the snapshot gained since the previous flush as self-contained
// chunks, so a process killed mid-run leaves a file readable up to its last complete chunk.
// Tables in `s` must only grow between calls; scopes may be closed (end_ns set) after they were flushed.
class Writer {
 public:
  // Throws Error when the file cannot be created.
  explicit Writer(const std::string& path, const WriterOptions& options = {});
  ~Writer();  // closes the file; without close() it has no footer and reads back with complete = false
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void flush(const Snapshot& s);
  // flush(), then lets go of the rows of `s` that the file holds and later flushes do not read back, so that a
  // recording's memory does not grow with its length: every scope, event, kernel, device memory record and sample,
  // and the owner rows the index has placed. Strings, frames, stacks, streams, event contexts, the start state and
  // the metadata stay whole: later rows point into them. `s` is then a window of the recording: each row table
  // begins at released()'s row, later rows are appended to it as before, and a scope let go of while still open
  // ends through end_scope(). The file is byte for byte the one flush() would write.
  void flush_and_release(Snapshot& s);
  const RowStart& released() const;
  // Ends scope `id`, one that flush_and_release() let go of while it was open (id < released().scopes).
  void end_scope(uint32_t id, int64_t end_ns);
  // Scope rows let go of from the snapshot that the writer holds for later chunks: those still open, and those
  // the next live state or index chunk names.
  size_t scopes_held() const;
  // Flushes, then writes the end state (segments, metadata, drop count) and the footer that marks the file complete.
  void close(const Snapshot& s);
  uint64_t bytes_written() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

void write_file(const Snapshot& s, const std::string& path, const WriterOptions& options = {});

struct ReadOptions {
  unsigned threads = 0;  // threads that decode events and kernels: 0 = one per core; 1 = none besides the caller's
};

// Reads and validates a whole file; throws Error with a clear message on anything malformed.
// A file without its footer (writer killed) reads up to its last complete chunk, with complete = false.
// The result is the same whatever the number of threads.
Snapshot read_file(const std::string& path, const ReadOptions& options = {});
// The same reader over a file's bytes already in memory; errors name ".memrec buffer" instead of a path.
Snapshot read_buffer(std::span<const uint8_t> bytes, const ReadOptions& options = {});

// The summary chunk (docs/format.md, The summary): a small text (analysis's JSON of the recording) that
// attach_summary() puts before the footer of a closed file, read back with one read of the file's end.
// nullopt when the file has none: written before summaries, cut short (no footer), or never summarized. Throws
// Error when the file cannot be read or its summary chunk is damaged.
std::optional<std::string> read_summary(const std::string& path);
// Puts `summary` before the footer of the closed file at `path`, replacing the summary it had. Throws Error when
// the file has no footer (cut short) or cannot be written.
void attach_summary(const std::string& path, std::string_view summary);

// True when the file starts with the .memrec magic.
bool is_memrec_file(const std::string& path);

}  // namespace memrec
