// The .memrec reader (docs/format.md): validates every chunk, table id and count, and reads a file cut short by a
// killed writer up to its last whole chunk.
#include "reader.h"

#include "memrec/huge_pages.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <sys/stat.h>

namespace memrec::format_detail {

Snapshot Reader::read() {
  read_header();
  read_chunks(list_chunks());
  return std::move(s_);
}

Reader::Part Reader::read_part(const ChunkList& plan) {
  footer_seen_ = true;  // the index was found through the footer
  read_chunks(plan);
  return {std::move(s_), count(ChunkType::events).base, count(ChunkType::scopes).base, count(ChunkType::owners).base,
          std::move(early_ends_)};
}

void Reader::read_chunks(const ChunkList& list) {
  set_bases(list);
  read_listed(list);
  finish();
}

void Reader::read_listed(const ChunkList& list) {
  reserve_rows(list);
  std::unique_ptr<ParallelRows> threads = start_threads(list);
  threads_ = threads.get();
  for (size_t i = 0; i < list.chunks.size(); ++i) read_chunk(i, list.chunks[i]);
  if (!list.stop.empty()) fail(list.stop);
  if (threads) {
    threads->give_slabs(s_.events);
    threads->give_slabs(s_.kernels);
  }
}

// Each row table holds its rows from the first chunk read.
void Reader::set_bases(const ChunkList& list) {
  std::array<bool, kChunkTypeCount + 1> seen{};
  for (const ChunkRef& c : list.chunks)
    if (!c.skip && !seen[c.type]) seen[c.type] = true, counts_[c.type].base = c.first;
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
}

std::string Reader::where(const ChunkRef& c) const {
  return fmt::format("chunk {} ({}) at offset {}", c.number,
                     c.type >= 1 && c.type <= kChunkTypeCount ? kChunkTypeNames[c.type] : "?", c.offset);
}

// Checks every chunk header before any payload is read, so memory stays bounded by the chunk limits.
ChunkList Reader::list_chunks() const {
  ChunkList list;
  uint64_t end = origin_ + bytes_.size();
  for (uint64_t off = std::max<uint64_t>(origin_, kFileHeaderSize); off < end;) {
    if (!list.chunks.empty() && list.chunks.back().type == static_cast<uint32_t>(ChunkType::footer)) {
      list.stop = fmt::format("{} bytes after the footer at offset {}", end - off, off);
      break;
    }
    uint64_t left = end - off;
    if (left < kChunkHeaderSize) break;  // a chunk header cut short: the writer was killed
    const char* h = bytes_.data() + (off - origin_);
    ChunkRef c{off, get_le<uint32_t>(h), get_le<uint32_t>(h + 4), get_le<uint32_t>(h + 8),
               static_cast<uint32_t>(numbered_ + list.chunks.size())};
    std::string at = where(c);
    if (c.type < 1 || c.type > kChunkTypeCount) list.stop = fmt::format("{}: unknown chunk type {}", at, c.type);
    else if (c.raw_size > kMaxRawSize)
      list.stop = fmt::format("{}: raw size {} exceeds the limit of {}", at, c.raw_size, kMaxRawSize);
    else if (c.comp_size > compress_bound(c.raw_size))
      list.stop = fmt::format("{}: compressed size {} is impossible for raw size {}", at, c.comp_size, c.raw_size);
    if (!list.stop.empty()) break;
    // A chunk that runs past the end of the file is the one the writer was writing when it died.
    if (c.comp_size > left - kChunkHeaderSize) break;
    list.chunks.push_back(c);
    off += kChunkHeaderSize + c.comp_size;
  }
  return list;
}

// Growing the row vectors chunk by chunk would copy and page-fault them several times over, so room is reserved
// from the chunk headers: every row takes at least one raw byte per column. Capped by the file size so that a
// hostile file cannot reserve much more than it holds.
void Reader::reserve_rows(const ChunkList& list) {
  uint64_t raw[kChunkTypeCount + 1] = {};
  for (const ChunkRef& c : list.chunks) raw[c.type] += c.raw_size;
  auto rows = [&](ChunkType t, size_t columns) {
    return std::min<uint64_t>(raw[static_cast<uint32_t>(t)] / columns, bytes_.size());
  };
  s_.events.reserve(rows(ChunkType::events, Columns<Event>::kCount));
  s_.kernels.reserve(rows(ChunkType::kernels, Columns<Kernel>::kCount));
  reserve_huge(scopes_, rows(ChunkType::scopes, Columns<Scope>::kCount));
}

// Events and kernels chunks go to threads when there are several and more than one core to decode them on.
std::unique_ptr<ParallelRows> Reader::start_threads(const ChunkList& list) {
  unsigned threads = options_.threads ? options_.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<ParallelRows::Job> jobs;
  row_chunk_of_.assign(list.chunks.size(), 0);
  for (size_t i = 0; i < list.chunks.size(); ++i) {
    const ChunkRef& c = list.chunks[i];
    auto add = [&](auto& table, uint8_t which) {
      row_chunk_of_[i] = static_cast<uint32_t>(table.frames.size());
      jobs.push_back({which, row_chunk_of_[i]});
      table.frames.push_back(payload(c));
      table.raw_sizes.push_back(c.raw_size);
    };
    if (c.skip) continue;
    if (c.type == static_cast<uint32_t>(ChunkType::events)) add(std::get<RowChunks<Event>>(row_chunks_), 0);
    if (c.type == static_cast<uint32_t>(ChunkType::kernels)) add(std::get<RowChunks<Kernel>>(row_chunks_), 1);
  }
  std::get<RowChunks<Event>>(row_chunks_).base = count(ChunkType::events).base;
  std::get<RowChunks<Kernel>>(row_chunks_).base = count(ChunkType::kernels).base;
  if (threads < 2 || jobs.size() < 2) return nullptr;
  return std::make_unique<ParallelRows>(row_chunks_, std::move(jobs), std::min<size_t>(threads, jobs.size()));
}

void Reader::read_chunk(size_t index, const ChunkRef& c) {
  if (c.skip) return skip_chunk(c);
  try {
    if (threads_ && c.type == static_cast<uint32_t>(ChunkType::events))
      return take_decoded<Event>(c, row_chunk_of_[index]);
    if (threads_ && c.type == static_cast<uint32_t>(ChunkType::kernels))
      return take_decoded<Kernel>(c, row_chunk_of_[index]);
    In in(decompressor_.decompress(payload(c), c.raw_size));
    parse(static_cast<ChunkType>(c.type), in);
    in.expect_end();
  } catch (const std::exception& e) {  // memrec::Error, or cereal::Exception on a short payload
    fail(fmt::format("{}: {}", where(c), e.what()));
  }
}

// A chunk a range read leaves out: its rows still count.
void Reader::skip_chunk(const ChunkRef& c) { counts_[c.type].read += c.rows; }

// Appends the rows of a chunk whose first row is `at`, leaving out those already there (an earlier chunk's last
// block took them).
template <class T> void Reader::append_rows(std::span<const T> rows, uint64_t at) {
  PackedVector<T>& v = this->rows<T>();
  uint64_t end = count(table_of<T>()).base + v.size();
  if (end < at) throw Error("rows read out of order");  // a plan that leaves out a chunk between two it reads
  v.append(rows.subspan(static_cast<size_t>(std::min<uint64_t>(rows.size(), end - at))));
}

// A chunk a thread decoded is appended as packed when it continues the rows read so far, refers only to rows of the
// tables read so far, and its first block starts where the rows appended so far end. Else it is read the serial way.
template <class T> void Reader::take_decoded(const ChunkRef& c, size_t j) {
  DecodedChunk<T>& d = threads_->wait<T>(j);
  PackedVector<T>& v = rows<T>();
  uint64_t& read = count(table_of<T>()).read;
  bool in_place = d.packed.size() == 0 ? count(table_of<T>()).base + v.size() >= read + d.rows : v.size() == d.start;
  if (!d.ok || d.first != read || !fits(d.ids) || !in_place) {
    In in(decompressor_.decompress(payload(c), c.raw_size));
    parse(static_cast<ChunkType>(c.type), in);
    in.expect_end();
    return;
  }
  v.append(std::move(d.packed));
  read += d.rows;
}

bool Reader::fits(const RowIds<Event>& ids) const {
  return ids.stack < stack_offsets_.size() - 1 && ids.scope < count(ChunkType::scopes).read &&
         ids.stream < streams_.size();
}
bool Reader::fits(const RowIds<Kernel>& ids) const {
  return ids.name < strings_.size() && ids.stream < streams_.size();
}
template <> constexpr ChunkType Reader::table_of<Event>() { return ChunkType::events; }
template <> constexpr ChunkType Reader::table_of<Kernel>() { return ChunkType::kernels; }
template <> PackedVector<Event>& Reader::rows<Event>() { return s_.events; }
template <> PackedVector<Kernel>& Reader::rows<Kernel>() { return s_.kernels; }

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
    case ChunkType::index:
    case ChunkType::live_state:  // range reads' (range.cpp); a whole read needs neither
    case ChunkType::summary: in.blob(in.remaining()); return;  // read alone (summary.cpp)
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
  size_t from = scopes_.size();
  decode_rows<Scope>(in, count(ChunkType::scopes).read, "scopes",
                     [&](std::span<const Scope> rows) { scopes_.insert(scopes_.end(), rows.begin(), rows.end()); });
  for (size_t k = from; k < scopes_.size(); ++k) {
    const Scope& sc = scopes_[k];
    uint64_t id = count(ChunkType::scopes).read + (k - from);
    check_id(sc.name, strings_.size(), "scope name string");
    // Parents open before their children, so a parent id is smaller: no cycles.
    if (sc.parent != 0 && sc.parent >= id)
      throw Error(fmt::format("scope {} has parent {}, which is not an earlier scope", id, sc.parent));
  }
  count(ChunkType::scopes).read += scopes_.size() - from;
}

