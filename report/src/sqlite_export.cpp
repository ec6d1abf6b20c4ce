// The tables of docs/sql.md. Raw facts are written as recorded; the blocks and the totals are the replay's, so a
// query gives the numbers `memrec stats` prints.
#include "memrec/sqlite_export.h"

#include <array>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "memrec/analysis.h"
#include "memrec/attribution.h"
#include "memrec/sites.h"
#include "sqlite.h"

namespace memrec {
namespace {

using sql::Database;
using sql::Statement;

constexpr const char* kSchema = R"(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE devices (device INTEGER PRIMARY KEY, events INTEGER, start_ns INTEGER, end_ns INTEGER,
  initial_allocated INTEGER, initial_reserved INTEGER);
CREATE TABLE events (id INTEGER PRIMARY KEY, device INTEGER, step INTEGER, time_ns INTEGER, since_start_ns INTEGER,
  action TEXT, addr INTEGER, size INTEGER, block_size INTEGER, stream INTEGER, stack INTEGER, scope INTEGER,
  allocated INTEGER, active INTEGER, reserved INTEGER);
CREATE TABLE blocks (device INTEGER, id INTEGER, addr INTEGER, size INTEGER, requested_size INTEGER, stream INTEGER,
  alloc_step INTEGER, free_step INTEGER, completed_step INTEGER, alloc_ns INTEGER, free_ns INTEGER, stack INTEGER,
  scope INTEGER, site TEXT, op TEXT, module TEXT, phase TEXT, category TEXT, layer TEXT, pool TEXT, owner TEXT,
  owner_kind TEXT, PRIMARY KEY (device, id));
CREATE TABLE frames (id INTEGER PRIMARY KEY, function TEXT, file TEXT, line INTEGER, library TEXT, pc INTEGER,
  user INTEGER);
CREATE TABLE stacks (stack INTEGER, depth INTEGER, frame INTEGER, PRIMARY KEY (stack, depth));
CREATE TABLE scopes (id INTEGER PRIMARY KEY, kind TEXT, name TEXT, parent INTEGER, device INTEGER, start_ns INTEGER,
  end_ns INTEGER);
CREATE TABLE kernels (id INTEGER PRIMARY KEY, device INTEGER, kind TEXT, name TEXT, stream INTEGER, start_ns INTEGER,
  end_ns INTEGER, correlation INTEGER, bytes INTEGER);
CREATE TABLE segments (at TEXT, device INTEGER, addr INTEGER, size INTEGER, allocated INTEGER, active INTEGER,
  requested INTEGER, stream INTEGER, pool TEXT, is_large INTEGER, expandable INTEGER, stack INTEGER);
)";

// Indexes for the documented queries, built once the rows are in (faster than keeping them while inserting).
constexpr const char* kIndexes = R"(
CREATE INDEX events_by_step ON events (device, step);
CREATE INDEX blocks_by_alloc ON blocks (device, alloc_step);
CREATE INDEX kernels_by_start ON kernels (device, start_ns);
)";

// A step as a column: NULL for "never" (kNoEvent), -1 for "before the recording began".
std::optional<int64_t> step_column(uint32_t step) {
  if (step == kNoEvent) return std::nullopt;
  return step == kBeforeStart ? -1 : int64_t{step};
}

std::optional<int64_t> time_column(const Replay& r, uint32_t step) {
  if (step == kNoEvent || step == kBeforeStart) return std::nullopt;
  return r.time_of(step);
}

// A grouping key as a column: NULL where stats shows "<none>".
std::optional<std::string_view> key_column(const std::string& key) {
  if (key == "<none>") return std::nullopt;
  return key;
}

void write_meta(Database& db, const Snapshot& s) {
  Statement row(db, "INSERT INTO meta VALUES (?, ?)");
  for (const auto& [key, value] : s.metadata) (row << key << value).insert();
  (row << "memrec.schema" << "1").insert();
  (row << "memrec.complete" << (s.complete ? "1" : "0")).insert();
  (row << "memrec.dropped_events" << std::to_string(s.dropped_events)).insert();
  for (size_t i = 0; i < s.warnings.size(); ++i) (row << fmt::format("memrec.warning.{}", i) << s.warnings[i]).insert();
}

void write_device(Database& db, const Replay& r) {
  int64_t start = r.time_of(kNoEvent), end = r.steps() ? r.time_of(r.steps() - 1) : start;
  Statement row(db, "INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?)");
  (row << r.device() << r.steps() << start << end << r.initial().allocated << r.initial().reserved).insert();
}

