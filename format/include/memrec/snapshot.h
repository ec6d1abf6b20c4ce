// The memrec data model: a memory history as recorded from libtorch's caching allocator.
// No torch, no GL: everything here is plain data that the recorder fills and the CLI/viewer read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memrec/packed_vector.h"

namespace memrec {

// Every failure on bad input is reported as this, with a message fit for the user.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The allocator's trace actions (c10/cuda/CUDACachingAllocator.h TraceEntry::Action) in PyTorch's spelling.
enum class Action : uint8_t {
  alloc,
  free_requested,
  free_completed,
  segment_alloc,
  segment_free,
  segment_map,
  segment_unmap,
  oom,
  snapshot,
  user_defined,
  annotate,  // torch.cuda.memory._annotate_memory: metadata attached to a live block after its alloc
};
inline constexpr int kActionCount = 11;
std::string_view to_string(Action a);
std::optional<Action> action_from_string(std::string_view s);

// One allocator action. Snapshot::events holds them packed (memrec/packed_vector.h), about 20 bytes each.
// For `oom`, addr holds the bytes the device had free and size the bytes requested (as PyTorch does).
struct Event {
  int64_t time_ns = 0;       // CLOCK_REALTIME nanoseconds
  uint64_t addr = 0;
  uint64_t size = 0;         // bytes as the trace reports them: requested bytes for alloc/free, segment bytes
  uint32_t stack = 0;        // Snapshot::stacks id; 0 = no stack
  uint32_t scope = 0;        // Snapshot::scopes id of the innermost scope; 0 = none
  uint32_t rounding = 0;     // block size - size when known (allocator rounding), else 0; saturates
  uint16_t stream = 0;       // Snapshot::streams id
  Action action = Action::alloc;
  uint8_t device = 0;

  uint64_t block_size() const { return size + rounding; }
  bool operator==(const Event&) const = default;
};

template <> struct Columns<Event> {
  static constexpr size_t kCount = 9;
  template <class C, class R> [[gnu::always_inline]] static void row(C& c, R& e, const Event& prev) {
    c.delta(0, e.time_ns, prev.time_ns);
    c.value(1, e.action);
    c.value(2, e.device);
    c.value(3, e.stream);
    c.delta(4, e.addr, prev.addr);
    c.value(5, e.size);
    c.value(6, e.stack);
    c.value(7, e.scope);
    c.value(8, e.rounding);
  }
};

// Interned strings; id 0 is the empty string.
class StringTable {
 public:
  StringTable();
  uint32_t intern(std::string_view s);
  const std::string& operator[](uint32_t id) const { return strings_.at(id); }
  size_t size() const { return strings_.size(); }
  const std::vector<std::string>& all() const { return strings_; }
  // Replaces the whole table (used by readers); rebuilds the index.
  void assign(std::vector<std::string> strings);
  // Appends a string a file gives the next id (a reader following a file), even one the table has: ids stay the file's.
  void add(std::string s);
  bool operator==(const StringTable& o) const { return strings_ == o.strings_; }

 private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> index_;
};

// Frame::line of a frame whose line PyTorch wrote as 2^64-1 (some Python frames, e.g. in compiled code).
inline constexpr uint32_t kUnknownLine = UINT32_MAX;

// A code location. pc is the raw return address (0 when unknown, e.g. imported from a pickle).
struct Frame {
  uint64_t pc = 0;
  uint32_t function = 0;  // string ids
  uint32_t file = 0;
  uint32_t library = 0;
  uint32_t line = 0;
  bool operator==(const Frame&) const = default;
};

class FrameTable {
 public:
  uint32_t intern(const Frame& f);
  const Frame& operator[](uint32_t id) const { return frames_.at(id); }
  size_t size() const { return frames_.size(); }
  const std::vector<Frame>& all() const { return frames_; }
  void assign(std::vector<Frame> frames);
  void add(const Frame& f);  // as StringTable::add
  bool operator==(const FrameTable& o) const { return frames_ == o.frames_; }

