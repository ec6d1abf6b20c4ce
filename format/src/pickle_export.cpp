// Snapshot -> PyTorch memory snapshot pickle (protocol 4), written with only the opcodes that
// pytorch.org/memory_viz's unpickler knows. Keys and order follow torch.cuda.memory._snapshot() of PyTorch 2.11,
// minus `category` (memory_viz mishandles it) and with `device_free` in place of `addr` for oom entries.
//
// Per-entry compile_context, user_metadata and other keys come from Snapshot::event_contexts, other top-level keys
// (host_segments, host_traces, ...) from metadata["pickle_extra"]. A device with allocations but no segments at all
// (a CPU recording) gets one segment per block, allocated right before the block and freed right after it, and the
// blocks live at the end in segments: memory_viz's Allocator State History needs every block inside a segment.
//
// Size: every repeated value is written once and referenced from the memo. Keys and other fixed words get memo
// ids below 256 (2-byte BINGET); strings, frame dicts and whole frame lists get the ids after them. Only segments_end
// is written (PyTorch pickles carry the state at dump time). A block's owner (Snapshot::owners) becomes its alloc
// entry's user_metadata, which memory_viz shows, unless the program set one. Step, phase and module scopes go to
// external_annotations beside PyTorch's own annotations, marked with memrec_kind; op scopes are left out.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "memrec/pickle.h"
#include "memrec/replay.h"
#include "pickle_reader.h"

namespace memrec {
namespace {

namespace op {
constexpr uint8_t PROTO = 0x80, STOP = '.', MARK = '(', NONE = 'N', NEWTRUE = 0x88, NEWFALSE = 0x89;
constexpr uint8_t BININT = 'J', BININT1 = 'K', BININT2 = 'M', LONG1 = 0x8a, BINFLOAT = 'G';
constexpr uint8_t SHORT_BINUNICODE = 0x8c, BINUNICODE = 'X';
constexpr uint8_t EMPTY_LIST = ']', APPENDS = 'e', EMPTY_DICT = '}', SETITEMS = 'u', TUPLE2 = 0x86;
constexpr uint8_t BINPUT = 'q', LONG_BINPUT = 'r', BINGET = 'h', LONG_BINGET = 'j';
}  // namespace op

// Fixed words, each memoized at its first use with the memo id of its position here.
enum Word : uint32_t {
  kAction, kAddr, kSize, kStream, kTimeUs, kCompileContext, kUserMetadata, kFrames, kDeviceFree,
  kName, kFilename, kLine, kNotAvailable, kEmpty,
  kDevice, kAddress, kTotalSize, kAllocatedSize, kActiveSize, kRequestedSize, kSegmentType, kSegmentPoolId,
  kIsExpandable, kBlocks, kState, kLarge, kSmall,
  kSegments, kDeviceTraces, kAllocatorSettings, kExternalAnnotations, kStage, kStart, kEnd,
  kMemrecKind, kPhase, kModule, kStep,
  kFirstAction,                                            // then one word per Action
  kFirstBlockState = kFirstAction + kActionCount,          // then one per BlockState
  kWordCount = kFirstBlockState + 3,
};
constexpr std::array<std::string_view, kFirstAction> kWordText = {
    "action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata", "frames", "device_free",
    "name", "filename", "line", "N/A", "",
    "device", "address", "total_size", "allocated_size", "active_size", "requested_size", "segment_type",
    "segment_pool_id", "is_expandable", "blocks", "state", "large", "small",
    "segments", "device_traces", "allocator_settings", "external_annotations", "stage", "START", "END",
    "memrec_kind", "phase", "module", "step"};

constexpr uint32_t kNone = UINT32_MAX;
constexpr size_t kBatch = 1000;  // items per APPENDS, as Python does: memory_viz spreads a batch into one call

// A growing byte buffer written through a raw pointer: the hot loop does no per-byte size bookkeeping beyond one
// comparison.
class Out {
 public:
  void reserve(size_t n) {
    buf_.reserve(n);
    pickle::advise_huge_pages(buf_);
    buf_.resize(n);
  }
  void byte(uint8_t b) {
    room(1);
    buf_[n_++] = b;
  }
  void bytes(const void* p, size_t len) {
    room(len);
    std::memcpy(buf_.data() + n_, p, len);
    n_ += len;
  }
  template <typename T>
  void le(T v) {  // little-endian, as every machine we build for
    bytes(&v, sizeof v);
  }
  std::vector<uint8_t> take() {
    buf_.resize(n_);
    return std::move(buf_);
  }

