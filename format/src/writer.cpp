// The .memrec writer (docs/format.md): each flush appends what the snapshot gained as self-contained chunks.
#include "memrec/format.h"

#include "chunk.h"
#include "columns.h"
#include "live_state.h"
#include "payload.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace memrec {

using namespace format_detail;

namespace {

// What the index gives a row chunk's range by: a time, and for owner rows their place among the events.
int64_t row_time(const Event& e) { return e.time_ns; }
int64_t row_time(const Kernel& k) { return k.start_ns; }
int64_t row_time(const Scope& s) { return s.start_ns; }
int64_t row_time(const DeviceMemoryRecord& r) { return r.time_ns; }
int64_t row_time(const DeviceMemorySample& m) { return m.time_ns; }
int64_t row_time(const Owner& o) { return static_cast<int64_t>(o.event); }

// The rows a flush reads back: the snapshot's, whose tables begin at `start` once Writer::flush_and_release() let
// go of the rows before, and the scopes the writer held back from those.
struct Rows {
  const Snapshot& s;
  const RowStart& start;
  const std::map<uint32_t, Scope>& held;
  Scope scope(uint32_t id) const { return id < start.scopes ? held.at(id) : s.scopes[id - start.scopes]; }
  Owner owner(uint64_t row) const { return s.owners[row - start.owners]; }
  uint64_t owners() const { return start.owners + s.owners.size(); }
};

// An index chunk lists at most about this many chunks, so that the writer's memory stays bounded between live states.
constexpr size_t kEntriesPerIndex = 4096;

// What the index needs as the chunks go out (docs/format.md, The index): an entry per chunk since the last index
// chunk, and the live state after the events written so far, stored every WriterOptions::events_per_live_state
// events or so.
struct Indexer {
  std::vector<IndexEntry> entries;
  uint64_t last_index = 0;  // offset of the last index chunk; 0 before the first
  LiveState live;
  uint64_t events = 0, owners = 0;  // rows applied to `live`
  uint64_t owner_at = UINT64_MAX;   // next_owner(), kept for the events of a flush
  int64_t latest_ns = std::numeric_limits<int64_t>::min();  // the greatest time of those events
  uint64_t state_events = 0;        // events at the last live state
  uint64_t state_every = 0;         // WriterOptions::events_per_live_state
  std::vector<uint32_t> scopes;     // written scopes that may still be open at a later live state
  std::set<uint32_t> steps;         // step scopes written or closed since the last index chunk

  // Applies the next event, after the owner rows placed before it.
  void take(const Rows& rows, const Event& e) {
    for (; owner_at <= events; owner_at = next_owner(rows)) live.name(owners, rows.owner(owners)), ++owners;
    live.apply(e);
    latest_ns = std::max(latest_ns, e.time_ns);
    ++events;
  }
  // The event count that the next owner row comes before (UINT64_MAX: none yet).
  uint64_t next_owner(const Rows& rows) const {
    return owners < rows.owners() ? rows.owner(owners).event : UINT64_MAX;
  }
  // A live state costs about its blocks: stored at most once per 8 events per live block.
  bool state_due() const { return events - state_events >= std::max<uint64_t>(state_every, 8 * live.blocks()); }
  // Forgets the written scopes that ended before the latest event time: they are open at no later live state.
  void forget_ended(const Rows& rows) {
    std::erase_if(scopes, [&](uint32_t id) {
      Scope sc = rows.scope(id);
      return sc.end_ns != -1 && sc.end_ns < latest_ns;
    });
  }
  // The written scopes that began by the latest event time and had not ended before it.
  std::vector<ScopeRow> open_scopes(const Rows& rows) {
    forget_ended(rows);
    std::vector<ScopeRow> open;
    for (uint32_t id : scopes)
      if (Scope sc = rows.scope(id); sc.start_ns <= latest_ns) open.push_back({id, sc});
    return open;
  }
  std::vector<StepRow> step_rows(const Rows& rows) const {
    std::vector<StepRow> out;
    for (uint32_t id : steps) {
      Scope sc = rows.scope(id);
      if (auto n = step_number(rows.s.strings[sc.name])) out.push_back({id, *n, sc.start_ns, sc.end_ns});
    }
    return out;
  }
};

}  // namespace