 private:
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> index_;  // hash -> candidate ids
};

// Call stacks as lists of frame ids, innermost first (PyTorch's order). Stack 0 is the empty stack.
class StackTable {
 public:
  StackTable();
  uint32_t intern(std::span<const uint32_t> frames);
  std::span<const uint32_t> operator[](uint32_t id) const;
  size_t size() const { return offsets_.size() - 1; }
  const std::vector<uint32_t>& offsets() const { return offsets_; }
  const std::vector<uint32_t>& frame_ids() const { return frames_; }
  // Replaces the table; validates offsets (throws Error) and rebuilds the index.
  void assign(std::vector<uint32_t> offsets, std::vector<uint32_t> frame_ids);
  void add(std::span<const uint32_t> frames);  // as StringTable::add
  bool operator==(const StackTable& o) const {
    return offsets_ == o.offsets_ && frames_ == o.frames_;
  }

 private:
  std::vector<uint32_t> offsets_;  // stack i = frames_[offsets_[i], offsets_[i+1])
  std::vector<uint32_t> frames_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> index_;
};

enum class ScopeKind : uint8_t { phase, module, op, step, annotation };
std::string_view to_string(ScopeKind k);

// A named interval on the same clock as events. Scope 0 is a sentinel meaning "no scope".
struct Scope {
  int64_t start_ns = 0;
  int64_t end_ns = -1;  // -1 while still open (e.g. a recording cut short)
  uint32_t name = 0;    // string id
  uint32_t parent = 0;  // enclosing scope id, 0 = none
  ScopeKind kind = ScopeKind::op;
  uint8_t device = 0;
  bool operator==(const Scope&) const = default;
};

template <> struct Columns<Scope> {
  static constexpr size_t kCount = 6;
  template <class C, class R> [[gnu::always_inline]] static void row(C& c, R& s, const Scope& prev) {
    c.delta(0, s.start_ns, prev.start_ns);
    c.delta(1, s.end_ns, s.start_ns);
    c.value(2, s.name);
    c.value(3, s.parent);
    c.value(4, s.kind);
    c.value(5, s.device);
  }
};

enum class KernelKind : uint8_t { kernel, memcpy, memset };
std::string_view to_string(KernelKind k);

// A GPU activity record (CUPTI): kernel, memcpy or memset.
struct Kernel {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t correlation = 0;
  uint64_t bytes = 0;  // memcpy/memset bytes
  uint32_t name = 0;   // string id
  uint16_t stream = 0; // Snapshot::streams id
  KernelKind kind = KernelKind::kernel;
  uint8_t device = 0;
  bool operator==(const Kernel&) const = default;
};

template <> struct Columns<Kernel> {
  static constexpr size_t kCount = 8;
  template <class C, class R> [[gnu::always_inline]] static void row(C& c, R& k, const Kernel& prev) {
    c.delta(0, k.start_ns, prev.start_ns);
    c.delta(1, k.end_ns, k.start_ns);
    c.delta(2, k.correlation, prev.correlation);
    c.value(3, k.bytes);
    c.value(4, k.name);
    c.value(5, k.stream);
    c.value(6, k.kind);
    c.value(7, k.device);
  }
};

// Device memory outside the caching allocator's bookkeeping, as raw facts (memrec/device_memory.h interprets
// them). One record per allocation or release the CUDA driver made (CUPTI's memory activity: cudaMalloc,
// cuMemAlloc, cudaHostAlloc, ... of NCCL, cuBLAS, extensions), and per call of the driver's virtual memory API
// (cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap: NCCL's buffers, expandable segments), the caching allocator's own
// segments included: telling those apart is interpretation, done when the file is read.
// MemoryKind follows CUPTI's CUpti_ActivityMemoryKind, value for value.
enum class MemoryKind : uint8_t { unknown, pageable, pinned, device, array, managed, device_static, managed_static };
inline constexpr int kMemoryKindCount = 8;
std::string_view to_string(MemoryKind k);

// What a DeviceMemoryRecord reports. allocation, release: CUPTI's memory activity, addr = the virtual address.
// vmm_create, vmm_release: a physical allocation of the virtual memory API, addr = its handle. vmm_map, vmm_unmap:
// a virtual range [addr, addr + bytes) mapped to (or unmapped from) the allocation `handle` (0 for unmap).
enum class MemoryOp : uint8_t { allocation, release, vmm_create, vmm_release, vmm_map, vmm_unmap };
inline constexpr int kMemoryOpCount = 6;
std::string_view to_string(MemoryOp op);

struct DeviceMemoryRecord {
  int64_t time_ns = 0;       // CLOCK_REALTIME nanoseconds (CUPTI's timestamp)
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint64_t pc = 0;           // CUPTI's program counter of the call, 0 = unknown
  uint64_t handle = 0;       // vmm_map: the physical allocation mapped
  uint32_t correlation = 0;  // CUPTI correlation id of the driver/runtime call
  uint32_t source = 0;       // string id of the shared object the call came from (CUPTI), 0 = unknown
  uint32_t stack = 0;        // Snapshot::stacks id, 0 = none
  MemoryKind kind = MemoryKind::unknown;
  MemoryOp op = MemoryOp::allocation;
  bool async = false;        // through the stream-ordered (memory pool) API
  uint8_t device = 0;
  bool operator==(const DeviceMemoryRecord&) const = default;
};

template <> struct Columns<DeviceMemoryRecord> {
  static constexpr size_t kCount = 12;
  template <class C, class R> [[gnu::always_inline]] static void row(C& c, R& r, const DeviceMemoryRecord& prev) {
    c.delta(0, r.time_ns, prev.time_ns);
    c.value(1, r.op);
    c.value(2, r.kind);
    c.value(3, r.device);
    c.delta(4, r.addr, prev.addr);
    c.value(5, r.bytes);
    c.delta(6, r.pc, prev.pc);
    c.delta(7, r.correlation, prev.correlation);
    c.value(8, r.source);
    c.value(9, r.stack);
    c.value(10, r.async);
    c.delta(11, r.handle, prev.handle);
  }
};

// The device's memory as the driver reports it (NVML, sampled every few tens of milliseconds while recording).
struct DeviceMemorySample {
  int64_t time_ns = 0;
  uint64_t used = 0;   // bytes in use on the device, by every process on it (nvmlDeviceGetMemoryInfo)
  uint64_t total = 0;
  uint8_t device = 0;  // the CUDA device ordinal, as events' device
  bool operator==(const DeviceMemorySample&) const = default;
};

template <> struct Columns<DeviceMemorySample> {
  static constexpr size_t kCount = 4;
  template <class C, class R> [[gnu::always_inline]] static void row(C& c, R& m, const DeviceMemorySample& prev) {
    c.delta(0, m.time_ns, prev.time_ns);
    c.value(1, m.device);
    c.delta(2, m.used, prev.used);
    c.value(3, m.total);
  }
};

// What the program holds a tensor storage as (memrec/_owners.py names them).
enum class OwnerKind : uint8_t { parameter, buffer, gradient, optimizer_state };
inline constexpr int kOwnerKindCount = 4;
std::string_view to_string(OwnerKind k);

// A tensor storage the program holds as a parameter, buffer, gradient or optimizer state, named while the block at
// `addr` was live: it owns that block for the block's whole life (Replay::owner_of attaches it). Placed by `event`,
// the number of Snapshot::events recorded before it: the recorder's buffer is one ordered stream, while event and
// owner clocks may differ by a little (CUDA's converted stamps).
struct Owner {
  int64_t time_ns = 0;  // CLOCK_REALTIME nanoseconds
  uint64_t event = 0;
  uint64_t addr = 0;    // the storage's base pointer: the block's address
  uint64_t size = 0;    // the storage's bytes (the block's size, for a block the recording never saw allocated)
  uint32_t name = 0;    // string id: "model.layers.3.mlp.up_proj.weight.exp_avg"
  uint32_t module = 0;  // string id of the module scope name, "model.layers.3.mlp.up_proj"; 0 = none
  OwnerKind kind = OwnerKind::parameter;
  uint8_t device = 0;
  bool operator==(const Owner&) const = default;
};

template <> struct Columns<Owner> {
  static constexpr size_t kCount = 8;
  template <class C, class R> [[gnu::always_inline]] static void row(C& c, R& o, const Owner& prev) {
    c.delta(0, o.time_ns, prev.time_ns);
    c.delta(1, o.event, prev.event);
    c.value(2, o.device);
    c.delta(3, o.addr, prev.addr);
    c.value(4, o.size);
    c.value(5, o.name);
    c.value(6, o.module);
    c.value(7, o.kind);
  }
};

enum class BlockState : uint8_t { active_allocated, active_pending_free, inactive };
std::string_view to_string(BlockState s);
std::optional<BlockState> block_state_from_string(std::string_view s);

struct Block {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t requested_size = 0;
  uint32_t stack = 0;
  BlockState state = BlockState::inactive;
  bool operator==(const Block&) const = default;
};

// One reserved segment and its blocks, as PyTorch's snapshot()["segments"] lists them.
struct Segment {
  uint64_t addr = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  uint64_t requested_size = 0;
  int64_t pool_id[2] = {0, 0};
  uint32_t stack = 0;
  uint16_t stream = 0;
  uint8_t device = 0;
  bool is_large = true;
  bool is_expandable = false;
  std::vector<Block> blocks;
  bool operator==(const Segment&) const = default;
};

// The fields of a PyTorch trace entry that Event has no room for, kept for the events that carry them.
// compile_context and user_metadata are string ids, 0 = PyTorch's defaults ("N/A" and ""); an event without a row
// has both defaults. extra is the string id of a JSON object with the entry's other keys (forward_frames, values the
// two fields cannot hold, keys of newer PyTorch versions), 0 = none; its keys take precedence over the fields.
struct EventContext {
  uint64_t event = 0;  // index into Snapshot::events
  uint32_t compile_context = 0;
  uint32_t user_metadata = 0;
  uint32_t extra = 0;
  bool operator==(const EventContext&) const = default;
};

// A whole recording. Events of one device are in allocator order; devices may interleave.
struct Snapshot {
  // Run metadata: "command", "workload", "torch_version", "allocator_settings" (JSON text), "device.0.name", ...
  std::map<std::string, std::string> metadata;
  StringTable strings;
  FrameTable frames;
  StackTable stacks;
  std::vector<uint64_t> streams{0};  // raw stream handles; id 0 is the default stream
  PackedVector<Scope> scopes{Scope{}};
  PackedVector<Event> events;
  PackedVector<Kernel> kernels;
  std::vector<EventContext> event_contexts;  // by increasing event index; empty for most recordings
  PackedVector<DeviceMemoryRecord> device_memory;   // CUPTI memory activity, in the order CUPTI handed it over
  PackedVector<DeviceMemorySample> memory_samples;  // NVML samples, in time order per device
  PackedVector<Owner> owners;  // in recording order (event non-decreasing); empty for most older files
  std::vector<Segment> segments_start;  // allocator state when recording began (may be empty/unknown)
  std::vector<Segment> segments_end;    // allocator state when recording ended
  bool has_segments_start = false;
  uint64_t dropped_events = 0;  // events the recorder could not keep (buffer full, caps)
  bool complete = true;         // false when read from a file whose writer never closed it
  // What the user must know about the input, one sentence each: a .memrec cut short ("run.memrec was cut short:
  // ... the rest is lost"), an inconsistent pickle. Every command shows them; not stored in .memrec files.
  std::vector<std::string> warnings;

  uint16_t intern_stream(uint64_t raw);
  // A snapshot with this one's tables (metadata, strings, frames, stacks, streams) and no rows: where one made of some
  // of this one's events, scopes or kernels starts.
  Snapshot with_tables() const;
  bool operator==(const Snapshot&) const = default;
};

// The innermost scope of `kind` at `scope` or around it (its own kind counts), or 0 when there is none.
uint32_t enclosing_scope_id(const Snapshot& s, uint32_t scope, ScopeKind kind);

}  // namespace memrec