 private:
  std::vector<uint8_t> buf_;
  size_t n_ = 0;
  void room(size_t len) {
    if (n_ + len > buf_.size()) buf_.resize(std::max(buf_.size() * 2, n_ + len + 4096));
  }
};

// The owner of each owned block, by the index of its alloc event: "layers.0.weight.exp_avg (optimizer_state)",
// "+ N more" where a flat buffer holds several tensors. Blocks live before the recording have no entry to carry it.
std::unordered_map<uint64_t, std::string> owner_labels(const Snapshot& s) {
  std::unordered_map<uint64_t, std::string> labels;
  std::vector<bool> seen(256);
  for (const Owner& o : s.owners) seen[o.device] = true;
  for (size_t d = 0; d < seen.size(); ++d) {
    if (!seen[d]) continue;
    Replay r(s, static_cast<uint8_t>(d));
    for (uint32_t id = 0; id < r.allocations().size(); ++id) {
      uint32_t row = r.owner_of(id);
      uint32_t event = r.allocation(id).event;
      if (row == kNoOwner || event == kNoEvent) continue;
      const Owner& o = s.owners[row];
      uint32_t more = r.owner_names(id) - 1;
      labels[event] = fmt::format("{} ({}){}", s.strings[o.name], to_string(o.kind), more ? fmt::format(" + {} more", more) : "");
    }
  }
  return labels;
}

class Exporter {
 public:
  explicit Exporter(const Snapshot& s)
      : s_(s),
        string_memo_(s.strings.size(), kNone),
        frame_memo_(s.frames.size(), kNone),
        stack_memo_(s.stacks.size(), kNone),
        owners_(owner_labels(s)) {
    word_done_.fill(false);
  }

  std::vector<uint8_t> run() {
    out_.reserve(s_.events.size() * 60 + 4096);
    out_.byte(op::PROTO);
    out_.byte(4);
    out_.byte(op::EMPTY_DICT);
    out_.byte(op::MARK);
    size_t devices = 1;
    for (const Event& e : s_.events) devices = std::max<size_t>(devices, e.device + 1u);
    for (const Segment& seg : s_.segments_end) devices = std::max<size_t>(devices, seg.device + 1u);
    without_segments_ = devices_without_segments(devices);
    std::vector<Segment> made = segments_of_live_blocks();
    word(kSegments);
    list(s_.segments_end.size() + made.size(), [&](size_t i) {
      segment(i < s_.segments_end.size() ? s_.segments_end[i] : made[i - s_.segments_end.size()]);
    });
    word(kDeviceTraces);
    device_traces(devices);
    if (auto it = s_.metadata.find("allocator_settings"); it != s_.metadata.end()) {
      word(kAllocatorSettings);
      json(parse_json("metadata allocator_settings", it->second));
    }
    word(kExternalAnnotations);
    annotations();
    if (!s_.warnings.empty()) {  // memory_viz and torch ignore keys they do not know
      text("memrec_warnings");
      list(s_.warnings.size(), [&](size_t i) { text(s_.warnings[i]); });
    }
    if (auto it = s_.metadata.find("pickle_extra"); it != s_.metadata.end()) {
      nlohmann::ordered_json extra = parse_json("metadata pickle_extra", it->second);
      for (const auto& [k, v] : extra.items()) text(k), json(v);
    }
    out_.byte(op::SETITEMS);
    out_.byte(op::STOP);
    return out_.take();
  }

 private:
  const Snapshot& s_;
  Out out_;
  std::array<bool, kWordCount> word_done_;
  uint32_t next_memo_ = kWordCount;
  std::vector<uint32_t> string_memo_, frame_memo_, stack_memo_;
  std::unordered_map<uint32_t, nlohmann::ordered_json> extra_cache_;  // EventContext::extra parsed, by string id
  std::vector<bool> without_segments_;  // by device: allocations but no segments (a CPU recording)
  std::unordered_map<uint64_t, std::string> owners_;  // by alloc event index: "0.weight (parameter)"

  void put(uint32_t id) {
    if (id < 256) {
      out_.byte(op::BINPUT);
      out_.byte(static_cast<uint8_t>(id));
    } else {
      out_.byte(op::LONG_BINPUT);
      out_.le<uint32_t>(id);
    }
  }
  void get(uint32_t id) {
    if (id < 256) {
      out_.byte(op::BINGET);
      out_.byte(static_cast<uint8_t>(id));
    } else {
      out_.byte(op::LONG_BINGET);
      out_.le<uint32_t>(id);
    }
  }
  // Writes the memoized value `memo` if set; otherwise write() then memoizes it under a new id.
  template <typename F>
  void memoized(uint32_t& memo, F&& write) {
    if (memo != kNone) return get(memo);
    memo = next_memo_++;
    write();
    put(memo);
  }

