// A part of a recording (memrec/range.h): cut from a snapshot read whole, or read from the chunks the file's index
// says the part needs (docs/format.md, The index). Both go through cut(), so a range read gives what the same range
// of a whole read gives.
#include "memrec/range.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "live_state.h"
#include "reader.h"

namespace memrec {

using namespace format_detail;

int64_t parse_duration(const std::string& text, std::string_view flag, std::string_view wants) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value < 0)
    throw Error(fmt::format("{} wants {}: {}", flag, wants, text));
  std::string unit(end, text.data() + text.size());
  static const std::map<std::string, double> scale = {{"", 1e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}};
  auto it = scale.find(unit);
  if (it == scale.end()) throw Error(fmt::format("{} {}: unknown unit '{}' (use s, ms, us or ns)", flag, text, unit));
  double ns = std::round(value * it->second);
  // 2^63 is the first double past int64's range; converting it or more is undefined.
  if (ns >= 0x1p63)
    throw Error(fmt::format("{} {} is too large: times up to 292 years (9223372036 s) are counted", flag, text));
  return static_cast<int64_t>(ns);
}

namespace {

// "A..B" as its two sides.
std::optional<std::pair<std::string, std::string>> sides(const std::string& text) {
  size_t dots = text.find("..");
  if (dots == std::string::npos) return std::nullopt;
  return std::pair{text.substr(0, dots), text.substr(dots + 2)};
}

std::optional<int64_t> step_of(const std::string& text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::optional<Range> parse_range(const std::string& range, const std::string& steps) {
  if (!range.empty() && !steps.empty())
    throw Error("--range and --steps both choose the part to read: give one of them");
  if (!range.empty()) {
    std::string why = fmt::format(
        "--range wants T1..T2, two times after the start with T1 before T2 (e.g. 10ms..25ms), got '{}'", range);
    auto ab = sides(range);
    if (!ab) throw Error(why);
    Range r{.kind = Range::Kind::time, .flag = "--range " + range};
    try {
      r.first = parse_duration(ab->first, "--range", "a time");
      r.last = parse_duration(ab->second, "--range", "a time");
    } catch (const Error&) {
      throw Error(why);
    }
    if (r.last <= r.first) throw Error(why);
    return r;
  }
  if (!steps.empty()) {
    std::string why = fmt::format("--steps wants A..B, two step numbers with A at most B (e.g. 3..5), got '{}'", steps);
    auto ab = sides(steps);
    std::optional<int64_t> a = ab ? step_of(ab->first) : std::nullopt, b = ab ? step_of(ab->second) : std::nullopt;
    if (!a || !b || *b < *a) throw Error(why);
    return Range{.kind = Range::Kind::steps, .first = *a, .last = *b, .flag = "--steps " + steps};
  }
  return std::nullopt;
}

namespace {

constexpr int64_t kMinTime = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

int64_t add_clamped(int64_t t, int64_t d) { return t > kMaxTime - d ? kMaxTime : t + d; }

// A range the recording does not have (a step it did not take): the same whether the index is used or not.
struct NoSuchRange : Error {
  using Error::Error;
};

// The range as times [t1, t2] on the recording's clock. Steps run from the start of the first to the end of the
// last (a step still open runs to the end of the recording).
std::pair<int64_t, int64_t> range_times(const Range& range, int64_t origin_ns, const std::vector<StepRow>& step_rows,
                                        const std::string& name) {
  if (range.kind == Range::Kind::time) return {add_clamped(origin_ns, range.first), add_clamped(origin_ns, range.last)};
  std::map<uint64_t, StepRow> steps;  // by number, the first scope of each
  for (const StepRow& r : step_rows)
    if (auto [it, added] = steps.try_emplace(r.number, r); !added && r.id < it->second.id) it->second = r;
  if (steps.empty())
    throw NoSuchRange(fmt::format("{} has no scopes named 'step N' to take {} from (memrec record and the workloads "
                                  "name their training steps so)", name, range.flag));
  for (int64_t n : {range.first, range.last})
    if (!steps.count(static_cast<uint64_t>(n)))
      throw NoSuchRange(fmt::format("{}: {} asks for step {}, and the recording has steps {} to {}", name, range.flag,
                                    n, steps.begin()->first, steps.rbegin()->first));
  const StepRow& last = steps.at(static_cast<uint64_t>(range.last));
  return {steps.at(static_cast<uint64_t>(range.first)).start_ns, last.end_ns == -1 ? kMaxTime : last.end_ns};
}

std::vector<StepRow> step_rows(const Snapshot& s) {
  std::vector<StepRow> rows;
  for (uint32_t id = 1; id < s.scopes.size(); ++id) {
    Scope sc = s.scopes[id];
    if (sc.kind != ScopeKind::step) continue;
    if (auto n = step_number(s.strings[sc.name])) rows.push_back({id, *n, sc.start_ns, sc.end_ns});
  }
  return rows;
}

// What cut() takes a range from: a snapshot's tables and end state, its events from events_base on, the live state
// after events_base events, and the scopes that may overlap the range (ends as known).
struct Source {
  const Snapshot& s;
  uint64_t events_base = 0, owners_base = 0;  // s.events[k] is the recording's event events_base + k; owners alike
  LiveState state;
  std::vector<ScopeRow> scopes;
};

// The range's scopes: those that began by t2 and had not ended before t1, in id order; an end after t2 reads as
// still open. Returns them and the new id of each old one (0: left out).
struct RangeScopes {
  std::vector<Scope> rows{Scope{}};
  std::vector<std::pair<uint32_t, uint32_t>> ids;  // old -> new, by old id
  uint32_t of(uint32_t old) const {
    auto it = std::lower_bound(ids.begin(), ids.end(), std::pair{old, uint32_t{0}});
    return it != ids.end() && it->first == old ? it->second : 0;
  }
};

RangeScopes range_scopes(std::vector<ScopeRow> candidates, int64_t t1, int64_t t2) {
  std::sort(candidates.begin(), candidates.end(), [](const ScopeRow& a, const ScopeRow& b) { return a.id < b.id; });
  RangeScopes out;
  for (const ScopeRow& c : candidates) {
    if (c.id == 0 || c.scope.start_ns > t2 || (c.scope.end_ns != -1 && c.scope.end_ns < t1)) continue;
    out.ids.push_back({c.id, static_cast<uint32_t>(out.rows.size())});
    Scope sc = c.scope;
    if (sc.end_ns > t2) sc.end_ns = -1;
    out.rows.push_back(sc);
  }
  for (size_t i = 1; i < out.rows.size(); ++i) out.rows[i].parent = out.of(out.rows[i].parent);
  return out;
}

template <class T> void keep_in(const PackedVector<T>& from, PackedVector<T>& to, int64_t t1, int64_t t2, auto time) {
  for (const T& row : from)
    if (time(row) >= t1 && time(row) <= t2) to.push_back(row);
}

// The events of the range, [k1, k2) of `events`: from the first at or after t1 to the last at or before t2.
std::pair<size_t, size_t> events_in(const PackedVector<Event>& events, int64_t t1, int64_t t2) {
  size_t n = events.size(), k1 = 0, k2 = 0;
  while (k1 < n && events[k1].time_ns < t1) ++k1;
  for (size_t k = n; k > k1 && k2 == 0; --k)
    if (events[k - 1].time_ns <= t2) k2 = k;
  return {k1, std::max(k1, k2)};
}

// Brings src's live state to the range's start (event k1 of src.s.events): the events before it, each after the
// owner rows placed before it. Returns the first owner row not yet applied.
size_t state_at(Source& src, size_t k1) {
  const Snapshot& s = src.s;
  size_t row = 0;
  while (row < s.owners.size() && s.owners[row].event < src.events_base) ++row;
  auto name_until = [&](uint64_t event) {
    for (; row < s.owners.size() && s.owners[row].event <= event; ++row)
      src.state.name(src.owners_base + row, s.owners[row]);
  };
  for (size_t k = 0; k < k1; ++k) {
    name_until(src.events_base + k);
    src.state.apply(s.events[k]);
  }
  name_until(src.events_base + k1);
  return row;
}

// The range [t1, t2] of src: its events; as start state what was live before the first of them, as end state what
// was live after the last; the owner rows naming blocks live at its start (placed at event 0), then those placed
// among its events; its scopes, renumbered; the kernels, device memory records and samples of its times.
Snapshot cut(Source src, int64_t t1, int64_t t2, const Range& range, const std::string& name) {
  const Snapshot& s = src.s;
  Snapshot r = s.with_tables();
  r.has_segments_start = s.has_segments_start, r.dropped_events = s.dropped_events, r.complete = s.complete;
  r.warnings = s.warnings;
  auto [k1, k2] = events_in(s.events, t1, t2);
  uint64_t i1 = src.events_base + k1, i2 = src.events_base + k2;
  size_t row = state_at(src, k1);
  if (s.has_segments_start) r.segments_start = src.state.segments(s);
  for (auto [_, o] : src.state.owners()) {
    o.event = 0;
    r.owners.push_back(o);
  }
  for (; row < s.owners.size() && s.owners[row].event <= i2; ++row) {
    Owner o = s.owners[row];
    o.event -= i1;
    r.owners.push_back(o);
  }
  RangeScopes scopes = range_scopes(std::move(src.scopes), t1, t2);
  r.scopes.assign(scopes.rows);
  for (size_t k = k1; k < k2; ++k) {
    Event e = s.events[k];
    src.state.apply(e);
    e.scope = scopes.of(e.scope);
    r.events.push_back(e);
  }
  if (s.has_segments_start) r.segments_end = src.state.segments(s);
  for (EventContext c : s.event_contexts)
    if (c.event >= i1 && c.event < i2)
      r.event_contexts.push_back({c.event - i1, c.compile_context, c.user_metadata, c.extra});
  keep_in(s.kernels, r.kernels, t1, t2, [](const Kernel& k) { return k.start_ns; });
  keep_in(s.device_memory, r.device_memory, t1, t2, [](const DeviceMemoryRecord& d) { return d.time_ns; });
  keep_in(s.memory_samples, r.memory_samples, t1, t2, [](const DeviceMemorySample& m) { return m.time_ns; });
  r.warnings.push_back(fmt::format("{}: only {} was read (events {} to {}); times count from the range's start", name,
                                   range.flag, i1, i2));
  return r;
}

// ---- The index (docs/format.md, The index) ----

// A file with no index to read a range by: a complete file from before the index, or one cut short.
struct NoIndex : Error {
  using Error::Error;
};

// The chunks the index lists in file order (every chunk but the index chunks and the footer), with their step
// scopes and the footer's totals.
struct FileIndex {
  std::vector<IndexEntry> entries;
  std::vector<uint32_t> numbers;  // each entry's place among the file's chunks
  std::vector<StepRow> steps;     // the latest row of each step scope
  Totals totals;
  uint64_t owners = 0;            // owner rows (the footer does not count them)
  size_t index_chunks = 0, chunks = 0;
};

class IndexReader {
 public:
  IndexReader(std::string_view bytes) : bytes_(bytes) {}

  // The chunk whose header is at `offset`, of type `type`, whole inside the file.
  ChunkRef chunk_at(uint64_t offset, ChunkType type) const {
    if (offset < kFileHeaderSize || offset > bytes_.size() || bytes_.size() - offset < kChunkHeaderSize)
      throw Error(fmt::format("it points past the file at {}", offset));
    const char* h = bytes_.data() + offset;
    ChunkRef c{offset, get_le<uint32_t>(h), get_le<uint32_t>(h + 4), get_le<uint32_t>(h + 8)};
    if (c.type != static_cast<uint32_t>(type) || c.raw_size > kMaxRawSize || c.comp_size > compress_bound(c.raw_size) ||
        c.comp_size > bytes_.size() - offset - kChunkHeaderSize)
      throw Error(fmt::format("no {} chunk at offset {}", kChunkTypeNames[static_cast<uint32_t>(type)], offset));
    return c;
  }
  std::string_view payload(const ChunkRef& c) {
    ++read_;
    return dec_.decompress(bytes_.substr(c.offset + kChunkHeaderSize, c.comp_size), c.raw_size);
  }
  size_t chunks_read() const { return read_; }

  FileIndex load() {
    FileIndex index;
    uint64_t last = footer(index.totals);
    // Index chunks from the last back to the first; each lists the chunks between it and the one before.
    std::vector<std::vector<IndexEntry>> lists;
    std::vector<std::vector<StepRow>> steps;
    std::vector<uint64_t> at;
    for (uint64_t limit = footer_; last != 0; ++index.index_chunks) {
      if (last >= limit) throw Error("its index chunks are out of order");
      ChunkRef c = chunk_at(last, ChunkType::index);
      In in(payload(c));
      uint64_t prev = 0;
      in(prev);
      in.list(lists.emplace_back());
      in.list(steps.emplace_back());
      in.expect_end();
      at.push_back(last);
      limit = last, last = prev;
    }
    if (lists.empty()) throw NoIndex("no index");
    uint64_t after = kFileHeaderSize - 1;
    uint32_t number = 0;
    for (size_t k = lists.size(); k-- > 0;) {
      for (const IndexEntry& e : lists[k]) {
        if (e.offset <= after || e.offset >= at[k] || e.type == 0 || e.type > kChunkTypeCount ||
            e.type == static_cast<uint32_t>(ChunkType::index) || e.type == static_cast<uint32_t>(ChunkType::footer))
          throw Error(fmt::format("its entry for offset {} is out of place", e.offset));
        index.entries.push_back(e), index.numbers.push_back(number++);
        after = e.offset;
      }
      after = at[k], ++number;  // the index chunk itself
      index.steps.insert(index.steps.end(), steps[k].begin(), steps[k].end());
    }
    index.chunks = number + 1 + summary_;  // and the footer, and the summary chunk no index lists
    for (auto [type, total] : {std::pair{ChunkType::events, index.totals.events},
                               {ChunkType::kernels, index.totals.kernels}, {ChunkType::scopes, index.totals.scopes}})
      if (uint64_t rows = rows_of(index, type); rows != total)
        throw Error(fmt::format("it counts {} {} rows, the footer {}", rows,
                                kChunkTypeNames[static_cast<uint32_t>(type)], total));
    index.owners = rows_of(index, ChunkType::owners);
    rows_of(index, ChunkType::device_memory);
    rows_of(index, ChunkType::memory_samples);
    return index;
  }

 private:
  // The footer is the last chunk, and its payload 72 bytes (64 without a summary, 56 in files from before the
  // index), so its header lies in the file's last 12 + compress_bound(72) bytes. Returns the offset of the last
  // index chunk.
  uint64_t footer(Totals& totals) {
    if (bytes_.size() < kFileHeaderSize || std::memcmp(bytes_.data(), kMagic.data(), kMagic.size()) != 0)
      throw NoIndex("not a .memrec file");
    constexpr uint32_t kRaw = 8 * sizeof(uint64_t);
    size_t tail = kChunkHeaderSize + compress_bound(kRaw + sizeof(uint64_t));
    for (uint64_t off = bytes_.size() > kFileHeaderSize + tail ? bytes_.size() - tail : kFileHeaderSize;
         off + kChunkHeaderSize <= bytes_.size(); ++off) {
      const char* h = bytes_.data() + off;
      uint32_t raw = get_le<uint32_t>(h + 4);
      if (get_le<uint32_t>(h) != static_cast<uint32_t>(ChunkType::footer) || (raw != kRaw && raw != kRaw + 8) ||
          get_le<uint32_t>(h + 8) != bytes_.size() - off - kChunkHeaderSize)
        continue;
      try {
        In in(payload(chunk_at(off, ChunkType::footer)));
        uint64_t last = 0;
        fields(in, totals);
        in(last);
        summary_ = raw != kRaw;
        if (summary_) in.blob(sizeof(uint64_t));  // the summary's offset
        in.expect_end();
        footer_ = off;
        return last;
      } catch (const Error&) {  // bytes that only look like a footer's header
      }
    }
    throw NoIndex("no footer with an index");
  }

  // A row table's chunks follow each other from row 0; returns how many rows they hold.
  static uint64_t rows_of(const FileIndex& index, ChunkType type) {
    uint64_t rows = 0;
    for (const IndexEntry& e : index.entries)
      if (e.type == static_cast<uint32_t>(type)) {
        if (e.first != rows) throw Error(fmt::format("its {} rows do not follow each other", kChunkTypeNames[e.type]));
        rows += e.rows;
      }
    return rows;
  }

  std::string_view bytes_;
  Decompressor dec_;
  uint64_t footer_ = 0;
  bool summary_ = false;  // the footer gives a summary chunk
  size_t read_ = 0;
};

// A live_state chunk: the live state after `events` events, the greatest event time by then, and the scopes then
// open. Its ids are checked against the tables once they are read.
struct StoredState {
  uint64_t events = 0;
  int64_t latest_ns = kMinTime;
  std::vector<LiveState::SegmentRow> segments;
  std::vector<LiveState::BlockRow> blocks;
  std::vector<LiveState::OwnerRow> owners;
  std::vector<ScopeRow> open;

  void read(In& in) {
    in(events, latest_ns);
    in.list(segments);
    in.list(blocks);
    in.list(owners);
    in.list(open);
    in.expect_end();
  }
  // Every id refers to a row the tables hold, and the open scopes came before `first_scope`.
  void check(const Snapshot& s, uint64_t first_scope, uint64_t total_owners) const {
    auto check_id = [](uint64_t id, uint64_t size, std::string_view what) {
      if (id >= size) throw Error(fmt::format("its live state names {} {} of {}", what, id, size));
    };
    for (const auto& r : segments) {
      check_id(r.segment.stack, s.stacks.size(), "stack");
      check_id(r.segment.stream, s.streams.size(), "stream");
    }
    for (const auto& b : blocks) check_id(b.stack, s.stacks.size(), "stack");
    for (const auto& o : owners) {
      check_id(o.owner.name, s.strings.size(), "string");
      check_id(o.owner.module, s.strings.size(), "string");
      check_id(o.row, total_owners, "owner row");
      if (o.owner.event >= events) throw Error("its live state holds an owner row from after it");
    }
    for (const ScopeRow& sc : open) {
      check_id(sc.id, first_scope, "scope");
      check_id(sc.scope.name, s.strings.size(), "string");
      check_id(sc.scope.parent, std::max<uint64_t>(sc.id, 1), "parent scope");
    }
  }
};

bool is(const IndexEntry& e, ChunkType t) { return e.type == static_cast<uint32_t>(t); }

// The time of the recording's first event: the first row of the first events chunk.
int64_t first_event_time(const FileIndex& index, IndexReader& ir) {
  for (const IndexEntry& e : index.entries)
    if (is(e, ChunkType::events) && e.rows > 0) {
      In in(ir.payload(ir.chunk_at(e.offset, ChunkType::events)));
      RowReader<Event> rows(in);
      rows.open();
      Event first;
      rows.next(std::span(&first, 1));
      return first.time_ns;
    }
  return 0;
}

// Which chunks a range [t1, t2] needs (docs/format.md, The index): every table chunk; the events from the last live
// state before the range through the range's last events chunk; the scopes and scope ends written after that state
// up to the events chunk after the range, and the scopes written before it that began after its time; the kernels
// whose times meet the range. Row chunks are taken as one run per table.
class Plan {
 public:
  Plan(const FileIndex& index, int64_t t1, int64_t t2) : index_(index), t1_(t1), t2_(t2) {}

  // The live state to start from (its entry), or none: the file's start state, before the first event.
  const IndexEntry* state() {
    std::vector<size_t> events = positions(ChunkType::events);
    size_t a = 0;
    while (a < events.size() && index_.entries[events[a]].max_ns < t1_) ++a;
    size_t b = events.size();
    while (b > 0 && index_.entries[events[b - 1]].min_ns > t2_) --b;
    // The chunks holding the range's first event (or the end) and its last.
    uint64_t first_needed = a < events.size() ? index_.entries[events[a]].first : index_.totals.events;
    size_t last = events.empty() ? 0 : std::max(b, std::min(a + 1, events.size()));  // one past
    span_end_ = last < events.size() ? index_.entries[events[last]].offset : kMaxOffset;
    events_to_ = last < events.size() ? index_.entries[events[last]].first : index_.totals.events;
    const IndexEntry* best = nullptr;
    for (const IndexEntry& e : index_.entries)
      if (is(e, ChunkType::live_state) && e.first <= first_needed && e.offset < span_end_) best = &e;
    state_ = best;
    return best;
  }

  ChunkList chunks(int64_t state_ns) const {
    uint64_t from = state_ ? state_->offset : 0, events_from = state_ ? state_->first : 0;
    ChunkList plan;
    std::vector<bool> read(index_.entries.size(), false);
    auto run = [&](ChunkType type, auto wanted) {  // the chunks of `type` from the first wanted to the last
      std::vector<size_t> at = positions(type);
      size_t lo = at.size(), hi = 0;
      for (size_t k = 0; k < at.size(); ++k)
        if (wanted(index_.entries[at[k]])) lo = std::min(lo, k), hi = k + 1;
      for (size_t k = lo; k < hi; ++k) read[at[k]] = true;
    };
    run(ChunkType::events, [&](const IndexEntry& e) { return e.first >= events_from && e.offset < span_end_; });
    run(ChunkType::scopes, [&](const IndexEntry& e) {
      return e.offset < span_end_ && (e.offset > from || (e.max_ns > state_ns && e.min_ns <= t2_));
    });
    auto meets = [&](const IndexEntry& e) { return e.max_ns >= t1_ && e.min_ns <= t2_; };
    run(ChunkType::kernels, meets);
    run(ChunkType::device_memory, meets);
    run(ChunkType::memory_samples, meets);
    // Owner rows from the live state's events to the last events read (the owners chunks' range is of events).
    run(ChunkType::owners, [&](const IndexEntry& e) {
      return e.max_ns >= static_cast<int64_t>(events_from) && e.min_ns <= static_cast<int64_t>(events_to_);
    });
    for (size_t k = 0; k < index_.entries.size(); ++k) {
      const IndexEntry& e = index_.entries[k];
      bool table = is(e, ChunkType::strings) || is(e, ChunkType::frames) || is(e, ChunkType::stacks) ||
                   is(e, ChunkType::streams) || is(e, ChunkType::metadata) || is(e, ChunkType::end_state) ||
                   is(e, ChunkType::event_contexts);
      if (table || (is(e, ChunkType::scope_ends) && e.offset > from && e.offset < span_end_)) read[k] = true;
      plan.chunks.push_back(ChunkRef{.offset = e.offset, .type = e.type, .number = index_.numbers[k], .skip = !read[k],
                                     .first = e.first, .rows = e.rows});
    }
    return plan;
  }

 private:
  static constexpr uint64_t kMaxOffset = std::numeric_limits<uint64_t>::max();
  std::vector<size_t> positions(ChunkType type) const {
    std::vector<size_t> at;
    for (size_t k = 0; k < index_.entries.size(); ++k)
      if (is(index_.entries[k], type)) at.push_back(k);
    return at;
  }

  const FileIndex& index_;
  int64_t t1_, t2_;
  uint64_t span_end_ = kMaxOffset;  // the events chunk after the range's last one
  uint64_t events_to_ = 0;          // the events up to it
  const IndexEntry* state_ = nullptr;
};

// A file mapped into memory: a range read touches only the pages of the chunks it reads.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    auto fail = [&](std::string_view what) { throw Error(fmt::format("{}: {}: {}", path, what, errno_text())); };
    if (fd < 0) fail("cannot open");
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      ::close(fd);
      fail("cannot stat");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (S_ISREG(st.st_mode) && size_ > 0) data_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (data_ == MAP_FAILED) data_ = nullptr;
  }
  ~MappedFile() {
    if (data_) munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return data_ ? std::string_view(static_cast<const char*>(data_), size_) : ""; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

RangeRead read_with_index(const std::string& path, std::string_view bytes, const Range& range,
                          const ReadOptions& options) {
  IndexReader ir(bytes);
  FileIndex index = ir.load();
  int64_t origin = first_event_time(index, ir);
  auto [t1, t2] = range_times(range, origin, index.steps, path);
  Plan plan(index, t1, t2);
  const IndexEntry* state = plan.state();
  StoredState stored;
  if (state) {
    In in(ir.payload(ir.chunk_at(state->offset, ChunkType::live_state)));
    stored.read(in);
    if (stored.events != state->first) throw Error("its live state is not where its entry says");
  }
  ChunkList chunks = plan.chunks(stored.latest_ns);
  for (ChunkRef& c : chunks.chunks)
    if (!c.skip) {
      ChunkRef header = ir.chunk_at(c.offset, static_cast<ChunkType>(c.type));
      c.raw_size = header.raw_size, c.comp_size = header.comp_size;
    }
  Reader reader(path, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, options);
  Reader::Part part = reader.read_part(chunks);
  if (!part.s.events.empty() && part.events_base != stored.events)
    throw Error("its live state is not where an events chunk starts");
  uint64_t state_offset = state ? state->offset : 0, first_scope = index.totals.scopes;  // the first written after it
  for (const IndexEntry& e : index.entries)
    if (is(e, ChunkType::scopes) && e.offset > state_offset) {
      first_scope = e.first;
      break;
    }
  stored.check(part.s, first_scope, index.owners);

  Source src{part.s, stored.events, part.owners_base,
             state ? LiveState::from_rows(stored.segments, stored.blocks, stored.owners) : LiveState(part.s), {}};
  // The scopes open at the live state, with the ends written since; then the scopes read, but of those written
  // before the live state only the ones that began after it (the others ended before it or are among the open ones).
  std::map<uint32_t, int64_t> ends;
  for (const ScopeEnd& e : part.early_ends) ends[e.id] = e.end_ns;
  uint64_t read_from = part.scopes_base, read_to = part.scopes_base + part.s.scopes.size();
  for (ScopeRow sc : stored.open) {
    if (auto it = ends.find(sc.id); it != ends.end() && sc.scope.end_ns == -1) sc.scope.end_ns = it->second;
    if (sc.scope.end_ns == -1 && sc.id >= read_from && sc.id < read_to)
      sc.scope.end_ns = part.s.scopes[sc.id - read_from].end_ns;
    src.scopes.push_back(sc);
  }
  for (uint64_t id = read_from; id < read_to; ++id) {
    Scope sc = part.s.scopes[id - read_from];
    if (id >= first_scope || sc.start_ns > stored.latest_ns) src.scopes.push_back({static_cast<uint32_t>(id), sc});
  }
  RangeRead out;
  out.snapshot = cut(std::move(src), t1, t2, range, path);
  out.chunks_total = index.chunks;
  out.chunks_read = ir.chunks_read();
  for (const ChunkRef& c : chunks.chunks) out.chunks_read += !c.skip;
  return out;
}

}  // namespace

Snapshot cut_range(const Snapshot& s, const Range& range, const std::string& name) {
  int64_t origin = s.events.empty() ? 0 : s.events[0].time_ns;
  auto [t1, t2] = range_times(range, origin, step_rows(s), name);
  Source src{s, 0, 0, LiveState(s), {}};
  for (uint32_t id = 1; id < s.scopes.size(); ++id) src.scopes.push_back({id, s.scopes[id]});
  return cut(std::move(src), t1, t2, range, name);
}

namespace {

// Through the index where it serves, else cut from whole(), with a note why.
template <class Whole>
RangeRead read_part(const std::string& name, std::string_view bytes, const Range& range, const ReadOptions& options,
                    Whole whole) {
  std::string why;
  try {
    return read_with_index(name, bytes, range, options);
  } catch (const NoSuchRange&) {
    throw;
  } catch (const NoIndex&) {
    why = "it has no index (it was written before memrec kept one, or cut short)";
  } catch (const std::exception& e) {  // memrec::Error, or cereal::Exception on a short payload
    why = fmt::format("its index could not be used ({})", e.what());
  }
  RangeRead out;
  out.snapshot = cut_range(whole(), range, name);  // a damaged chunk gives its error here
  out.snapshot.warnings.push_back(fmt::format("{} was read whole for {}: {}", name, range.flag, why));
  return out;
}

}  // namespace

RangeRead read_range(const std::string& path, const Range& range, const ReadOptions& options) {
  MappedFile file(path);
  return read_part(path, file.bytes(), range, options, [&] { return read_file(path, options); });
}

RangeRead read_range(std::span<const uint8_t> bytes, const Range& range, const ReadOptions& options) {
  std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return read_part(".memrec buffer", view, range, options, [&] { return read_buffer(bytes, options); });
}

}  // namespace memrec
