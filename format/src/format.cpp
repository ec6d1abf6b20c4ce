// The .memrec format (docs/format.md): a 16-byte file header, then chunks of
// [type u32][raw size u32][compressed size u32][zstd frame with content checksum].
// Tables and metadata are cereal binary archives; events, kernels and scopes are varint columns.
#include "memrec/format.h"

#include "memrec/huge_pages.h"

#include <zstd.h>
#include <zstd_errors.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <istream>
#include <ostream>
#include <streambuf>
#include <type_traits>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

namespace memrec {
namespace {

static_assert(std::endian::native == std::endian::little, "the .memrec format is little-endian");

constexpr std::array<char, 8> kMagic = {'\x89', 'M', 'E', 'M', 'R', 'E', 'C', '\n'};
constexpr size_t kFileHeaderSize = 16;   // magic, version u32, flags u32
constexpr size_t kChunkHeaderSize = 12;  // type u32, raw size u32, compressed size u32
constexpr uint32_t kMaxRawSize = 64u << 20;     // the reader refuses larger chunks before allocating
constexpr size_t kRowsPerChunk = 1 << 16;       // events, kernels, scopes per chunk the writer makes
constexpr uint64_t kMaxRowsPerChunk = 1 << 20;  // what the reader accepts
constexpr size_t kTableBytesPerChunk = 1 << 20; // the writer splits string tables near this size
constexpr int kZstdLevel = 3;

enum class ChunkType : uint32_t {
  strings = 1, frames, stacks, streams, scopes, scope_ends, events, kernels, metadata, end_state, footer,
  event_contexts, device_memory, memory_samples,
};
constexpr uint32_t kChunkTypeCount = 14;
constexpr std::array<std::string_view, kChunkTypeCount + 1> kChunkTypeNames = {
    "?",      "strings", "frames",  "stacks",   "streams",   "scopes",
    "scope_ends", "events", "kernels", "metadata", "end_state", "footer", "event_contexts",
    "device_memory", "memory_samples"};

template <class E> constexpr uint64_t kEnumCount = 0;
template <> constexpr uint64_t kEnumCount<Action> = kActionCount;
template <> constexpr uint64_t kEnumCount<ScopeKind> = 5;
template <> constexpr uint64_t kEnumCount<KernelKind> = 3;
template <> constexpr uint64_t kEnumCount<BlockState> = 3;
template <> constexpr uint64_t kEnumCount<MemoryKind> = kMemoryKindCount;
template <> constexpr uint64_t kEnumCount<MemoryOp> = kMemoryOpCount;

// ---- Payload archives: cereal binary, plus bounded loading of counts, strings and flags. ----

// Appends to a string the writer reuses: fresh megabyte buffers for every chunk cost more in page faults
// than the encoding.
class StringSink : public std::streambuf {
 public:
  explicit StringSink(std::string& s) : s_(s) {}

 protected:
  std::streamsize xsputn(const char* p, std::streamsize n) override {
    s_.append(p, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) s_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& s_;
};

class Out {
 public:
  explicit Out(std::string& buf) : buf_(buf), sink_(buf), os_(&sink_), ar_(os_) { buf.clear(); }
  template <class... T> void operator()(const T&... v) { ar_(v...); }
  void flag(bool b) { ar_(static_cast<uint8_t>(b)); }
  template <class E> void enumerated(E e) { ar_(static_cast<uint8_t>(e)); }
  void text(const std::string& s) {
    ar_(static_cast<uint64_t>(s.size()));
    blob(s);
  }
  void blob(std::string_view b) { ar_(cereal::binary_data(b.data(), b.size())); }
  template <class T> void list(const std::vector<T>& v);
  size_t size() const { return buf_.size(); }

 private:
  std::string& buf_;
  StringSink sink_;
  std::ostream os_;
  cereal::BinaryOutputArchive ar_;
};

class MemBuf : public std::streambuf {
 public:
  explicit MemBuf(std::string_view b) {
    char* p = const_cast<char*>(b.data());  // read-only: the get area is never written
    setg(p, p, p + b.size());
  }
  size_t remaining() const { return static_cast<size_t>(egptr() - gptr()); }
  const char* take(size_t n) {
    const char* p = gptr();
    setg(eback(), gptr() + n, egptr());
    return p;
  }
};

class In {
 public:
  explicit In(std::string_view payload) : buf_(payload), is_(&buf_), ar_(is_) {}
  template <class... T> void operator()(T&... v) { ar_(v...); }  // cereal throws on short input
  void flag(bool& b) {
    uint8_t v = 0;
    ar_(v);
    if (v > 1) throw Error(fmt::format("flag value {} is not 0 or 1", v));
    b = v != 0;
  }
  template <class E> void enumerated(E& e) {
    uint8_t v = 0;
    ar_(v);
    if (v >= kEnumCount<E>) throw Error(fmt::format("enum value {} out of range", v));
    e = static_cast<E>(v);
  }
  // A count of items that take at least min_bytes each: refused when the payload cannot hold them.
  uint64_t count(size_t min_bytes) {
    uint64_t n = 0;
    ar_(n);
    if (n > remaining() / min_bytes)
      throw Error(fmt::format("count {} exceeds the {} bytes left in the chunk", n, remaining()));
    return n;
  }
  void text(std::string& s) { s = blob(count(1)); }
  std::string_view blob(size_t n) {
    if (n > remaining()) throw Error(fmt::format("{} bytes wanted, {} left in the chunk", n, remaining()));
    return {buf_.take(n), n};
  }
  template <class T> void list(std::vector<T>& v);
  size_t remaining() const { return buf_.remaining(); }
  void expect_end() const {
    if (remaining()) throw Error(fmt::format("{} unexpected bytes at the end of the chunk", remaining()));
  }