struct Writer::State {
  std::string path;
  File file;
  Compressor compressor;
  std::string payload;  // reused from chunk to chunk
  ColumnEncoder columns;
  uint64_t bytes = 0;
  Totals written;                        // rows of each table already in the file
  uint64_t written_contexts = 0;         // of Snapshot::event_contexts; not in Totals, so the footer keeps its shape
  uint64_t written_device_memory = 0;    // ... and of the device memory records and samples, for the same reason
  uint64_t written_samples = 0;
  uint64_t written_owners = 0;
  std::vector<uint32_t> open_scopes;     // written while end_ns == -1; ascending
  Indexer index;
  RowStart start;                        // rows of each table let go of by flush_and_release()
  std::map<uint32_t, Scope> held_scopes;  // of the scopes let go of, those later chunks read: open or indexed
  bool started = false;                  // the live state holds the snapshot's start state
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
  Rows rows(const Snapshot& s) const { return {s, start, held_scopes}; }
  void write_live_state(const Rows& rows);
  void write_index(const Rows& rows);
  template <class Fn> void chunk(ChunkType type, Fn&& fill) {
    Out out(payload);
    fill(out);
    write_chunk(type, payload);
  }
  void write_strings(const Snapshot& s);
  void write_tables(const Snapshot& s);
  void write_scope_ends(const Rows& rows);
  // Writes the new rows chunk by chunk, calling each(row) for every row and after_chunk() after each chunk. Row 0
  // of `rows` is row `first` of the recording.
  template <class T, class Each = void (*)(const T&), class After = void (*)()>
  void write_rows(ChunkType type, const PackedVector<T>& rows, uint64_t first, uint64_t& written_rows,
                  Each each = [](const T&) {}, After after_chunk = [] {});
  void write_metadata(const Snapshot& s);
  void write_event_contexts(const Snapshot& s);
  void flush(const Snapshot& s);
  void release(Snapshot& s);
};