  void text(std::string_view t) {
    if (t.size() < 256) {
      out_.byte(op::SHORT_BINUNICODE);
      out_.byte(static_cast<uint8_t>(t.size()));
    } else {
      out_.byte(op::BINUNICODE);
      out_.le<uint32_t>(static_cast<uint32_t>(t.size()));
    }
    out_.bytes(t.data(), t.size());
  }
  void word(uint32_t w) {
    if (word_done_[w]) return get(w);
    word_done_[w] = true;
    text(w >= kFirstBlockState ? to_string(static_cast<BlockState>(w - kFirstBlockState))
         : w >= kFirstAction   ? to_string(static_cast<Action>(w - kFirstAction))
                               : kWordText[w]);
    put(w);
  }
  void string(uint32_t id) {
    memoized(string_memo_.at(id), [&] { text(s_.strings[id]); });
  }

  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      out_.byte(op::BININT1);
      out_.byte(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      out_.byte(op::BININT2);
      out_.le<uint16_t>(static_cast<uint16_t>(v));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_.byte(op::BININT);
      out_.le<int32_t>(static_cast<int32_t>(v));
    } else {
      // LONG1: the fewest little-endian two's complement bytes that keep the sign.
      uint8_t n = 1;
      while (n < 8 && (v >> (8 * n - 1)) != 0 && (v >> (8 * n - 1)) != -1) ++n;
      out_.byte(op::LONG1);
      out_.byte(n);
      out_.bytes(&v, n);
    }
  }
  void unsigned_integer(uint64_t v) {
    if (v <= INT64_MAX) return integer(static_cast<int64_t>(v));
    out_.byte(op::LONG1);
    out_.byte(9);
    out_.le<uint64_t>(v);
    out_.byte(0);
  }
  void boolean(bool b) { out_.byte(b ? op::NEWTRUE : op::NEWFALSE); }

  // EMPTY_LIST then the items in MARK ... APPENDS batches.
  template <typename F>
  void list(size_t n, F&& item) {
    out_.byte(op::EMPTY_LIST);
    items(n, item);
  }
  template <typename F>
  void items(size_t n, F&& item) {
    for (size_t i = 0; i < n;) {
      out_.byte(op::MARK);
      for (size_t end = std::min(n, i + kBatch); i < end; ++i) item(i);
      out_.byte(op::APPENDS);
    }
  }

  void frame(uint32_t id) {
    memoized(frame_memo_.at(id), [&] {
      const Frame& f = s_.frames[id];
      out_.byte(op::EMPTY_DICT);
      out_.byte(op::MARK);
      word(kName), string(f.function);
      word(kFilename), string(f.file);
      word(kLine);
      if (f.line == kUnknownLine) unsigned_integer(UINT64_MAX);
      else integer(f.line);
      out_.byte(op::SETITEMS);
    });
  }
  void frames(uint32_t stack) {
    if (stack == 0) return out_.byte(op::EMPTY_LIST);
    uint32_t& memo = stack_memo_.at(stack);
    if (memo != kNone) return get(memo);
    // The list is memoized before its items, as Python does, so that its id is known up front.
    memo = next_memo_++;
    out_.byte(op::EMPTY_LIST);
    put(memo);
    auto ids = s_.stacks[stack];
    items(ids.size(), [&](size_t i) { frame(ids[i]); });
  }

  // ctx: the event's EventContext, or null for PyTorch's defaults. owner: the name memory_viz shows as the entry's
  // user_metadata where the program set none.
  void entry(const Event& e, const EventContext* ctx, const std::string* owner = nullptr) {
    out_.byte(op::EMPTY_DICT);
    out_.byte(op::MARK);
    word(kAction), word(kFirstAction + static_cast<uint32_t>(e.action));
    word(e.action == Action::oom ? kDeviceFree : kAddr), unsigned_integer(e.addr);
    word(kSize), unsigned_integer(e.size);
    word(kStream), unsigned_integer(s_.streams.at(e.stream));
    word(kTimeUs), integer(e.time_ns / 1000);
    const nlohmann::ordered_json* extra = ctx && ctx->extra ? &extra_json(ctx->extra) : nullptr;
    if (!extra || !extra->contains("compile_context"))
      word(kCompileContext), ctx && ctx->compile_context ? string(ctx->compile_context) : word(kNotAvailable);
    if (!extra || !extra->contains("user_metadata"))
      word(kUserMetadata), ctx && ctx->user_metadata ? string(ctx->user_metadata) : owner ? text(*owner) : word(kEmpty);
    word(kFrames), frames(e.stack);
    if (extra)
      for (const auto& [k, v] : extra->items()) text(k), json(v);
    out_.byte(op::SETITEMS);
  }
  const nlohmann::ordered_json& extra_json(uint32_t id) {
    auto [it, added] = extra_cache_.try_emplace(id);
    if (added) it->second = parse_json("an event's extra fields", s_.strings[id]);
    return it->second;
  }