 private:
  MemBuf buf_;
  std::istream is_;
  cereal::BinaryInputArchive ar_;
};

// One field list per table type, shared by writing (IO = Out) and reading (IO = In).
template <class IO, class T>
  requires std::is_arithmetic_v<T>
void fields(IO& io, T& v) { io(v); }

template <class IO> void fields(IO& io, Frame& f) { io(f.pc, f.function, f.file, f.library, f.line); }

template <class IO> void fields(IO& io, Block& b) {
  io(b.addr, b.size, b.requested_size, b.stack);
  io.enumerated(b.state);
}

template <class IO> void fields(IO& io, Segment& s) {
  io(s.addr, s.total_size, s.allocated_size, s.active_size, s.requested_size, s.pool_id[0], s.pool_id[1],
     s.stack, s.stream, s.device);
  io.flag(s.is_large);
  io.flag(s.is_expandable);
  io.list(s.blocks);
}

template <class IO> void fields(IO& io, EventContext& c) { io(c.event, c.compile_context, c.user_metadata, c.extra); }

struct ScopeEnd {
  uint32_t id = 0;
  int64_t end_ns = 0;
};
template <class IO> void fields(IO& io, ScopeEnd& e) { io(e.id, e.end_ns); }

struct Totals {
  uint64_t strings = 0, frames = 0, stacks = 0, streams = 0, scopes = 0, events = 0, kernels = 0;
  bool operator==(const Totals&) const = default;
};
template <class IO> void fields(IO& io, Totals& t) {
  io(t.strings, t.frames, t.stacks, t.streams, t.scopes, t.events, t.kernels);
}

template <class T> void Out::list(const std::vector<T>& v) {
  ar_(static_cast<uint64_t>(v.size()));
  for (const T& x : v) fields(*this, const_cast<T&>(x));  // Out only reads through the reference
}

// The encoded size of a default T: the least any T takes, which bounds a count before allocating.
template <class T> size_t min_encoded_size() {
  static const size_t n = [] {
    std::string buf;
    Out o(buf);
    T t{};
    fields(o, t);
    return o.size();
  }();
  return n;
}

template <class T> void In::list(std::vector<T>& v) {
  v.resize(count(min_encoded_size<T>()));
  for (T& x : v) fields(*this, x);
}

// ---- Columns: each field of a row type is a column of LEB128 varints; deltas are zigzag-coded. ----

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t u) { return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1); }

template <class T> uint64_t as_u64(T v) { return static_cast<uint64_t>(v); }

class ColumnEncoder {
 public:
  static constexpr size_t kMaxVarint = 10;
  // Starts n empty columns with room for `rows` values each, keeping earlier chunks' buffers.
  void reset(size_t n, size_t rows) {
    cols_.resize(n);
    for (Column& c : cols_) {
      if (c.bytes.size() < rows * kMaxVarint) c.bytes.resize(rows * kMaxVarint);
      c.used = 0;
    }
  }
  template <class T> void value(size_t c, const T& v) { put(cols_[c], as_u64(v)); }
  // Wrapping difference: any two values of T give a delta that decodes back exactly.
  template <class T> void delta(size_t c, const T& v, T prev) {
    put(cols_[c], zigzag(static_cast<int64_t>(as_u64(v) - as_u64(prev))));
  }
  size_t count() const { return cols_.size(); }
  std::string_view column(size_t c) const { return {cols_[c].bytes.data(), cols_[c].used}; }

 private:
  struct Column {
    std::string bytes;  // sized for the worst case up front: no capacity check per value
    size_t used = 0;
  };
  static void put(Column& c, uint64_t v) {
    char* p = c.bytes.data() + c.used;
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) p[n++] = static_cast<char>(v | 0x80);
    p[n++] = static_cast<char>(v);
    c.used += n;
  }
  std::vector<Column> cols_;
};

