// The .memrec reader (docs/format.md): validates every chunk, table id and count, and reads a file cut short by a
// killed writer up to its last whole chunk.
#include "memrec/format.h"

#include "chunk.h"
#include "columns.h"
#include "memrec/huge_pages.h"
#include "payload.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <sys/stat.h>

namespace memrec {

using namespace format_detail;

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
  void check_id(uint64_t id, uint64_t size, std::string_view what) const;
  void check_segments(const std::vector<Segment>& segments) const;
  Totals totals() const;
  void finish();

  std::string name_;
  std::string_view bytes_;
  uint64_t offset_ = 0;
  size_t chunk_index_ = 0;
  Decompressor decompressor_;
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
  if (comp_size > compress_bound(raw_size))
    fail(fmt::format("{}: compressed size {} is impossible for raw size {}", where(), comp_size, raw_size));
  // A chunk that runs past the end of the file is the one the writer was writing when it died.
  if (comp_size > left - kChunkHeaderSize) return false;
  try {
    In in(decompressor_.decompress(bytes_.substr(offset_ + kChunkHeaderSize, comp_size), raw_size));
    parse(static_cast<ChunkType>(type), in);
    in.expect_end();
  } catch (const std::exception& e) {  // memrec::Error, or cereal::Exception on a short payload
    fail(fmt::format("{}: {}", where(), e.what()));
  }
  offset_ += kChunkHeaderSize + comp_size;
  ++chunk_index_;
  return true;
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
    case ChunkType::owners: return parse_owners(in);
  }
}

void Reader::check_id(uint64_t id, uint64_t size, std::string_view what) const {
  if (id >= size) throw Error(fmt::format("{} id {} out of range (have {})", what, id, size));
}

void Reader::parse_strings(In& in) {
  read_first(in, strings_.size(), "strings");
  uint64_t n = in.count(8);
  for (uint64_t i = 0; i < n; ++i) in.text(strings_.emplace_back());
  if (!strings_.empty() && !strings_[0].empty()) throw Error("string 0 must be empty");
}

void Reader::parse_frames(In& in) {
  read_first(in, frames_.size(), "frames");
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
  uint64_t first = read_first(in, stack_offsets_.size() - 1, "stacks");
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
  read_first(in, streams_.size(), "streams");
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

// Each row names strings that exist, and comes after events the file already holds, in order.
void Reader::parse_owners(In& in) {
  decode_rows<Owner>(in, s_.owners.size(), "owners", [&](std::span<const Owner> rows) {
    uint64_t last = s_.owners.empty() ? 0 : s_.owners.back().event;
    for (size_t k = 0; k < rows.size(); ++k) {
      const Owner& o = rows[k];
      check_id(o.name, strings_.size(), "owner name string");
      check_id(o.module, strings_.size(), "owner module string");
      uint64_t row = s_.owners.size() + k;
      if (o.event > s_.events.size())
        throw Error(fmt::format("owner row {} comes after event {} of {}", row, o.event, s_.events.size()));
      if (o.event < last) throw Error(fmt::format("owner row {} comes before the row ahead of it", row));
      last = o.event;
    }
    s_.owners.append(rows);
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