void Reader::parse_scope_ends(In& in) {
  std::vector<ScopeEnd> ends;
  in.list(ends);
  for (const ScopeEnd& e : ends) {
    check_id(e.id, count(ChunkType::scopes).read, "closed scope");
    if (e.id < count(ChunkType::scopes).base) {  // a range read did not read this scope's chunk
      early_ends_.push_back(e);
      continue;
    }
    Scope& sc = scopes_[e.id - count(ChunkType::scopes).base];
    if (sc.end_ns != -1) throw Error(fmt::format("scope {} closed twice", e.id));
    sc.end_ns = e.end_ns;
  }
}

// Rows already appended (taken by an earlier chunk's last block) are checked again but not appended twice.
void Reader::parse_events(In& in) {
  uint64_t n_stacks = stack_offsets_.size() - 1, n_scopes = count(ChunkType::scopes).read;
  uint64_t& read = count(ChunkType::events).read;
  decode_rows<Event>(in, read, "events", [&](std::span<const Event> rows) {
    for (size_t k = 0; k < rows.size(); ++k) {
      const Event& e = rows[k];
      if (e.stack >= n_stacks || e.scope >= n_scopes || e.stream >= streams_.size()) {
        check_id(e.stack, n_stacks, fmt::format("event {} stack", read + k));
        check_id(e.scope, n_scopes, fmt::format("event {} scope", read + k));
        check_id(e.stream, streams_.size(), fmt::format("event {} stream", read + k));
      }
    }
    append_rows(rows, read);
    read += rows.size();
  });
}