template <size_t N> class ColumnDecoder {
 public:
  struct Cursor {
    const uint8_t* p;
    const uint8_t* end;
  };
  explicit ColumnDecoder(const std::array<Cursor, N>& cols) : cols_(cols) {}
  template <class T> [[gnu::always_inline]] void value(size_t c, T& v) {
    uint64_t x = get(c);
    if constexpr (std::is_enum_v<T>) {
      if (x >= kEnumCount<T>) fail(fmt::format("column {}: enum value {} out of range", c, x));
    } else if constexpr (sizeof(T) < 8) {
      if (x > std::numeric_limits<T>::max()) fail(fmt::format("column {}: value {} too large", c, x));
    }
    v = static_cast<T>(x);
  }
  template <class T> [[gnu::always_inline]] void delta(size_t c, T& v, T prev) {
    v = static_cast<T>(as_u64(prev) + static_cast<uint64_t>(unzigzag(get(c))));
  }
  void expect_end() const {
    for (size_t c = 0; c < N; ++c)
      if (cols_[c].p != cols_[c].end) throw Error(fmt::format("column {} has unused bytes", c));
  }

 private:
  [[gnu::always_inline]] uint64_t get(size_t c) {
    Cursor& k = cols_[c];
    if (k.p != k.end && *k.p < 0x80) return *k.p++;  // most values fit in one byte
    uint64_t v = 0;
    for (int shift = 0; k.p != k.end && shift < 64; shift += 7) {
      uint8_t b = *k.p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail(fmt::format("column {} ends inside a varint or holds one too long", c));
  }
  // Out of line, so that the decoding loop stays small.
  [[noreturn, gnu::cold, gnu::noinline]] static void fail(const std::string& msg) { throw Error(msg); }
  std::array<Cursor, N> cols_;
};

// Payload: first row index u64, row count u64, byte size of each column u64, then the columns.
template <class T> void encode_rows(Out& out, ColumnEncoder& enc, const PackedVector<T>& rows, uint64_t first, size_t n) {
  enc.reset(Columns<T>::kCount, n);
  T prev{};
  for (size_t i = first; i < first + n; ++i) {
    T r = rows[i];
    Columns<T>::row(enc, r, prev);
    prev = r;
  }
  out(first, static_cast<uint64_t>(n));
  for (size_t c = 0; c < enc.count(); ++c) out(static_cast<uint64_t>(enc.column(c).size()));
  for (size_t c = 0; c < enc.count(); ++c) out.blob(enc.column(c));
}

void check_first(uint64_t first, uint64_t have, std::string_view table) {
  if (first != have) throw Error(fmt::format("{} chunk starts at row {}, expected {}", table, first, have));
}

// Decodes a chunk of rows that must start at row `have` and hands them to take(std::span<const T>) in batches
// small enough to stay in cache until they are packed.
template <class T, class Take> void decode_rows(In& in, uint64_t have, std::string_view table, Take take) {
  uint64_t first = 0, n = 0;
  in(first, n);
  check_first(first, have, table);
  std::array<uint64_t, Columns<T>::kCount> sizes{};
  for (uint64_t& size : sizes) in(size);
  // Every row takes at least one byte in each column.
  if (n > kMaxRowsPerChunk || n > in.remaining())
    throw Error(fmt::format("row count {} too large", n));
  using Decoder = ColumnDecoder<Columns<T>::kCount>;
  std::array<typename Decoder::Cursor, Columns<T>::kCount> cursors;
  for (size_t c = 0; c < sizes.size(); ++c) {
    auto b = in.blob(sizes[c]);
    auto p = reinterpret_cast<const uint8_t*>(b.data());
    cursors[c] = {p, p + b.size()};
  }
  in.expect_end();
  Decoder dec(cursors);
  std::array<T, PackedVector<T>::kBlockRows> batch;
  T row{};
  for (uint64_t i = 0; i < n;) {
    size_t k = 0;
    for (; k < batch.size() && i < n; ++k, ++i) {
      Columns<T>::row(dec, row, T(row));
      batch[k] = row;
    }
    take(std::span<const T>(batch.data(), k));
  }
  dec.expect_end();
}

// ---- Bytes on disk ----

template <class T> void put_le(char* p, T v) { std::memcpy(p, &v, sizeof v); }
template <class T> T get_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string errno_text() { return std::strerror(errno); }

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

}  // namespace

// ================================ Writer ================================

struct Writer::State {
  std::string path;
  File file;
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx{ZSTD_createCCtx(), ZSTD_freeCCtx};
  std::string payload, compressed;  // reused from chunk to chunk
  ColumnEncoder columns;
  uint64_t bytes = 0;
  Totals written;                        // rows of each table already in the file
  uint64_t written_contexts = 0;         // of Snapshot::event_contexts; not in Totals, so the footer keeps its shape
  uint64_t written_device_memory = 0;    // ... and of the device memory records and samples, for the same reason
  uint64_t written_samples = 0;
  std::vector<uint32_t> open_scopes;     // written while end_ns == -1; ascending
  std::map<std::string, std::string> metadata;
  bool metadata_written = false;
  bool closed = false;
  bool failed = false;  // a write failed: what follows could not be told from a torn chunk

  [[noreturn]] void fail(std::string_view what) {
    failed = true;
    throw Error(fmt::format("{}: {}: {}", path, what, errno_text()));
  }
  void write(const void* p, size_t n) {
    if (std::fwrite(p, 1, n, file.get()) != n) fail("write failed");
    bytes += n;
  }
  void write_chunk(ChunkType type, const std::string& raw);
  template <class Fn> void chunk(ChunkType type, Fn&& fill) {
    Out out(payload);
    fill(out);
    write_chunk(type, payload);
  }
  void write_strings(const Snapshot& s);
  void write_tables(const Snapshot& s);
  void write_scope_ends(const Snapshot& s);
  template <class T> void write_rows(ChunkType type, const PackedVector<T>& rows, uint64_t& written_rows);
  void write_metadata(const Snapshot& s);
  void write_event_contexts(const Snapshot& s);
  void flush(const Snapshot& s);
};

