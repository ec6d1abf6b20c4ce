// Long synthetic recordings written as a recorder writes them, flush by flush, for the tests of the file's index and
// of the writer's bounded memory; and what tells two snapshots apart.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../../bench/synthetic_training.h"
#include "memrec/format.h"
#include "memrec/snapshot.h"

namespace memrec::test {

// The parts in which two snapshots differ ("" when none), for failures that say where.
inline std::string differences(const Snapshot& a, const Snapshot& b) {
  std::string out;
  auto note = [&](bool same, const char* what) {
    if (!same) out += std::string(out.empty() ? "" : ", ") + what;
  };
  note(a.metadata == b.metadata, "metadata");
  note(a.strings == b.strings && a.frames == b.frames && a.stacks == b.stacks && a.streams == b.streams, "tables");
  note(a.scopes == b.scopes, "scopes");
  note(a.events == b.events, "events");
  note(a.kernels == b.kernels, "kernels");
  note(a.event_contexts == b.event_contexts, "event contexts");
  note(a.device_memory == b.device_memory && a.memory_samples == b.memory_samples, "device memory");
  note(a.owners == b.owners, "owners");
  note(a.segments_start == b.segments_start, "start state");
  note(a.segments_end == b.segments_end, "end state");
  note(a.has_segments_start == b.has_segments_start && a.dropped_events == b.dropped_events &&
           a.complete == b.complete, "flags");
  note(a.warnings == b.warnings, "warnings");
  return out;
}

// A long training run as the recorder would have it: step scopes named "step N", a known (empty) start state, and
// owner rows naming some of the blocks allocated.
inline Snapshot long_run(size_t events, uint32_t seed) {
  Snapshot s = make_training_history(events, seed);
  s.has_segments_start = true;
  uint64_t step = 0;
  for (uint32_t id = 1; id < s.scopes.size(); ++id)
    if (s.scopes[id].kind == ScopeKind::step) {
      uint32_t name = s.strings.intern("step " + std::to_string(step++));
      s.scopes.update(id, [&](Scope& sc) { sc.name = name; });
    }
  uint32_t module = s.strings.intern("net.0");
  for (size_t i = 0; i < s.events.size(); i += 997) {
    Event e = s.events[i];
    if (e.action != Action::alloc) continue;
    s.owners.push_back(Owner{e.time_ns, i + 1, e.addr, e.size, s.strings.intern("net.0.w" + std::to_string(i % 7)),
                             module, OwnerKind::parameter, 0});
  }
  return s;
}

// How write_as_recorded hands each flush to the writer: as it is, or letting go of the rows the file holds, as
// memrec::Recorder does when it writes a file.
enum class Flush { keep, release };

// `full` written over flushes as a recorder writes it: each flush adds the events, kernels and owner rows up to a
// point in time, the scopes begun by then (still open, if they end later), and closes the scopes that ended since.
// Returns the most rows that the snapshot's row tables and the writer held right after a flush.
inline uint64_t write_as_recorded(const Snapshot& full, const std::string& path, size_t flushes,
                                  Flush how = Flush::keep, const WriterOptions& options = {}) {
  Snapshot s = full.with_tables();
  s.has_segments_start = full.has_segments_start;
  Writer w(path, options);
  size_t events = 0, scopes = 1, kernels = 0, owners = 0;
  std::vector<uint32_t> open;
  uint64_t held = 0;
  auto end = [&](uint32_t id) {  // in the writer, once it let go of the scope
    int64_t end_ns = full.scopes[id].end_ns;
    uint64_t first = w.released().scopes;
    if (id < first) return w.end_scope(id, end_ns);
    s.scopes.update(id - first, [&](Scope& sc) { sc.end_ns = end_ns; });
  };
  for (size_t f = 1; f <= flushes; ++f) {
    size_t to = full.events.size() * f / flushes;
    for (; events < to; ++events) s.events.push_back(full.events[events]);
    int64_t now = full.events[to - 1].time_ns;
    std::erase_if(open, [&](uint32_t id) {
      if (full.scopes[id].end_ns > now) return false;
      end(id);
      return true;
    });
    for (; scopes < full.scopes.size() && full.scopes[scopes].start_ns <= now; ++scopes) {
      Scope sc = full.scopes[scopes];
      if (sc.end_ns > now || sc.end_ns == -1) sc.end_ns = -1, open.push_back(static_cast<uint32_t>(scopes));
      s.scopes.push_back(sc);
    }
    for (; kernels < full.kernels.size() && full.kernels[kernels].start_ns <= now; ++kernels)
      s.kernels.push_back(full.kernels[kernels]);
    for (; owners < full.owners.size() && full.owners[owners].event <= to; ++owners)
      s.owners.push_back(full.owners[owners]);
    if (how == Flush::release) w.flush_and_release(s);
    else w.flush(s);
    held = std::max<uint64_t>(held, s.scopes.size() + s.events.size() + s.kernels.size() + s.owners.size() +
                                        w.scopes_held());
  }
  for (uint32_t id : open) end(id);
  for (; scopes < full.scopes.size(); ++scopes) s.scopes.push_back(full.scopes[scopes]);
  for (; kernels < full.kernels.size(); ++kernels) s.kernels.push_back(full.kernels[kernels]);
  w.close(s);
  return held;
}

}  // namespace memrec::test