void Writer::State::write_chunk(ChunkType type, const std::string& raw) {
  if (raw.size() > kMaxRawSize)
    throw Error(fmt::format("{}: {} chunk of {} bytes exceeds the format's {} byte limit", path,
                            kChunkTypeNames[static_cast<uint32_t>(type)], raw.size(), kMaxRawSize));
  std::string_view frame = compressor.compress(raw, path);
  if (type != ChunkType::index) index.entries.push_back({.offset = bytes, .type = static_cast<uint32_t>(type)});
  char header[kChunkHeaderSize];
  put_le(header, static_cast<uint32_t>(type));
  put_le(header + 4, static_cast<uint32_t>(raw.size()));
  put_le(header + 8, static_cast<uint32_t>(frame.size()));
  write(header, sizeof header);
  write(frame.data(), frame.size());
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

void Writer::State::write_scope_ends(const Rows& rows) {
  std::vector<ScopeEnd> ends;
  std::erase_if(open_scopes, [&](uint32_t id) {
    Scope sc = rows.scope(id);
    if (sc.end_ns == -1) return false;
    ends.push_back({id, sc.end_ns});
    if (sc.kind == ScopeKind::step) index.steps.insert(id);
    return true;
  });
  if (!ends.empty()) chunk(ChunkType::scope_ends, [&](Out& o) { o.list(ends); });
}

// Each row chunk's index entry gives its rows and their least and greatest time.
template <class T, class Each, class After>
void Writer::State::write_rows(ChunkType type, const PackedVector<T>& rows, uint64_t first, uint64_t& written_rows,
                               Each each, After after_chunk) {
  uint64_t end = first + rows.size();
  if (end < written_rows) throw Error(fmt::format("{}: the snapshot lost rows since the last flush", path));
  while (written_rows < end) {
    size_t n = std::min<uint64_t>(kRowsPerChunk, end - written_rows);
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    auto row = [&](const T& r) {
      lo = std::min(lo, row_time(r)), hi = std::max(hi, row_time(r));
      each(r);
    };
    chunk(type, [&](Out& o) { encode_rows(o, columns, rows, written_rows - first, written_rows, n, row); });
    index.entries.back() = {index.entries.back().offset, static_cast<uint32_t>(type), written_rows, n, lo, hi};
    written_rows += n;
    after_chunk();
  }
}

void Writer::State::write_live_state(const Rows& rows) {
  chunk(ChunkType::live_state, [&](Out& o) {
    o(index.events, index.latest_ns);
    o.list(index.live.segment_rows());
    o.list(index.live.block_rows());
    o.list(index.live.owner_rows());
    o.list(index.open_scopes(rows));
  });
  index.entries.back().first = index.events;
  index.state_events = index.events;
}

void Writer::State::write_index(const Rows& rows) {
  uint64_t at = bytes;
  chunk(ChunkType::index, [&](Out& o) {
    o(index.last_index);
    o.list(index.entries);
    o.list(index.step_rows(rows));
  });
  index.last_index = at;
  index.entries.clear();
  index.steps.clear();
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
  if (!started) index.live = LiveState(s), started = true;
  const Rows now = rows(s);
  write_strings(s);
  write_tables(s);
  // Scopes already written that were open get their end first; then new scopes, some of them open.
  write_scope_ends(now);
  uint64_t first_new_scope = written.scopes;
  write_rows(ChunkType::scopes, s.scopes, start.scopes, written.scopes);
  for (uint64_t id = first_new_scope; id < written.scopes; ++id) {
    Scope sc = now.scope(static_cast<uint32_t>(id));
    if (sc.end_ns == -1) open_scopes.push_back(static_cast<uint32_t>(id));
    if (id > 0) index.scopes.push_back(static_cast<uint32_t>(id));
    if (sc.kind == ScopeKind::step && id > 0) index.steps.insert(static_cast<uint32_t>(id));
  }
  // The live state follows the events as they are written; an events chunk is followed by it (and an index chunk)
  // when one is due.
  index.owner_at = index.next_owner(now);
  write_rows(ChunkType::events, s.events, start.events, written.events, [&](const Event& e) { index.take(now, e); },
             [&] {
               if (!index.state_due()) return;
               write_live_state(now);
               write_index(now);
             });
  index.forget_ended(now);
  write_rows(ChunkType::kernels, s.kernels, start.kernels, written.kernels);
  write_event_contexts(s);
  write_rows(ChunkType::device_memory, s.device_memory, start.device_memory, written_device_memory);
  write_rows(ChunkType::memory_samples, s.memory_samples, start.samples, written_samples);
  // After the events that each row's `event` counts.
  write_rows(ChunkType::owners, s.owners, start.owners, written_owners);
  write_metadata(s);
  if (index.entries.size() >= kEntriesPerIndex) write_index(now);  // a long run at a low rate of events
  if (std::fflush(file.get()) != 0) fail("write failed");
}

// The file holds every row of `s` now. What later chunks read of them stays: the scopes still open or that the next
// live state or index chunk names (held apart, by id), and the owner rows the index has yet to place.
void Writer::State::release(Snapshot& s) {
  const Rows now = rows(s);
  std::map<uint32_t, Scope> held;
  auto hold = [&](uint32_t id) { held.try_emplace(id, now.scope(id)); };
  std::ranges::for_each(open_scopes, hold);
  std::ranges::for_each(index.scopes, hold);
  std::ranges::for_each(index.steps, hold);
  PackedVector<Owner> unplaced;
  for (uint64_t row = index.owners; row < now.owners(); ++row) unplaced.push_back(now.owner(row));
  held_scopes = std::move(held);
  s.owners = std::move(unplaced);
  start = {written.scopes, written.events, written.kernels, written_device_memory, written_samples, index.owners};
  s.scopes.clear();
  s.events.clear();
  s.kernels.clear();
  s.device_memory.clear();
  s.memory_samples.clear();
}

Writer::Writer(const std::string& path, const WriterOptions& options) : state_(std::make_unique<State>()) {
  state_->path = path;
  state_->index.state_every = std::max<uint64_t>(1, options.events_per_live_state);
  state_->file.reset(std::fopen(path.c_str(), "wbe"));  // close-on-exec: programs the recorded one starts get no copy
  if (!state_->file) state_->fail("cannot create");
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

void Writer::flush_and_release(Snapshot& s) {
  state_->flush(s);
  state_->release(s);
}

const RowStart& Writer::released() const { return state_->start; }

// A close for a scope that is not open (none the recorder makes) changes nothing.
void Writer::end_scope(uint32_t id, int64_t end_ns) {
  auto it = state_->held_scopes.find(id);
  if (it != state_->held_scopes.end() && it->second.end_ns == -1) it->second.end_ns = end_ns;
}

size_t Writer::scopes_held() const { return state_->held_scopes.size(); }

void Writer::close(const Snapshot& s) {
  State& st = *state_;
  st.flush(s);
  st.chunk(ChunkType::end_state, [&](Out& o) {
    o.list(s.segments_start);
    o.list(s.segments_end);
    o.flag(s.has_segments_start);
    o(s.dropped_events);
  });
  st.write_index(st.rows(s));  // the last one: its chunks, end_state among them
  st.chunk(ChunkType::footer, [&](Out& o) {
    fields(o, st.written);
    o(st.index.last_index);
  });
  st.closed = true;
  if (std::fclose(st.file.release()) != 0) st.fail("write failed");
}

uint64_t Writer::bytes_written() const { return state_->bytes; }

void write_file(const Snapshot& s, const std::string& path, const WriterOptions& options) {
  Writer(path, options).close(s);
}

}  // namespace memrec