void Writer::State::write_chunk(ChunkType type, const std::string& raw) {
  if (raw.size() > kMaxRawSize)
    throw Error(fmt::format("{}: {} chunk of {} bytes exceeds the format's {} byte limit", path,
                            kChunkTypeNames[static_cast<uint32_t>(type)], raw.size(), kMaxRawSize));
  compressed.resize(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compress2(cctx.get(), compressed.data(), compressed.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) throw Error(fmt::format("{}: zstd: {}", path, ZSTD_getErrorName(n)));
  char header[kChunkHeaderSize];
  put_le(header, static_cast<uint32_t>(type));
  put_le(header + 4, static_cast<uint32_t>(raw.size()));
  put_le(header + 8, static_cast<uint32_t>(n));
  write(header, sizeof header);
  write(compressed.data(), n);
}

void Writer::State::write_strings(const Snapshot& s) {
  const auto& all = s.strings.all();
  while (written.strings < all.size()) {
    uint64_t first = written.strings;
    size_t end = first, bytes = 0;
    while (end < all.size() && end - first < kRowsPerChunk && bytes < kTableBytesPerChunk) bytes += all[end++].size();
    chunk(ChunkType::strings, [&](Out& o) {
      o(first, static_cast<uint64_t>(end - first));
      for (size_t i = first; i < end; ++i) o.text(all[i]);
    });
    written.strings = end;
  }
}

// Frames, stacks and streams are small (hundreds to thousands of rows): one chunk each per flush.
void Writer::State::write_tables(const Snapshot& s) {
  const auto& frames = s.frames.all();
  if (written.frames < frames.size()) {
    chunk(ChunkType::frames, [&](Out& o) {
      o(written.frames);
      o.list(std::vector<Frame>(frames.begin() + written.frames, frames.end()));
    });
    written.frames = frames.size();
  }
  if (written.stacks < s.stacks.size()) {
    const auto& offsets = s.stacks.offsets();
    std::vector<uint32_t> lengths;
    for (size_t i = written.stacks; i < s.stacks.size(); ++i) lengths.push_back(offsets[i + 1] - offsets[i]);
    const auto& ids = s.stacks.frame_ids();
    chunk(ChunkType::stacks, [&](Out& o) {
      o(written.stacks);
      o.list(lengths);
      o.list(std::vector<uint32_t>(ids.begin() + offsets[written.stacks], ids.end()));
    });
    written.stacks = s.stacks.size();
  }
  if (written.streams < s.streams.size()) {
    chunk(ChunkType::streams, [&](Out& o) {
      o(written.streams);
      o.list(std::vector<uint64_t>(s.streams.begin() + written.streams, s.streams.end()));
    });
    written.streams = s.streams.size();
  }
}

void Writer::State::write_scope_ends(const Snapshot& s) {
  std::vector<ScopeEnd> ends;
  std::erase_if(open_scopes, [&](uint32_t id) {
    if (s.scopes[id].end_ns == -1) return false;
    ends.push_back({id, s.scopes[id].end_ns});
    return true;
  });
  if (!ends.empty()) chunk(ChunkType::scope_ends, [&](Out& o) { o.list(ends); });
}

template <class T>
void Writer::State::write_rows(ChunkType type, const PackedVector<T>& rows, uint64_t& written_rows) {
  if (rows.size() < written_rows) throw Error(fmt::format("{}: the snapshot lost rows since the last flush", path));
  while (written_rows < rows.size()) {
    size_t n = std::min(kRowsPerChunk, rows.size() - written_rows);
    chunk(type, [&](Out& o) { encode_rows(o, columns, rows, written_rows, n); });
    written_rows += n;
  }
}

void Writer::State::write_metadata(const Snapshot& s) {
  if (metadata_written && metadata == s.metadata) return;
  chunk(ChunkType::metadata, [&](Out& o) {
    o(static_cast<uint64_t>(s.metadata.size()));
    for (const auto& [k, v] : s.metadata) {
      o.text(k);
      o.text(v);
    }
  });
  metadata = s.metadata;
  metadata_written = true;
}

// Only for snapshots that have any (imported pickles with compile_context, user_metadata, ...): files of recordings
// hold no such chunk.
void Writer::State::write_event_contexts(const Snapshot& s) {
  const auto& all = s.event_contexts;
  while (written_contexts < all.size()) {
    size_t n = std::min(kRowsPerChunk, all.size() - written_contexts);
    chunk(ChunkType::event_contexts, [&](Out& o) {
      o.list(std::vector<EventContext>(all.begin() + written_contexts, all.begin() + written_contexts + n));
    });
    written_contexts += n;
  }
}

void Writer::State::flush(const Snapshot& s) {
  if (closed) throw Error(fmt::format("{}: flush after close", path));
  if (failed) throw Error(fmt::format("{}: an earlier write failed; the file ends at its last whole chunk", path));
  write_strings(s);
  write_tables(s);
  // Scopes already written that were open get their end first; then new scopes, some of them open.
  write_scope_ends(s);
  uint64_t first_new_scope = written.scopes;
  write_rows(ChunkType::scopes, s.scopes, written.scopes);
  for (uint64_t id = first_new_scope; id < written.scopes; ++id)
    if (s.scopes[id].end_ns == -1) open_scopes.push_back(static_cast<uint32_t>(id));
  write_rows(ChunkType::events, s.events, written.events);
  write_rows(ChunkType::kernels, s.kernels, written.kernels);
  write_event_contexts(s);
  write_rows(ChunkType::device_memory, s.device_memory, written_device_memory);
  write_rows(ChunkType::memory_samples, s.memory_samples, written_samples);
  write_metadata(s);
  if (std::fflush(file.get()) != 0) fail("write failed");
}

Writer::Writer(const std::string& path) : state_(std::make_unique<State>()) {
  state_->path = path;
  state_->file.reset(std::fopen(path.c_str(), "wbe"));  // close-on-exec: programs the recorded one starts get no copy
  if (!state_->file) state_->fail("cannot create");
  ZSTD_CCtx* c = state_->cctx.get();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1);
  char header[kFileHeaderSize];
  std::memcpy(header, kMagic.data(), kMagic.size());
  put_le(header + 8, kFormatVersion);
  put_le(header + 12, uint32_t{0});  // flags: none defined in version 1
  state_->write(header, sizeof header);
  if (std::fflush(state_->file.get()) != 0) state_->fail("write failed");
}

