#include "memrec/perfetto.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memrec/devices.h"
#include "memrec/replay.h"

namespace memrec {
namespace {

// Thread ids of one device's process: streams first, then one lane per scope kind.
constexpr int kScopeLaneBase = 100000;

class TraceWriter {
 public:
  TraceWriter(std::ostream& out, int64_t origin_ns, const std::vector<std::string>& warnings)
      : out_(out), origin_(origin_ns), warnings_(warnings) {
    out_ << "{\"traceEvents\":[\n";
  }
  // The trace's metadata (shown by the trace viewers) carries the input's warnings (a recording cut short).
  ~TraceWriter() {
    out_ << "\n],\"displayTimeUnit\":\"ns\"";
    if (!warnings_.empty()) out_ << ",\"metadata\":{\"memrec_warnings\":" << nlohmann::json(warnings_).dump() << "}";
    out_ << "}\n";
  }

  // Timestamps are microseconds from the first event, with nanosecond decimals.
  double ts(int64_t ns) const { return double(ns - origin_) / 1e3; }

  void event(const nlohmann::json& e) {
    out_ << (first_ ? "" : ",\n") << e.dump();
    first_ = false;
  }
  void raw(const std::string& e) {
    out_ << (first_ ? "" : ",\n") << e;
    first_ = false;
  }
  void name_thread(int pid, int tid, const std::string& name) {
    event({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
  }

 private:
  std::ostream& out_;
  int64_t origin_;
  const std::vector<std::string>& warnings_;
  bool first_ = true;
};

int64_t origin_of(const Snapshot& s) {
  int64_t t = INT64_MAX;
  for (const Event& e : s.events) t = std::min(t, e.time_ns);
  for (const Kernel& k : s.kernels) t = std::min(t, k.start_ns);
  for (size_t i = 1; i < s.scopes.size(); ++i) t = std::min(t, s.scopes[i].start_ns);
  return t == INT64_MAX ? 0 : t;
}

// One counter sample per event; the hot loop formats without building JSON objects.
void write_counters(TraceWriter& w, const Snapshot& s, uint8_t device) {
  w.event({{"ph", "M"}, {"name", "process_name"}, {"pid", device}, {"args", {{"name", fmt::format("device {}", device)}}}});
  Replay r(s, device);
  std::string name = nlohmann::json(fmt::format("memory (device {})", device)).dump();
  r.for_each_after(0, r.steps(), [&](uint32_t step, const Totals& t) {
    const Event& e = r.event(step);
    w.raw(fmt::format(R"({{"ph":"C","name":{},"pid":{},"ts":{:.3f},"args":{{"allocated":{},"reserved":{}}}}})", name,
                      device, w.ts(e.time_ns), t.allocated, t.reserved));
    if (e.action == Action::oom)
      w.event({{"ph", "i"}, {"s", "p"}, {"name", "OOM"}, {"pid", device}, {"tid", 0}, {"ts", w.ts(e.time_ns)},
               {"args", {{"requested", e.size}, {"device_free", e.addr}}}});
  });
}

void write_kernels(TraceWriter& w, const Snapshot& s) {
  std::set<std::pair<int, int>> named;
  for (const Kernel& k : s.kernels) {
    if (named.insert({k.device, k.stream}).second)
      w.name_thread(k.device, k.stream, stream_name(s, k.stream));
    w.event({{"ph", "X"}, {"name", s.strings[k.name]}, {"cat", to_string(k.kind)}, {"pid", k.device},
             {"tid", k.stream}, {"ts", w.ts(k.start_ns)}, {"dur", double(k.end_ns - k.start_ns) / 1e3},
             {"args", {{"correlation", k.correlation}, {"bytes", k.bytes}}}});
  }
}

void write_scopes(TraceWriter& w, const Snapshot& s) {
  std::set<std::pair<int, int>> named;
  for (size_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    if (sc.end_ns < sc.start_ns) continue;  // never closed: no duration to show
    int tid = kScopeLaneBase + static_cast<int>(sc.kind);
    if (named.insert({sc.device, tid}).second) w.name_thread(sc.device, tid, std::string(to_string(sc.kind)));
    w.event({{"ph", "X"}, {"name", s.strings[sc.name]}, {"cat", to_string(sc.kind)}, {"pid", sc.device},
             {"tid", tid}, {"ts", w.ts(sc.start_ns)}, {"dur", double(sc.end_ns - sc.start_ns) / 1e3}});
  }
}

}  // namespace

void export_perfetto(const Snapshot& s, std::ostream& out) {
  TraceWriter w(out, origin_of(s), s.warnings);
  for (uint8_t d : devices_of(s)) write_counters(w, s, d);
  write_kernels(w, s);
  write_scopes(w, s);
}

void export_perfetto_file(const Snapshot& s, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  export_perfetto(s, out);
  out.flush();
  if (!out) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

}  // namespace memrec