  // An entry memory_viz needs around a block of a device without segments (see the top of this file).
  void segment_entry(const Event& block, Action action, uint64_t size) {
    Event seg = block;
    seg.action = action;
    seg.size = size;
    entry(seg, nullptr);
  }

  void device_traces(size_t devices) {
    list(devices, [&](size_t d) {
      out_.byte(op::EMPTY_LIST);
      size_t batch = 0;
      auto item = [&](auto&& write) {
        if (batch == 0) out_.byte(op::MARK);
        write();
        if (++batch == kBatch) out_.byte(op::APPENDS), batch = 0;
      };
      auto ctx = s_.event_contexts.begin();
      std::unordered_map<uint64_t, uint64_t> live;  // addr -> block size, for the segments of a device without any
      for (size_t i = 0; i < s_.events.size(); ++i) {
        const Event& e = s_.events[i];
        if (e.device != d) continue;
        while (ctx != s_.event_contexts.end() && ctx->event < i) ++ctx;
        const EventContext* c = ctx != s_.event_contexts.end() && ctx->event == i ? &*ctx : nullptr;
        if (without_segments_[d] && e.action == Action::alloc) {
          live[e.addr] = e.block_size();
          item([&] { segment_entry(e, Action::segment_alloc, e.block_size()); });
        }
        auto owner = owners_.find(i);
        item([&] { entry(e, c, owner == owners_.end() ? nullptr : &owner->second); });
        if (without_segments_[d] && e.action == Action::free_completed) {
          auto it = live.find(e.addr);
          item([&] { segment_entry(e, Action::segment_free, it != live.end() ? it->second : e.block_size()); });
          if (it != live.end()) live.erase(it);
        }
      }
      if (batch) out_.byte(op::APPENDS);
    });
  }

  // Devices with allocations and neither segment events nor segments.
  std::vector<bool> devices_without_segments(size_t devices) const {
    std::vector<bool> allocs(devices, false), segments(devices, false);
    for (const Event& e : s_.events) {
      if (e.action == Action::alloc) allocs[e.device] = true;
      if (is_segment_grow(e.action) || is_segment_shrink(e.action)) segments[e.device] = true;
    }
    for (const Segment& seg : s_.segments_end) segments[seg.device] = true;
    std::vector<bool> out(devices);
    for (size_t d = 0; d < devices; ++d) out[d] = allocs[d] && !segments[d];
    return out;
  }

  // For the devices without segments: one segment per block still allocated (or pending free) at the end.
  std::vector<Segment> segments_of_live_blocks() const {
    std::vector<std::unordered_map<uint64_t, Segment>> live(without_segments_.size());
    for (const Event& e : s_.events) {
      if (!without_segments_[e.device]) continue;
      auto& on_device = live[e.device];
      if (e.action == Action::alloc) {
        Block b{e.addr, e.block_size(), e.size, e.stack, BlockState::active_allocated};
        on_device[e.addr] = Segment{.addr = e.addr, .total_size = b.size, .allocated_size = b.size, .active_size = b.size,
                                    .requested_size = e.size, .stream = e.stream, .device = e.device, .blocks = {b}};
      } else if (auto it = on_device.find(e.addr); it != on_device.end()) {
        if (e.action == Action::free_requested) {
          it->second.allocated_size = 0;
          it->second.blocks[0].state = BlockState::active_pending_free;
        } else if (e.action == Action::free_completed) {
          on_device.erase(it);
        }
      }
    }
    std::vector<Segment> out;
    for (auto& on_device : live)
      for (auto& [addr, seg] : on_device) out.push_back(std::move(seg));
    std::sort(out.begin(), out.end(), [](const Segment& a, const Segment& b) {
      return std::pair(a.device, a.addr) < std::pair(b.device, b.addr);
    });
    return out;
  }

