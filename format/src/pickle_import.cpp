// PyTorch memory snapshot pickle -> Snapshot. Walks only where the snapshot schema says; any value of the wrong
// type is an Error naming its path (e.g. "device_traces[0][12].size: expected int, got str").
//
// What is kept: every trace entry's action, addr (device_free for oom), size, stream, time and frames; an entry's
// compile_context and user_metadata where they differ from PyTorch's defaults, and its other keys
// (forward_frames, ...) as JSON, in Snapshot::event_contexts; segments with their blocks (as segments_end: the
// allocator state at dump time); external_annotations as annotation scopes (as step, phase and module scopes where
// memrec's export marked them with memrec_kind); allocator_settings as JSON in
// metadata["allocator_settings"]; other top-level keys (host_segments, host_traces of pinned memory, ...) as one
// JSON object in metadata["pickle_extra"].
// What is dropped: `category` (export leaves it out), annotation ENDs with no START (the recording began inside
// them).
// What is checked: inconsistencies that would make impossible totals (a zero-size segment, time going back,
// more allocated than reserved at the start) become a warning in Snapshot::warnings naming the first of them.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "memrec/pickle.h"
#include "memrec/replay.h"
#include "pickle_reader.h"

namespace memrec {
namespace {

using pickle::Kind;
using pickle::Tree;

constexpr uint32_t kUnset = UINT32_MAX;

// Where a value sits in the pickle, for error messages only: formatted only when something is wrong.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // a dict key, or empty for a list index
  size_t index = 0;

  Path field(std::string_view k) const { return {this, k, 0}; }
  Path at(size_t i) const { return {this, {}, i}; }
  std::string str() const {
    if (!parent) return "top level";
    std::string head = parent->parent ? parent->str() : std::string();  // the root adds no prefix
    if (key.empty()) return fmt::format("{}[{}]", head, index);
    return head.empty() ? std::string(key) : fmt::format("{}.{}", head, key);
  }
};

class Importer {
 public:
  Importer(const Tree& tree, Snapshot& snap)
      : t_(tree), s_(snap), budget_(tree.input.size() + 1024) {
    id_of_node_.reserve(tree.nodes.size());
    pickle::advise_huge_pages(id_of_node_);
    id_of_node_.assign(tree.nodes.size(), kUnset);
  }

  void run() {
    Path root;
    expect(t_.root, Kind::dict, root);
    bool have_segments = false, have_traces = false;
    nlohmann::ordered_json top_extra = nlohmann::ordered_json::object();
    for_each_pair(t_.root, root, [&](std::string_view key, uint32_t v, const Path& p) {
      if (key == "segments") {
        have_segments = true;
        for_each_item(v, Kind::list, p, [&](uint32_t seg, const Path& sp) { s_.segments_end.push_back(segment(seg, sp)); });
      } else if (key == "device_traces") {
        have_traces = true;
        device_traces(v, p);
      } else if (key == "allocator_settings") {
        s_.metadata["allocator_settings"] = to_json(v, p, 0).dump();
      } else if (key == "external_annotations") {
        for_each_item(v, Kind::list, p, [&](uint32_t a, const Path& ap) { annotation(a, ap); });
      } else if (key == "memrec_warnings") {  // written by memrec's export: still true of this recording
        for_each_item(v, Kind::list, p, [&](uint32_t w, const Path& wp) { s_.warnings.emplace_back(str_of(w, wp)); });
      } else {
        top_extra[std::string(key)] = to_json(v, p, 0);
      }
    });
    if (!have_segments) fail(root, "missing key 'segments'");
    if (!have_traces) fail(root, "missing key 'device_traces'");
    if (!top_extra.empty()) s_.metadata["pickle_extra"] = top_extra.dump();
    s_.has_segments_start = false;
    assign_event_scopes();
    s_.events.assign(events_);
    s_.scopes.assign(scopes_);
    check_start_totals();
    for (Inconsistency* i : {&zero_segment_, &time_back_, &negative_time_})
      if (i->count) s_.warnings.push_back(i->sentence());
  }