// Without close() the file keeps no footer, so it reads back as incomplete: what it holds is what was flushed.
Writer::~Writer() = default;

void Writer::flush(const Snapshot& s) { state_->flush(s); }

void Writer::close(const Snapshot& s) {
  State& st = *state_;
  st.flush(s);
  st.chunk(ChunkType::end_state, [&](Out& o) {
    o.list(s.segments_start);
    o.list(s.segments_end);
    o.flag(s.has_segments_start);
    o(s.dropped_events);
  });
  st.chunk(ChunkType::footer, [&](Out& o) { fields(o, st.written); });
  st.closed = true;
  if (std::fclose(st.file.release()) != 0) st.fail("write failed");
}

uint64_t Writer::bytes_written() const { return state_->bytes; }

void write_file(const Snapshot& s, const std::string& path) { Writer(path).close(s); }

// ================================ Reader ================================

namespace {

// Reads a whole .memrec image held in memory; `name` (the path, for a file) prefixes every error.
class Reader {
 public:
  Reader(std::string name, std::span<const uint8_t> bytes)
      : name_(std::move(name)), bytes_(reinterpret_cast<const char*>(bytes.data()), bytes.size()) {}
  Snapshot read();

 private:
  [[noreturn]] void fail(std::string_view msg) const { throw Error(fmt::format("{}: {}", name_, msg)); }
  void read_header();
  void reserve_rows();
  bool read_chunk();  // false at the end of the file or a truncated trailing chunk
  std::string_view decompress(std::string_view compressed, uint32_t raw_size);
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
  void parse_end_state(In& in);
  void parse_footer(In& in);
  void check_id(uint64_t id, uint64_t size, std::string_view what) const;
  void check_segments(const std::vector<Segment>& segments) const;
  Totals totals() const;
  void finish();