void write_events(Database& db, const Replay& r) {
  std::vector<Totals> after;  // collected first: the rows then come from one pass over the events
  after.reserve(r.steps());
  r.for_each_after(0, r.steps(), [&](uint32_t, const Totals& t) { after.push_back(t); });
  Statement row(db, "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  int64_t start = r.time_of(kNoEvent);
  r.for_each_step(0, r.steps(), [&](uint32_t step, const Event& e) {
    const Totals& t = after[step];
    row << r.event_of(step) << e.device << step << e.time_ns << e.time_ns - start << to_string(e.action) << e.addr
        << e.size << e.block_size() << e.stream << e.stack << e.scope << t.allocated << t.active << t.reserved;
    row.insert();
  });
}

// Every grouping's key of every block, in GroupBy's order.
std::array<BlockKeys, kGroupByCount> all_keys(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids,
                                  std::span<const Category> categories) {
  std::array<BlockKeys, kGroupByCount> out;
  for (size_t by = 0; by < out.size(); ++by) out[by] = block_keys(s, r, ids, static_cast<GroupBy>(by), categories);
  return out;
}

void write_blocks(Database& db, const Snapshot& s, const Replay& r) {
  std::vector<uint32_t> ids(r.allocations().size());
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<Category> categories = categorize(s, r);
  std::array<BlockKeys, kGroupByCount> keys = all_keys(s, r, ids, categories);
  Statement row(db, "INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t id = ids[i];
    Allocation a = r.allocation(id);
    uint32_t rounding = a.event == kNoEvent ? 0 : s.events[a.event].rounding;
    uint32_t owner = r.owner_of(id);
    row << r.device() << id << a.addr << a.size + rounding << a.size << a.stream
        << step_column(a.alloc_step).value_or(-1) << step_column(a.free_step) << step_column(a.completed_step)
        << time_column(r, a.alloc_step) << time_column(r, a.free_step) << a.stack << a.scope;
    for (const BlockKeys& k : keys) row << key_column(k.keys[k.of[i]]);  // site, op, ...: GroupBy's order
    row << (owner == kNoOwner ? std::nullopt : std::optional(to_string(s.owners[owner].kind)));
    row.insert();
  }
}

void write_frames(Database& db, const Snapshot& s) {
  Statement row(db, "INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (uint32_t id = 0; id < s.frames.size(); ++id) {
    const Frame& f = s.frames[id];
    row << id << s.strings[f.function] << s.strings[f.file]
        << (f.line == kUnknownLine ? std::nullopt : std::optional(f.line)) << s.strings[f.library] << f.pc
        << is_user_frame(s, id);
    row.insert();
  }
}

void write_stacks(Database& db, const Snapshot& s) {
  Statement row(db, "INSERT INTO stacks VALUES (?, ?, ?)");
  for (uint32_t stack = 1; stack < s.stacks.size(); ++stack) {
    std::span<const uint32_t> frames = s.stacks[stack];
    for (size_t depth = 0; depth < frames.size(); ++depth) (row << stack << depth << frames[depth]).insert();
  }
}

void write_scopes(Database& db, const Snapshot& s) {
  Statement row(db, "INSERT INTO scopes VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (uint32_t id = 1; id < s.scopes.size(); ++id) {
    const Scope& sc = s.scopes[id];
    row << id << to_string(sc.kind) << s.strings[sc.name] << (sc.parent ? std::optional(sc.parent) : std::nullopt)
        << sc.device << sc.start_ns << (sc.end_ns < sc.start_ns ? std::nullopt : std::optional(sc.end_ns));
    row.insert();
  }
}

void write_kernels(Database& db, const Snapshot& s) {
  Statement row(db, "INSERT INTO kernels VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (size_t id = 0; id < s.kernels.size(); ++id) {
    const Kernel& k = s.kernels[id];
    row << id << k.device << to_string(k.kind) << s.strings[k.name] << k.stream << k.start_ns << k.end_ns
        << k.correlation << k.bytes;
    row.insert();
  }
}

void write_segments(Database& db, const std::vector<Segment>& segments, std::string_view at) {
  Statement row(db, "INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const Segment& seg : segments) {
    row << at << seg.device << seg.addr << seg.total_size << seg.allocated_size << seg.active_size
        << seg.requested_size << seg.stream << pool_name(seg) << seg.is_large << seg.is_expandable << seg.stack;
    row.insert();
  }
}

}  // namespace

void export_sqlite_file(const Snapshot& s, const std::string& path) {
  Database db(path);
  db.exec(kSchema);
  write_meta(db, s);
  for (uint8_t device : devices_of(s)) {
    Replay r(s, device);
    write_device(db, r);
    write_events(db, r);
    write_blocks(db, s, r);
  }
  write_frames(db, s);
  write_stacks(db, s);
  write_scopes(db, s);
  write_kernels(db, s);
  if (s.has_segments_start) write_segments(db, s.segments_start, "start");
  write_segments(db, s.segments_end, "end");
  db.exec(kIndexes);
  db.exec("COMMIT");
}

}  // namespace memrec