 private:
  const Tree& t_;
  Snapshot& s_;
  // Built here and packed into s_ at the end: the scope of every event is set once all annotations are known.
  std::vector<Event> events_;
  std::vector<Scope> scopes_{Scope{}};
  // Frame dicts are memoized, and so are whole frame lists in PyTorch's and our pickles: each distinct node is
  // read once. Holds the frame id of a dict node or the stack id of a list node.
  std::vector<uint32_t> id_of_node_;
  std::vector<uint32_t> scratch_;
  // Scopes by device, in start order; closed ones are dropped lazily from the back.
  std::vector<std::vector<uint32_t>> open_scopes_;
  // Open scopes by (device, name id), latest last: END closes the latest START of its name.
  std::map<std::pair<uint8_t, uint32_t>, std::vector<uint32_t>> open_by_name_;
  std::unordered_map<uint64_t, uint16_t> stream_ids_;
  nlohmann::ordered_json extra_ = nlohmann::ordered_json::object();  // the current entry's other keys
  // The first of each kind of inconsistency and how many there are; one warning each.
  struct Inconsistency {
    std::string first;
    uint64_t count = 0;
    void note(auto&& describe) {
      if (count++ == 0) first = describe();
    }
    std::string sentence() const {
      return count == 1 ? fmt::format("inconsistent pickle: {}", first)
                        : fmt::format("inconsistent pickle: {} ({} more like it)", first, count - 1);
    }
  };
  Inconsistency zero_segment_, time_back_, negative_time_;
  // Items the walk may still visit. A value shared through the memo is walked at each reference, so without this
  // a small pickle could expand exponentially (lists of lists of the same list). Legitimate sharing (frames) is
  // cached, so every visit is paid for by at least one input byte.
  size_t budget_;

  [[noreturn]] static void fail(const Path& p, std::string_view what) {
    throw Error(fmt::format("pickle: {}: {}", p.str(), what));
  }
  void expect(uint32_t id, Kind k, const Path& p) const {
    Kind got = t_[id].kind;
    if (got != k) fail(p, fmt::format("expected {}, got {}", pickle::to_string(k), pickle::to_string(got)));
  }

  int64_t int_of(uint32_t id, const Path& p) const {
    const auto& n = t_[id];
    if (n.kind == Kind::integer) return n.i;
    if (n.kind == Kind::uinteger) fail(p, "integer does not fit 63 bits");
    fail(p, fmt::format("expected int, got {}", pickle::to_string(n.kind)));
  }
  uint64_t uint_of(uint32_t id, const Path& p) const {
    const auto& n = t_[id];
    if (n.kind == Kind::uinteger) return n.u;
    int64_t v = int_of(id, p);
    if (v < 0) fail(p, fmt::format("expected a non-negative int, got {}", v));
    return static_cast<uint64_t>(v);
  }
  template <typename T>
  T narrow(uint32_t id, const Path& p) const {
    uint64_t v = uint_of(id, p);
    if (v > std::numeric_limits<T>::max()) fail(p, fmt::format("{} is out of range", v));
    return static_cast<T>(v);
  }
  int64_t time_ns_of(uint32_t id, const Path& p) const {
    int64_t us = int_of(id, p);
    if (us > INT64_MAX / 1000 || us < INT64_MIN / 1000) fail(p, "time out of range");
    return us * 1000;
  }
  bool bool_of(uint32_t id, const Path& p) const {
    expect(id, Kind::boolean, p);
    return t_[id].i != 0;
  }
  std::string_view str_of(uint32_t id, const Path& p) const {
    expect(id, Kind::string, p);
    return t_.string(id);
  }

  void spend(uint32_t id, const Path& p) {
    uint32_t n = t_[id].count;
    if (n > budget_) fail(p, "values shared through the memo expand beyond the input's size");
    budget_ -= n;
  }

  template <typename F>
  void for_each_item(uint32_t id, Kind k, const Path& p, F&& f) {
    expect(id, k, p);
    spend(id, p);
    size_t i = 0;
    t_.for_each_item(id, [&](uint32_t item) { f(item, p.at(i++)); });
  }
  // Calls f(key, value, path of value) for each entry of a dict with string keys.
  template <typename F>
  void for_each_pair(uint32_t id, const Path& p, F&& f) {
    expect(id, Kind::dict, p);
    spend(id, p);
    uint32_t key = kUnset;
    t_.for_each_item(id, [&](uint32_t item) {
      if (key == kUnset) {
        key = item;
        return;
      }
      std::string_view k = str_of(key, p.field("<key>"));
      f(k, item, p.field(k));
      key = kUnset;
    });
  }

  // The cache is only read for the kind it was written for: a node used as both a frame and a stack is an error.
  uint32_t frame(uint32_t id, const Path& p) {
    if (t_[id].kind == Kind::dict && id_of_node_[id] != kUnset) return id_of_node_[id];
    Frame f;
    for_each_pair(id, p, [&](std::string_view key, uint32_t v, const Path& vp) {
      if (key == "name") f.function = s_.strings.intern(str_of(v, vp));
      else if (key == "filename") f.file = s_.strings.intern(str_of(v, vp));
      else if (key == "line") f.line = line(v, vp);
    });
    return id_of_node_[id] = s_.frames.intern(f);
  }

