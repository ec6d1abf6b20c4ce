// The .memrec reader, private to the format library: reader.cpp reads a whole file, range.cpp the chunks a range
// needs, through the same checks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "chunk.h"
#include "columns.h"
#include "memrec/format.h"
#include "parallel_rows.h"
#include "payload.h"

namespace memrec::format_detail {

// A chunk as its 12-byte header gives it, and its place among the file's chunks (for messages). A range read leaves
// chunks out (skip) but counts their rows, which the index gives (first, rows).
struct ChunkRef {
  uint64_t offset = 0;
  uint32_t type = 0, raw_size = 0, comp_size = 0;
  uint32_t number = 0;
  bool skip = false;
  uint64_t first = 0, rows = 0;
};

// The chunks of a file image in order, up to its end, up to a chunk cut short by a killed writer, or up to a
// header that is wrong: `stop` is then the error to give once the chunks before it are read.
struct ChunkList {
  std::vector<ChunkRef> chunks;
  std::string stop;
};

// The warning a file without its footer reads with: "run.memrec was cut short (no footer): ...".
std::string cut_short_warning(std::string_view name, uint64_t events);

// Reads a .memrec image held in memory; `name` (the path, for a file) prefixes every error.
class Reader {
 public:
  Reader(std::string name, std::span<const uint8_t> bytes, const ReadOptions& options)
      : name_(std::move(name)), bytes_(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
        options_(options) {}
  // The whole file.
  Snapshot read();
  // The chunks a range read chose from the index (a whole file's, so not cut short). Its row tables hold the rows
  // of the chunks read, each table from its base (the first row of its first chunk read).
  struct Part {
    Snapshot s;
    uint64_t events_base = 0, scopes_base = 0, owners_base = 0;
    std::vector<ScopeEnd> early_ends;  // ends of scopes before scopes_base
  };
  Part read_part(const ChunkList& plan);
  // Following a file as its writer appends to it (memrec/tail.h): reads the whole chunks of `bytes`, the file's bytes
  // from offset `at` (the header too when `at` is 0), and returns the offset after the last of them; a chunk cut
  // short is left for the next call. The rows read start each row table afresh, while the tables (strings, frames,
  // stacks, streams) keep every entry, for the checks; append_to() hands both out.
  uint64_t read_more(std::span<const uint8_t> bytes, uint64_t at);
  // Appends what the last read_more() read to `s`, which holds what the calls before it read.
  void append_to(Snapshot& s);
  bool footer_seen() const { return footer_seen_; }
  bool end_state_seen() const { return end_state_seen_; }

 private:
  [[noreturn]] void fail(std::string_view msg) const { throw Error(fmt::format("{}: {}", name_, msg)); }
  void read_header();
  ChunkList list_chunks() const;
  std::string where(const ChunkRef& c) const;
  void read_chunks(const ChunkList& list);
  void read_listed(const ChunkList& list);
  std::string_view payload(const ChunkRef& c) const {
    return bytes_.substr(c.offset - origin_ + kChunkHeaderSize, c.comp_size);
  }
  void append_tables(Snapshot& s) const;
  void append_scopes(Snapshot& s);
  void reserve_rows(const ChunkList& list);
  void set_bases(const ChunkList& list);
  std::unique_ptr<ParallelRows> start_threads(const ChunkList& list);
  void read_chunk(size_t index, const ChunkRef& c);
  void skip_chunk(const ChunkRef& c);
  template <class T> void take_decoded(const ChunkRef& c, size_t j);
  template <class T> void append_rows(std::span<const T> rows, uint64_t at);
  void parse(ChunkType type, In& in);
  void parse_strings(In& in);
  void parse_frames(In& in);
  void parse_stacks(In& in);
  void parse_streams(In& in);
  void parse_scopes(In& in);
  void parse_scope_ends(In& in);
  void parse_events(In& in);
  void parse_kernels(In& in);
  void parse_metadata(In& in);
  void parse_event_contexts(In& in);
  void parse_device_memory(In& in);
  void parse_memory_samples(In& in);
  void parse_owners(In& in);
  void parse_end_state(In& in);
  void parse_footer(In& in);
  bool fits(const RowIds<Event>& ids) const;
  bool fits(const RowIds<Kernel>& ids) const;
  template <class T> static constexpr ChunkType table_of();
  template <class T> PackedVector<T>& rows();
  void check_id(uint64_t id, uint64_t size, std::string_view what) const;
  void check_segments(const std::vector<Segment>& segments) const;
  Totals totals() const;
  void finish();

  std::string name_;
  std::string_view bytes_;
  uint64_t origin_ = 0;     // the file offset of bytes_[0]: 0, except when following a file (read_more)
  uint32_t numbered_ = 0;   // chunks listed by earlier read_more calls
  ReadOptions options_;
  Decompressor decompressor_;
  ParallelRows::Tables row_chunks_;
  std::vector<uint32_t> row_chunk_of_;  // chunk index -> its index among its table's chunks (events, kernels)
  ParallelRows* threads_ = nullptr;     // while read() runs with threads
  // Tables as read so far (the Snapshot's own tables are assigned at the end).
  std::vector<std::string> strings_;
  std::vector<Frame> frames_;
  std::vector<uint32_t> stack_offsets_{0};
  std::vector<uint32_t> stack_frames_;
  std::vector<uint64_t> streams_;
  std::vector<Scope> scopes_;  // from scopes_base_; packed at the end: scope_ends chunks still close earlier ones
  // Per row table: the rows of the chunks read (or left out) so far, and the first row the table holds (its first
  // chunk read). The events and kernels vectors may hold more, as a chunk's last block takes rows from the next ones.
  struct RowCount {
    uint64_t read = 0, base = 0;
  };
  std::array<RowCount, kChunkTypeCount + 1> counts_{};
  RowCount& count(ChunkType t) { return counts_[static_cast<uint32_t>(t)]; }
  const RowCount& count(ChunkType t) const { return counts_[static_cast<uint32_t>(t)]; }
  std::vector<ScopeEnd> early_ends_;
  Snapshot s_;
  bool end_state_seen_ = false;
  bool end_state_given_ = false;  // to the snapshot append_to() fills
  bool footer_seen_ = false;
};

}  // namespace memrec::format_detail