void Reader::parse_kernels(In& in) {
  decode_rows<Kernel>(in, count(ChunkType::kernels).read, "kernels", [&](std::span<const Kernel> rows) {
    for (const Kernel& k : rows) {
      check_id(k.name, strings_.size(), "kernel name string");
      check_id(k.stream, streams_.size(), "kernel stream");
    }
    append_rows(rows, count(ChunkType::kernels).read);
    count(ChunkType::kernels).read += rows.size();
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
    check_id(c.event, count(ChunkType::events).read, "event context's event");
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
  decode_rows<DeviceMemoryRecord>(in, count(ChunkType::device_memory).read, "device_memory",
                                  [&](std::span<const DeviceMemoryRecord> rows) {
    for (const DeviceMemoryRecord& r : rows) {
      check_id(r.source, strings_.size(), "device memory source string");
      check_id(r.stack, n_stacks, "device memory stack");
    }
    s_.device_memory.append(rows);
    count(ChunkType::device_memory).read += rows.size();
  });
}

void Reader::parse_memory_samples(In& in) {
  decode_rows<DeviceMemorySample>(in, count(ChunkType::memory_samples).read, "memory_samples",
                                  [&](std::span<const DeviceMemorySample> rows) {
    for (const DeviceMemorySample& m : rows)
      if (m.used > m.total)
        throw Error(fmt::format("memory sample uses {} bytes of a device of {}", m.used, m.total));
    s_.memory_samples.append(rows);
    count(ChunkType::memory_samples).read += rows.size();
  });
}

// Each row names strings that exist, and comes after events the file already holds, in order.
void Reader::parse_owners(In& in) {
  decode_rows<Owner>(in, count(ChunkType::owners).read, "owners", [&](std::span<const Owner> rows) {
    uint64_t last = s_.owners.empty() ? 0 : s_.owners.back().event;
    for (size_t k = 0; k < rows.size(); ++k) {
      const Owner& o = rows[k];
      check_id(o.name, strings_.size(), "owner name string");
      check_id(o.module, strings_.size(), "owner module string");
      uint64_t row = count(ChunkType::owners).read + k, events = count(ChunkType::events).read;
      if (o.event > events) throw Error(fmt::format("owner row {} comes after event {} of {}", row, o.event, events));
      if (o.event < last) throw Error(fmt::format("owner row {} comes before the row ahead of it", row));
      last = o.event;
    }
    s_.owners.append(rows);
    count(ChunkType::owners).read += rows.size();
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
          count(ChunkType::scopes).read,    count(ChunkType::events).read,     count(ChunkType::kernels).read};
}

void Reader::parse_footer(In& in) {
  Totals t;
  fields(in, t);
  uint64_t last_index = 0, summary = 0;  // where range reads start, and the summary; older files end before them
  if (in.remaining() >= sizeof last_index) in(last_index);
  if (in.remaining() == sizeof summary) in(summary);
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
  if (!s_.complete) s_.warnings.push_back(cut_short_warning(name_, s_.events.size()));
}

std::string cut_short_warning(std::string_view name, uint64_t events) {
  return fmt::format("{} was cut short (no footer): {} events read; the rest is lost", name, events);
}

uint64_t Reader::read_more(std::span<const uint8_t> bytes, uint64_t at) {
  bytes_ = {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  origin_ = at;
  if (at == 0) read_header();
  for (RowCount& c : counts_) c.base = c.read;
  row_chunks_ = {};
  ChunkList list = list_chunks();
  read_listed(list);
  options_.threads = 1;  // later reads take a flush or two: too few chunks to share out
  numbered_ += static_cast<uint32_t>(list.chunks.size());
  if (list.chunks.empty()) return std::max<uint64_t>(at, kFileHeaderSize);
  const ChunkRef& last = list.chunks.back();
  return last.offset + kChunkHeaderSize + last.comp_size;
}

namespace {

// Appends src's rows to dst; moves them when dst has none.
template <class T> void append_packed(PackedVector<T>& dst, PackedVector<T>&& src) {
  if (dst.empty()) {
    dst = std::move(src);
    return;
  }
  std::vector<T> rows;
  rows.reserve(PackedVector<T>::kBlockRows);
  for (size_t i = 0; i < src.size(); i += rows.size()) {
    rows.clear();
    src.for_each(i, std::min(src.size(), i + PackedVector<T>::kBlockRows),
                 [&](size_t, const T& row) { rows.push_back(row); });
    dst.append(rows);
  }
  src.clear();
}

}  // namespace

void Reader::append_tables(Snapshot& s) const {
  for (size_t i = s.strings.size(); i < strings_.size(); ++i) s.strings.add(strings_[i]);
  for (size_t i = s.frames.size(); i < frames_.size(); ++i) s.frames.add(frames_[i]);
  for (size_t i = s.stacks.size(); i + 1 < stack_offsets_.size(); ++i)
    s.stacks.add(std::span(stack_frames_).subspan(stack_offsets_[i], stack_offsets_[i + 1] - stack_offsets_[i]));
  if (!streams_.empty()) s.streams = streams_;
}

// The scopes read start at count(scopes).base; the ends of those before it close scopes `s` holds.
void Reader::append_scopes(Snapshot& s) {
  if (count(ChunkType::scopes).base == 0 && !scopes_.empty()) s.scopes.assign(scopes_);
  else s.scopes.append(scopes_);
  for (const ScopeEnd& e : early_ends_) s.scopes.update(e.id, [&](Scope& sc) { sc.end_ns = e.end_ns; });
  scopes_.clear();
  early_ends_.clear();
}

void Reader::append_to(Snapshot& s) {
  append_tables(s);
  append_scopes(s);
  append_packed(s.events, std::move(s_.events));
  append_packed(s.kernels, std::move(s_.kernels));
  append_packed(s.device_memory, std::move(s_.device_memory));
  append_packed(s.memory_samples, std::move(s_.memory_samples));
  append_packed(s.owners, std::move(s_.owners));
  s.event_contexts.insert(s.event_contexts.end(), s_.event_contexts.begin(), s_.event_contexts.end());
  if (!s_.metadata.empty()) s.metadata = std::move(s_.metadata);
  if (end_state_seen_ && !end_state_given_) {
    s.segments_start = std::move(s_.segments_start), s.segments_end = std::move(s_.segments_end);
    s.has_segments_start = s_.has_segments_start, s.dropped_events = s_.dropped_events;
    end_state_given_ = true;
  }
  s.complete = footer_seen_;
  s_ = Snapshot();
}

}  // namespace memrec::format_detail

namespace memrec {

using namespace format_detail;

Snapshot read_buffer(std::span<const uint8_t> bytes, const ReadOptions& options) {
  return Reader(".memrec buffer", bytes, options).read();
}

// The whole file in memory: its compressed size is a fraction of the snapshot it decodes to.
Snapshot read_file(const std::string& path, const ReadOptions& options) {
  auto [f, st] = open_for_reading(path);
  // Bytes appended after the stat (a recording still running) are left for the next read.
  // Not zeroed first, and on huge pages: faulting in a buffer this size costs as much as reading into it.
  auto size = static_cast<size_t>(st.st_size);
  auto bytes = std::make_unique_for_overwrite<uint8_t[]>(size);
  advise_huge(bytes.get(), size);
  if (std::fread(bytes.get(), 1, size, f.get()) != size) read_failed(path);
  return Reader(path, {bytes.get(), size}, options).read();
}

bool is_memrec_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  std::array<char, kMagic.size()> head{};
  return f && std::fread(head.data(), 1, head.size(), f.get()) == head.size() && head == kMagic;
}

}  // namespace memrec