  std::string name_;
  std::string_view bytes_;
  uint64_t offset_ = 0;
  size_t chunk_index_ = 0;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx_{ZSTD_createDCtx(), ZSTD_freeDCtx};
  std::string raw_;
  // Tables as read so far (the Snapshot's own tables are assigned at the end).
  std::vector<std::string> strings_;
  std::vector<Frame> frames_;
  std::vector<uint32_t> stack_offsets_{0};
  std::vector<uint32_t> stack_frames_;
  std::vector<uint64_t> streams_;
  std::vector<Scope> scopes_;  // packed at the end: scope_ends chunks still close earlier ones
  Snapshot s_;
  bool end_state_seen_ = false;
  bool footer_seen_ = false;
};

Snapshot Reader::read() {
  read_header();
  reserve_rows();
  while (read_chunk()) {
  }
  finish();
  return std::move(s_);
}

void Reader::read_header() {
  if (bytes_.size() < kFileHeaderSize) fail("not a .memrec file (shorter than its header)");
  const char* h = bytes_.data();
  if (std::memcmp(h, kMagic.data(), kMagic.size()) != 0) fail("not a .memrec file (bad magic)");
  auto version = get_le<uint32_t>(h + 8);
  if (version != kFormatVersion)
    fail(fmt::format("unsupported .memrec version {} (this memrec reads {})", version, kFormatVersion));
  auto flags = get_le<uint32_t>(h + 12);
  if (flags != 0) fail(fmt::format("unsupported .memrec flags {:#x}", flags));
  offset_ = kFileHeaderSize;
}

// Growing the row vectors chunk by chunk would copy and page-fault them several times over, so a first pass
// over the chunk headers reserves room: every row takes at least one raw byte per column. Capped by the file
// size so that a hostile file cannot reserve much more than it holds.
void Reader::reserve_rows() {
  uint64_t raw[kChunkTypeCount + 1] = {};
  for (uint64_t off = kFileHeaderSize; off + kChunkHeaderSize <= bytes_.size();) {  // off may pass the end
    const char* h = bytes_.data() + off;
    auto type = get_le<uint32_t>(h);
    if (type > kChunkTypeCount) break;  // reported when the chunks are read
    raw[type] += get_le<uint32_t>(h + 4);
    off += kChunkHeaderSize + get_le<uint32_t>(h + 8);
  }
  auto rows = [&](ChunkType t, size_t columns) {
    return std::min<uint64_t>(raw[static_cast<uint32_t>(t)] / columns, bytes_.size());
  };
  s_.events.reserve(rows(ChunkType::events, Columns<Event>::kCount));
  s_.kernels.reserve(rows(ChunkType::kernels, Columns<Kernel>::kCount));
  reserve_huge(scopes_, rows(ChunkType::scopes, Columns<Scope>::kCount));
}

bool Reader::read_chunk() {
  if (offset_ == bytes_.size()) return false;
  if (footer_seen_) fail(fmt::format("{} bytes after the footer at offset {}", bytes_.size() - offset_, offset_));
  uint64_t left = bytes_.size() - offset_;
  if (left < kChunkHeaderSize) return false;  // a chunk header cut short: the writer was killed
  const char* h = bytes_.data() + offset_;
  auto type = get_le<uint32_t>(h);
  auto raw_size = get_le<uint32_t>(h + 4);
  auto comp_size = get_le<uint32_t>(h + 8);
  auto where = [&] {
    return fmt::format("chunk {} ({}) at offset {}", chunk_index_,
                       type >= 1 && type <= kChunkTypeCount ? kChunkTypeNames[type] : "?", offset_);
  };
  if (type < 1 || type > kChunkTypeCount) fail(fmt::format("{}: unknown chunk type {}", where(), type));
  if (raw_size > kMaxRawSize)
    fail(fmt::format("{}: raw size {} exceeds the limit of {}", where(), raw_size, kMaxRawSize));
  if (comp_size > ZSTD_compressBound(raw_size))
    fail(fmt::format("{}: compressed size {} is impossible for raw size {}", where(), comp_size, raw_size));
  // A chunk that runs past the end of the file is the one the writer was writing when it died.
  if (comp_size > left - kChunkHeaderSize) return false;
  try {
    In in(decompress(bytes_.substr(offset_ + kChunkHeaderSize, comp_size), raw_size));
    parse(static_cast<ChunkType>(type), in);
    in.expect_end();
  } catch (const std::exception& e) {  // memrec::Error, or cereal::Exception on a short payload
    fail(fmt::format("{}: {}", where(), e.what()));
  }
  offset_ += kChunkHeaderSize + comp_size;
  ++chunk_index_;
  return true;
}

std::string_view Reader::decompress(std::string_view compressed, uint32_t raw_size) {
  // Frame header (RFC 8878): magic, then a descriptor byte whose bit 2 says a content checksum follows.
  if (compressed.size() < 5 || get_le<uint32_t>(compressed.data()) != ZSTD_MAGICNUMBER)
    throw Error("not a zstd frame");
  if (!(static_cast<uint8_t>(compressed[4]) & 0x04)) throw Error("zstd frame without a checksum");
  if (ZSTD_getFrameContentSize(compressed.data(), compressed.size()) != raw_size)
    throw Error("zstd frame content size differs from the chunk's raw size");
  if (ZSTD_findFrameCompressedSize(compressed.data(), compressed.size()) != compressed.size())
    throw Error("zstd frame size differs from the chunk's");
  raw_.resize(raw_size);
  size_t n = ZSTD_decompressDCtx(dctx_.get(), raw_.data(), raw_.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n)) {
    if (ZSTD_getErrorCode(n) == ZSTD_error_checksum_wrong) throw Error("bad checksum (corrupt data)");
    throw Error(fmt::format("corrupt data: zstd: {}", ZSTD_getErrorName(n)));
  }
  if (n != raw_size) throw Error(fmt::format("decompressed {} bytes, expected {}", n, raw_size));
  return raw_;
}

void Reader::parse(ChunkType type, In& in) {
  switch (type) {
    case ChunkType::strings: return parse_strings(in);
    case ChunkType::frames: return parse_frames(in);
    case ChunkType::stacks: return parse_stacks(in);
    case ChunkType::streams: return parse_streams(in);
    case ChunkType::scopes: return parse_scopes(in);
    case ChunkType::scope_ends: return parse_scope_ends(in);
    case ChunkType::events: return parse_events(in);
    case ChunkType::kernels: return parse_kernels(in);
    case ChunkType::metadata: return parse_metadata(in);
    case ChunkType::end_state: return parse_end_state(in);
    case ChunkType::footer: return parse_footer(in);
    case ChunkType::event_contexts: return parse_event_contexts(in);
    case ChunkType::device_memory: return parse_device_memory(in);
    case ChunkType::memory_samples: return parse_memory_samples(in);
  }
}