  void segment(const Segment& seg) {
    out_.byte(op::EMPTY_DICT);
    out_.byte(op::MARK);
    word(kDevice), integer(seg.device);
    word(kAddress), unsigned_integer(seg.addr);
    word(kTotalSize), unsigned_integer(seg.total_size);
    word(kAllocatedSize), unsigned_integer(seg.allocated_size);
    word(kActiveSize), unsigned_integer(seg.active_size);
    word(kRequestedSize), unsigned_integer(seg.requested_size);
    word(kStream), unsigned_integer(s_.streams.at(seg.stream));
    word(kSegmentType), word(seg.is_large ? kLarge : kSmall);
    word(kSegmentPoolId), integer(seg.pool_id[0]), integer(seg.pool_id[1]), out_.byte(op::TUPLE2);
    word(kIsExpandable), boolean(seg.is_expandable);
    word(kFrames), frames(seg.stack);
    word(kBlocks), list(seg.blocks.size(), [&](size_t i) { block(seg.blocks[i]); });
    out_.byte(op::SETITEMS);
  }

  void block(const Block& b) {
    out_.byte(op::EMPTY_DICT);
    out_.byte(op::MARK);
    word(kAddress), unsigned_integer(b.addr);
    word(kSize), unsigned_integer(b.size);
    // c10 leaves a free block the requested_size of its last use, which can be that of the whole block it was split
    // from: more than it holds, and memory_viz's tools then print a negative gap.
    word(kRequestedSize), unsigned_integer(b.state == BlockState::inactive ? std::min(b.requested_size, b.size) : b.requested_size);
    word(kState), word(kFirstBlockState + static_cast<uint32_t>(b.state));
    word(kFrames), frames(b.stack);
    out_.byte(op::SETITEMS);
  }

  // The memrec_kind word of a step, phase or module scope.
  static uint32_t kind_word(ScopeKind k) { return k == ScopeKind::phase ? kPhase : k == ScopeKind::module ? kModule : kStep; }

  // START and END records of annotation, step, phase and module scopes in time order (START first where a scope
  // starts and ends at once). memrec's scopes carry memrec_kind, which import reads back and others ignore.
  void annotations() {
    struct Mark {
      int64_t time_ns;
      uint32_t scope;
      bool end;
    };
    std::vector<Mark> marks;
    for (uint32_t i = 1; i < s_.scopes.size(); ++i) {
      const Scope& sc = s_.scopes[i];
      if (sc.kind == ScopeKind::op) continue;  // one per aten call: as many as the allocations
      marks.push_back({sc.start_ns, i, false});
      if (sc.end_ns != -1) marks.push_back({sc.end_ns, i, true});
    }
    std::stable_sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) { return a.time_ns < b.time_ns; });
    list(marks.size(), [&](size_t i) {
      const Scope& sc = s_.scopes[marks[i].scope];
      out_.byte(op::EMPTY_DICT);
      out_.byte(op::MARK);
      word(kStage), word(marks[i].end ? kEnd : kStart);
      word(kName), string(sc.name);
      word(kDevice), integer(sc.device);
      word(kTimeUs), integer(marks[i].time_ns / 1000);
      if (sc.kind != ScopeKind::annotation) word(kMemrecKind), word(kind_word(sc.kind));
      out_.byte(op::SETITEMS);
    });
  }

  static nlohmann::ordered_json parse_json(std::string_view what, const std::string& text) {
    try {
      return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{} is not JSON: {}", what, e.what()));
    }
  }
  void json(const nlohmann::ordered_json& j) {
    using T = nlohmann::ordered_json::value_t;
    switch (j.type()) {
      case T::null: return out_.byte(op::NONE);
      case T::boolean: return boolean(j.get<bool>());
      case T::number_integer: return integer(j.get<int64_t>());
      case T::number_unsigned: return unsigned_integer(j.get<uint64_t>());
      case T::number_float: {
        out_.byte(op::BINFLOAT);
        return out_.le<uint64_t>(__builtin_bswap64(std::bit_cast<uint64_t>(j.get<double>())));  // big-endian
      }
      case T::string: return text(j.get_ref<const std::string&>());
      case T::array: {
        out_.byte(op::EMPTY_LIST);
        auto it = j.begin();
        return items(j.size(), [&](size_t) { json(*it++); });
      }
      case T::object: {
        out_.byte(op::EMPTY_DICT);
        if (j.empty()) return;
        out_.byte(op::MARK);
        for (const auto& [k, v] : j.items()) text(k), json(v);
        return out_.byte(op::SETITEMS);
      }
      default: throw Error("metadata holds a JSON value pickles cannot carry");
    }
  }
};

}  // namespace

std::vector<uint8_t> export_pickle(const Snapshot& s) { return Exporter(s).run(); }

void export_pickle_file(const Snapshot& s, const std::string& path) {
  std::vector<uint8_t> bytes = export_pickle(s);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

}  // namespace memrec