  // PyTorch writes 2^64-1 (-1 as unsigned) for Python frames whose line it does not know.
  uint32_t line(uint32_t id, const Path& p) const {
    const auto& n = t_[id];
    if ((n.kind == Kind::uinteger && n.u == UINT64_MAX) || (n.kind == Kind::integer && n.i == -1)) return kUnknownLine;
    uint32_t v = narrow<uint32_t>(id, p);
    if (v == kUnknownLine) fail(p, fmt::format("{} is out of range", v));
    return v;
  }

  uint32_t stack(uint32_t id, const Path& p) {
    if (t_[id].kind == Kind::list && id_of_node_[id] != kUnset) return id_of_node_[id];
    scratch_.clear();
    for_each_item(id, Kind::list, p, [&](uint32_t f, const Path& fp) { scratch_.push_back(frame(f, fp)); });
    uint32_t stack_id = s_.stacks.intern(scratch_);
    return id_of_node_[id] = stack_id;
  }

  // Snapshot::intern_stream scans its list; a map keeps a pickle with thousands of streams linear.
  uint16_t stream(uint64_t raw) {
    auto [it, added] = stream_ids_.try_emplace(raw, 0);
    if (added) it->second = s_.intern_stream(raw);
    return it->second;
  }

  void device_traces(uint32_t id, const Path& p) {
    for_each_item(id, Kind::list, p, [&](uint32_t trace, const Path& tp) {
      if (tp.index > UINT8_MAX) fail(tp, "more than 256 devices");
      auto device = static_cast<uint8_t>(tp.index);
      expect(trace, Kind::list, tp);
      events_.reserve(events_.size() + t_[trace].count);
      pickle::advise_huge_pages(events_);
      int64_t prev_ns = INT64_MIN;
      for_each_item(trace, Kind::list, tp, [&](uint32_t e, const Path& ep) {
        events_.push_back(entry(e, ep, device));
        check_entry(events_.back(), prev_ns, ep);
        prev_ns = events_.back().time_ns;
      });
    });
  }

  void check_entry(const Event& e, int64_t prev_ns, const Path& p) {
    if (e.time_ns < 0)
      negative_time_.note([&] { return fmt::format("{}.time_us is negative ({})", p.str(), e.time_ns / 1000); });
    if (e.time_ns < prev_ns)
      time_back_.note([&] {
        return fmt::format("time goes back at {} ({} us < {} us)", p.str(), e.time_ns / 1000, prev_ns / 1000);
      });
    if ((is_segment_grow(e.action) || is_segment_shrink(e.action)) && e.size == 0)
      zero_segment_.note([&] { return fmt::format("{} {} at {:#x} has size 0", p.str(), to_string(e.action), e.addr); });
  }

  // The state before the first event is the end state minus what the trace did: a trace that frees blocks it
  // never saw into segments it never had leaves more allocated than reserved there.
  void check_start_totals() {
    size_t devices = 0;
    for (const Event& e : events_) devices = std::max<size_t>(devices, e.device + 1u);
    for (const Segment& seg : s_.segments_end) devices = std::max<size_t>(devices, seg.device + 1u);
    for (size_t d = 0; d < devices; ++d) {
      Totals start = Replay(s_, static_cast<uint8_t>(d)).initial();
      if (start.allocated > start.reserved)
        s_.warnings.push_back(fmt::format(
            "inconsistent pickle: on device {} allocated {} exceeds reserved {} at the start of the trace", d,
            bytes_text(start.allocated), bytes_text(start.reserved)));
    }
  }
  static std::string bytes_text(uint64_t b) {
    return b >= (1u << 20) ? fmt::format("{:.1f} MiB ({} bytes)", b / 1048576.0, b) : fmt::format("{} bytes", b);
  }