void Reader::check_id(uint64_t id, uint64_t size, std::string_view what) const {
  if (id >= size) throw Error(fmt::format("{} id {} out of range (have {})", what, id, size));
}

void Reader::parse_strings(In& in) {
  uint64_t first = 0;
  in(first);
  check_first(first, strings_.size(), "strings");
  uint64_t n = in.count(8);
  for (uint64_t i = 0; i < n; ++i) in.text(strings_.emplace_back());
  if (!strings_.empty() && !strings_[0].empty()) throw Error("string 0 must be empty");
}

void Reader::parse_frames(In& in) {
  uint64_t first = 0;
  in(first);
  check_first(first, frames_.size(), "frames");
  std::vector<Frame> frames;
  in.list(frames);
  for (const Frame& f : frames) {
    check_id(f.function, strings_.size(), "frame function string");
    check_id(f.file, strings_.size(), "frame file string");
    check_id(f.library, strings_.size(), "frame library string");
  }
  frames_.insert(frames_.end(), frames.begin(), frames.end());
}

void Reader::parse_stacks(In& in) {
  uint64_t first = 0;
  in(first);
  check_first(first, stack_offsets_.size() - 1, "stacks");
  std::vector<uint32_t> lengths, ids;
  in.list(lengths);
  in.list(ids);
  if (first == 0 && (lengths.empty() || lengths[0] != 0)) throw Error("stack 0 must be empty");
  uint64_t total = stack_frames_.size();
  if (total + ids.size() > UINT32_MAX) throw Error("more than 2^32 stack frame ids");
  for (uint32_t len : lengths) {
    total += len;
    if (total > stack_frames_.size() + ids.size()) throw Error("stack lengths exceed the frame ids given");
    stack_offsets_.push_back(static_cast<uint32_t>(total));
  }
  if (total != stack_frames_.size() + ids.size()) throw Error("stack lengths do not cover the frame ids given");
  for (uint32_t id : ids) check_id(id, frames_.size(), "stack frame");
  stack_frames_.insert(stack_frames_.end(), ids.begin(), ids.end());
}

void Reader::parse_streams(In& in) {
  uint64_t first = 0;
  in(first);
  check_first(first, streams_.size(), "streams");
  std::vector<uint64_t> streams;
  in.list(streams);
  if (streams_.size() + streams.size() > UINT16_MAX + 1ULL) throw Error("more than 65536 streams");
  streams_.insert(streams_.end(), streams.begin(), streams.end());
}

void Reader::parse_scopes(In& in) {
  size_t base = scopes_.size();
  decode_rows<Scope>(in, base, "scopes", [&](std::span<const Scope> rows) { scopes_.insert(scopes_.end(), rows.begin(), rows.end()); });
  for (size_t id = base; id < scopes_.size(); ++id) {
    const Scope& sc = scopes_[id];
    check_id(sc.name, strings_.size(), "scope name string");
    // Parents open before their children, so a parent id is smaller: no cycles.
    if (sc.parent != 0 && sc.parent >= id)
      throw Error(fmt::format("scope {} has parent {}, which is not an earlier scope", id, sc.parent));
  }
}

void Reader::parse_scope_ends(In& in) {
  std::vector<ScopeEnd> ends;
  in.list(ends);
  for (const ScopeEnd& e : ends) {
    check_id(e.id, scopes_.size(), "closed scope");
    if (scopes_[e.id].end_ns != -1) throw Error(fmt::format("scope {} closed twice", e.id));
    scopes_[e.id].end_ns = e.end_ns;
  }
}

void Reader::parse_events(In& in) {
  uint64_t n_stacks = stack_offsets_.size() - 1;
  decode_rows<Event>(in, s_.events.size(), "events", [&](std::span<const Event> rows) {
    for (size_t k = 0; k < rows.size(); ++k) {
      const Event& e = rows[k];
      if (e.stack >= n_stacks || e.scope >= scopes_.size() || e.stream >= streams_.size()) {
        check_id(e.stack, n_stacks, fmt::format("event {} stack", s_.events.size() + k));
        check_id(e.scope, scopes_.size(), fmt::format("event {} scope", s_.events.size() + k));
        check_id(e.stream, streams_.size(), fmt::format("event {} stream", s_.events.size() + k));
      }
    }
    s_.events.append(rows);
  });
}

void Reader::parse_kernels(In& in) {
  decode_rows<Kernel>(in, s_.kernels.size(), "kernels", [&](std::span<const Kernel> rows) {
    for (const Kernel& k : rows) {
      check_id(k.name, strings_.size(), "kernel name string");
      check_id(k.stream, streams_.size(), "kernel stream");
    }
    s_.kernels.append(rows);
  });
}

void Reader::parse_metadata(In& in) {
  std::map<std::string, std::string> m;
  uint64_t n = in.count(16);
  for (uint64_t i = 0; i < n; ++i) {
    std::string k, v;
    in.text(k);
    in.text(v);
    m[std::move(k)] = std::move(v);
  }
  s_.metadata = std::move(m);
}