  Event entry(uint32_t id, const Path& p, uint8_t device) {
    Event e;
    e.device = device;
    bool have_action = false;
    EventContext ctx{.event = events_.size()};
    extra_.clear();
    for_each_pair(id, p, [&](std::string_view key, uint32_t v, const Path& vp) {
      if (key == "action") {
        auto a = action_from_string(str_of(v, vp));
        if (!a) fail(vp, fmt::format("unknown action '{}'", t_.string(v)));
        e.action = *a;
        have_action = true;
      } else if (key == "addr" || key == "device_free") {
        e.addr = uint_of(v, vp);
      } else if (key == "size") {
        e.size = uint_of(v, vp);
      } else if (key == "stream") {
        e.stream = stream(uint_of(v, vp));
      } else if (key == "time_us") {
        e.time_ns = time_ns_of(v, vp);
      } else if (key == "frames") {
        e.stack = stack(v, vp);
      } else if (key == "compile_context" && t_[v].kind == Kind::string && t_.string(v) != "") {
        if (t_.string(v) != "N/A") ctx.compile_context = s_.strings.intern(t_.string(v));
      } else if (key == "user_metadata" && t_[v].kind == Kind::string) {
        ctx.user_metadata = s_.strings.intern(t_.string(v));
      } else if (key != "category") {  // anything else, including values the fields above cannot hold
        extra_[std::string(key)] = to_json(v, vp, 0);
      }
    });
    if (!have_action) fail(p, "missing key 'action'");
    if (!extra_.empty()) ctx.extra = s_.strings.intern(extra_.dump());
    if (ctx.compile_context || ctx.user_metadata || ctx.extra) s_.event_contexts.push_back(ctx);
    return e;
  }

  Segment segment(uint32_t id, const Path& p) {
    Segment seg;
    bool have_address = false;
    for_each_pair(id, p, [&](std::string_view key, uint32_t v, const Path& vp) {
      if (key == "device") seg.device = narrow<uint8_t>(v, vp);
      else if (key == "address") seg.addr = uint_of(v, vp), have_address = true;
      else if (key == "total_size") seg.total_size = uint_of(v, vp);
      else if (key == "allocated_size") seg.allocated_size = uint_of(v, vp);
      else if (key == "active_size") seg.active_size = uint_of(v, vp);
      else if (key == "requested_size") seg.requested_size = uint_of(v, vp);
      else if (key == "stream") seg.stream = stream(uint_of(v, vp));
      else if (key == "segment_type") seg.is_large = segment_type(v, vp);
      else if (key == "segment_pool_id") pool_id(v, vp, seg.pool_id);
      else if (key == "is_expandable") seg.is_expandable = bool_of(v, vp);
      else if (key == "frames") seg.stack = stack(v, vp);
      else if (key == "blocks")
        for_each_item(v, Kind::list, vp, [&](uint32_t b, const Path& bp) { seg.blocks.push_back(block(b, bp)); });
    });
    if (!have_address) fail(p, "missing key 'address'");
    if (seg.total_size == 0) zero_segment_.note([&] { return fmt::format("{} at {:#x} has size 0", p.str(), seg.addr); });
    return seg;
  }

  bool segment_type(uint32_t id, const Path& p) const {
    std::string_view type = str_of(id, p);
    if (type != "large" && type != "small") fail(p, fmt::format("unknown segment type '{}'", type));
    return type == "large";
  }

  void pool_id(uint32_t id, const Path& p, int64_t (&out)[2]) const {
    expect(id, Kind::tuple, p);
    if (t_[id].count != 2) fail(p, fmt::format("expected 2 items, got {}", t_[id].count));
    size_t i = 0;
    t_.for_each_item(id, [&](uint32_t v) { out[i] = int_of(v, p.at(i)), ++i; });
  }

  Block block(uint32_t id, const Path& p) {
    Block b;
    bool have_requested = false;
    for_each_pair(id, p, [&](std::string_view key, uint32_t v, const Path& vp) {
      if (key == "address") b.addr = uint_of(v, vp);
      else if (key == "size") b.size = uint_of(v, vp);
      else if (key == "requested_size") b.requested_size = uint_of(v, vp), have_requested = true;
      else if (key == "frames") b.stack = stack(v, vp);
      else if (key == "state") {
        auto st = block_state_from_string(str_of(v, vp));
        if (!st) fail(vp, fmt::format("unknown block state '{}'", t_.string(v)));
        b.state = *st;
      }
    });
    if (!have_requested) b.requested_size = b.size;  // snapshots before PyTorch 2.1 have no requested_size
    return b;
  }

  // memrec_kind, written by memrec's export: the kind of scope an annotation was. Unknown kinds stay annotations.
  static ScopeKind scope_kind(std::string_view kind) {
    for (ScopeKind k : {ScopeKind::phase, ScopeKind::module, ScopeKind::step})
      if (to_string(k) == kind) return k;
    return ScopeKind::annotation;
  }