void Reader::parse_event_contexts(In& in) {
  std::vector<EventContext> rows;
  in.list(rows);
  for (const EventContext& c : rows) {
    check_id(c.event, s_.events.size(), "event context's event");
    if (!s_.event_contexts.empty() && c.event <= s_.event_contexts.back().event)
      throw Error(fmt::format("event context for event {} out of order", c.event));
    check_id(c.compile_context, strings_.size(), "compile_context string");
    check_id(c.user_metadata, strings_.size(), "user_metadata string");
    check_id(c.extra, strings_.size(), "extra fields string");
    s_.event_contexts.push_back(c);
  }
}

void Reader::parse_device_memory(In& in) {
  uint64_t n_stacks = stack_offsets_.size() - 1;
  decode_rows<DeviceMemoryRecord>(in, s_.device_memory.size(), "device_memory", [&](std::span<const DeviceMemoryRecord> rows) {
    for (const DeviceMemoryRecord& r : rows) {
      check_id(r.source, strings_.size(), "device memory source string");
      check_id(r.stack, n_stacks, "device memory stack");
    }
    s_.device_memory.append(rows);
  });
}

void Reader::parse_memory_samples(In& in) {
  decode_rows<DeviceMemorySample>(in, s_.memory_samples.size(), "memory_samples",
                                  [&](std::span<const DeviceMemorySample> rows) {
    for (const DeviceMemorySample& m : rows)
      if (m.used > m.total)
        throw Error(fmt::format("memory sample uses {} bytes of a device of {}", m.used, m.total));
    s_.memory_samples.append(rows);
  });
}

void Reader::check_segments(const std::vector<Segment>& segments) const {
  uint64_t n_stacks = stack_offsets_.size() - 1;
  for (const Segment& seg : segments) {
    check_id(seg.stack, n_stacks, "segment stack");
    check_id(seg.stream, streams_.size(), "segment stream");
    for (const Block& b : seg.blocks) check_id(b.stack, n_stacks, "block stack");
  }
}

void Reader::parse_end_state(In& in) {
  if (end_state_seen_) throw Error("second end_state chunk");
  end_state_seen_ = true;
  in.list(s_.segments_start);
  in.list(s_.segments_end);
  in.flag(s_.has_segments_start);
  in(s_.dropped_events);
  check_segments(s_.segments_start);
  check_segments(s_.segments_end);
}

Totals Reader::totals() const {
  return {strings_.size(), frames_.size(), stack_offsets_.size() - 1, streams_.size(),
          scopes_.size(),  s_.events.size(), s_.kernels.size()};
}

void Reader::parse_footer(In& in) {
  Totals t;
  fields(in, t);
  Totals have = totals();
  if (!(t == have))
    throw Error(fmt::format(
        "footer totals (strings {}, frames {}, stacks {}, streams {}, scopes {}, events {}, kernels {}) "
        "differ from what the file holds ({}, {}, {}, {}, {}, {}, {})",
        t.strings, t.frames, t.stacks, t.streams, t.scopes, t.events, t.kernels, have.strings, have.frames,
        have.stacks, have.streams, have.scopes, have.events, have.kernels));
  if (!end_state_seen_) throw Error("footer without an end_state chunk");
  footer_seen_ = true;
}

// Tables never written (a file cut before its first flush) keep the Snapshot's defaults.
void Reader::finish() {
  if (!strings_.empty()) s_.strings.assign(std::move(strings_));
  s_.frames.assign(std::move(frames_));
  if (stack_offsets_.size() > 1) s_.stacks.assign(std::move(stack_offsets_), std::move(stack_frames_));
  if (!streams_.empty()) s_.streams = std::move(streams_);
  if (!scopes_.empty()) s_.scopes.assign(scopes_);
  s_.complete = footer_seen_;
  if (!s_.complete)
    s_.warnings.push_back(fmt::format("{} was cut short (no footer): {} events read; the rest is lost", name_,
                                      s_.events.size()));
}

}  // namespace

Snapshot read_buffer(std::span<const uint8_t> bytes) { return Reader(".memrec buffer", bytes).read(); }

// The whole file in memory: its compressed size is a fraction of the snapshot it decodes to.
Snapshot read_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  auto fail = [&](std::string_view what) { throw Error(fmt::format("{}: {}: {}", path, what, errno_text())); };
  if (!f) fail("cannot open");
  struct stat st {};
  if (fstat(fileno(f.get()), &st) != 0) fail("cannot stat");
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not a .memrec file", path));
  // Bytes appended after the stat (a recording still running) are left for the next read.
  // Not zeroed first, and on huge pages: faulting in a buffer this size costs as much as reading into it.
  auto size = static_cast<size_t>(st.st_size);
  auto bytes = std::make_unique_for_overwrite<uint8_t[]>(size);
  advise_huge(bytes.get(), size);
  if (std::fread(bytes.get(), 1, size, f.get()) != size) fail("read failed");
  return Reader(path, {bytes.get(), size}).read();
}

bool is_memrec_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  std::array<char, kMagic.size()> head{};
  return f && std::fread(head.data(), 1, head.size(), f.get()) == head.size() && head == kMagic;
}

}  // namespace memrec