  void annotation(uint32_t id, const Path& p) {
    std::string_view stage, name;
    uint8_t device = 0;
    int64_t time_ns = 0;
    ScopeKind kind = ScopeKind::annotation;
    for_each_pair(id, p, [&](std::string_view key, uint32_t v, const Path& vp) {
      if (key == "stage") stage = str_of(v, vp);
      else if (key == "name") name = str_of(v, vp);
      else if (key == "device") device = narrow<uint8_t>(v, vp);
      else if (key == "time_us") time_ns = time_ns_of(v, vp);
      else if (key == "memrec_kind") kind = scope_kind(str_of(v, vp));
    });
    if (open_scopes_.size() <= device) open_scopes_.resize(device + 1);
    auto& open = open_scopes_[device];
    while (!open.empty() && scopes_[open.back()].end_ns != -1) open.pop_back();
    uint32_t name_id = s_.strings.intern(name);
    auto& same_name = open_by_name_[{device, name_id}];
    if (stage == "START") {
      auto scope = static_cast<uint32_t>(scopes_.size());
      scopes_.push_back(Scope{time_ns, -1, name_id, open.empty() ? 0 : open.back(), kind, device});
      open.push_back(scope);
      same_name.push_back(scope);
    } else if (stage == "END") {
      if (same_name.empty()) return;
      scopes_[same_name.back()].end_ns = time_ns;
      same_name.pop_back();
    } else {
      fail(p.field("stage"), fmt::format("expected 'START' or 'END', got '{}'", stage));
    }
  }

  // Event::scope = the innermost annotation open at the event's time on its device.
  void assign_event_scopes() {
    for (size_t device = 0; device < open_scopes_.size(); ++device) {
      std::vector<uint32_t> starts;
      for (uint32_t i = 1; i < scopes_.size(); ++i)
        if (scopes_[i].device == device) starts.push_back(i);
      if (starts.empty()) continue;
      std::stable_sort(starts.begin(), starts.end(),
                       [&](uint32_t a, uint32_t b) { return scopes_[a].start_ns < scopes_[b].start_ns; });
      std::vector<uint32_t> active;
      size_t next = 0;
      for (Event& e : events_) {
        if (e.device != device) continue;
        while (next < starts.size() && scopes_[starts[next]].start_ns <= e.time_ns) active.push_back(starts[next++]);
        while (!active.empty() && scopes_[active.back()].end_ns != -1 && scopes_[active.back()].end_ns < e.time_ns)
          active.pop_back();
        e.scope = active.empty() ? 0 : active.back();
      }
    }
  }

  nlohmann::ordered_json to_json(uint32_t id, const Path& p, int depth) {
    if (depth > pickle::kMaxDepth) fail(p, "nested too deeply");
    const auto& n = t_[id];
    switch (n.kind) {
      case Kind::none: return nullptr;
      case Kind::boolean: return n.i != 0;
      case Kind::integer: return n.i;
      case Kind::uinteger: return n.u;
      case Kind::floating: return n.f;
      case Kind::string: return std::string(t_.string(id));
      case Kind::bytes: fail(p, "bytes are not supported here");
      case Kind::list:
      case Kind::tuple: {
        auto a = nlohmann::ordered_json::array();
        for_each_item(id, n.kind, p, [&](uint32_t v, const Path& vp) { a.push_back(to_json(v, vp, depth + 1)); });
        return a;
      }
      case Kind::dict: {
        auto o = nlohmann::ordered_json::object();
        for_each_pair(id, p, [&](std::string_view k, uint32_t v, const Path& vp) {
          o[std::string(k)] = to_json(v, vp, depth + 1);
        });
        return o;
      }
    }
    fail(p, "unknown value");
  }
};

// f(), with the errors about the pickle's content naming the file.
template <class F>
auto naming(const std::string& path, F f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace

Snapshot import_pickle(std::span<const uint8_t> bytes) {
  pickle::Tree tree = pickle::parse(bytes);
  Snapshot s;
  Importer(tree, s).run();
  return s;
}

Snapshot import_pickle_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0));
  in.seekg(0);
  std::vector<uint8_t> bytes(std::min<size_t>(size, 2));
  auto read_from = [&](size_t offset) {
    if (!in.read(reinterpret_cast<char*>(bytes.data() + offset), static_cast<std::streamsize>(bytes.size() - offset)))
      throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  };
  read_from(0);
  naming(path, [&] { pickle::check_start(bytes, size); });  // before reading a large file of something else whole
  bytes.resize(size);
  read_from(2);
  return naming(path, [&] { return import_pickle(bytes); });
}

}  // namespace memrec
