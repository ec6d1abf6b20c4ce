// Pieces of the recorder shared between its translation units. Everything the allocating threads run lives in
// namespace memrec::detail: the symbolizer strips leading frames of that namespace from every stack.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "clock.h"
#include "hook_time.h"
#include "memrec/recorder.h"

namespace memrec::detail {

enum class RecordKind : uint8_t { event, scope_open, scope_close, owner };

// One entry of the hand-off buffer. Variable-length data (pcs, scope names) lives in Batch::payload.
struct Record {
  int64_t time = 0;      // a stamp() (clock.h): the drain turns it into CLOCK_REALTIME ns
  uint64_t addr = 0;
  uint64_t size = 0;     // 0 for CPU frees: the drain knows the size
  uint64_t stream = 0;   // raw stream handle
  uint32_t payload = 0;  // first payload word
  uint32_t scope = 0;    // event: innermost scope; scope_open/close: the scope's id
  uint32_t parent = 0;   // scope_open; owner: bytes of the module name (the name's bytes follow it)
  uint32_t seq = 0;      // the buffer's order across threads (low bits of EventBuffer's counter)
  uint16_t payload_len = 0;  // event: pcs; scope_open: name bytes; owner: module and name bytes
  RecordKind kind = RecordKind::event;
  Action action = Action::alloc;
  ScopeKind scope_kind = ScopeKind::op;
  uint8_t device = 0;
  bool cuda = false;     // from the CUDA allocator's trace, taken under its lock
  OwnerKind owner_kind = OwnerKind::parameter;
};
static_assert(sizeof(Record) == 56, "a Record per allocation: keep it this size");

struct Batch {
  std::vector<Record> records;
  std::vector<uint64_t> payload;
  void reserve(size_t records_cap, size_t payload_cap);
  void clear() { records.clear(); payload.clear(); }
};

// Wakes the drain thread early. A request is remembered, so one made while the drain is busy is not lost.
class Waker {
 public:
  void request();
  // Waits until a request, stop() or `timeout`; false once stopped. Clears the request it wakes for.
  // `requested` (when given) tells whether a request, rather than the timeout, ended the wait.
  bool wait(std::chrono::milliseconds timeout, bool* requested = nullptr);
  void stop();
  void reset();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false, stopped_ = false;
};

// What the buffer refused, by cause. Event drops are also split by action so tests can balance them exactly
// against what the allocator did.
struct Drops {
  uint64_t buffer_full = 0;  // events that found the buffer full
  uint64_t over_cap = 0;     // events after max_events were kept
  uint64_t scopes = 0;       // scope opens and closes, for either cause
  uint64_t owners = 0;       // owner rows, for either cause
  uint64_t by_action[kActionCount] = {};
  uint64_t events() const { return buffer_full + over_cap; }
};

struct Chunk;
struct ProducerSlot;

// Bounded hand-off from allocating threads to the drain thread, lock-free for events. Each thread writes into
// chunks of its own (single producer, single consumer: the drain), taken from one pool sized by `enable`, so the
// memory is the same however many threads allocate; a thread finds room without a lock until its chunk is full,
// then takes another from the pool. Each record is stamped from one counter (a relaxed fetch_add): under the CUDA
// allocator's lock that is the allocator's own order. `take` merges every thread's records in that order into one
// Batch. No room = dropped and counted, never a wait; the pool's last eighth takes no events, so that scopes and
// owner rows outlast a drain that falls behind. After `max_events` events the recording is capped: later
// events, scope opens and owner rows are dropped and counted. One process-wide instance that is never destroyed,
// and chunks and slots are never freed, so late frees (static destruction, exiting threads) stay safe.
class EventBuffer {
 public:
  static EventBuffer& get();
  constexpr EventBuffer() = default;

  // Starts a recording: resets ids and drops; `records_cap` records and `payload_words` words in all threads' chunks.
  // max_events 0 = no cap.
  void enable(size_t records_cap, size_t payload_words, uint64_t max_events);
  void disable();
  // After fork: refuse everything from now on without taking a lock (another thread may have held one).
  void forget() { enabled_.store(false, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  bool push_event(const Record& r, std::span<const uint64_t> pcs);
  uint32_t push_scope_open(int64_t start, std::string_view name, ScopeKind kind, uint32_t parent);  // 0 = dropped
  void push_scope_close(uint32_t id, int64_t end);
  // A tensor storage's owner (memrec::record_owner); names past 255 bytes are cut. False when dropped.
  bool push_owner(const Record& r, std::string_view module, std::string_view name);
  // Fills `spare` (cleared first) with every record pushed so far, in counter order, payload offsets into its
  // payload. A record stamped after one whose thread has not finished writing it waits for the next take. True
  // when the cap had been reached by then, so that `spare` now holds the last events of the recording.
  bool take(Batch& spare);
  Drops drops() const;
  // Wakes the drain early when half the pool was filled since the last take, or on demand (an OOM: get it on disk
  // now).
  void set_waker(Waker* w);
  void wake();

 private:
  static constexpr uint64_t kStopped = uint64_t(1) << 63;  // in seq_: stamps taken after disable() are refused

  struct DropCounters {
    std::atomic<uint64_t> buffer_full{0}, over_cap{0}, scopes{0}, owners{0};
    std::atomic<uint64_t> by_action[kActionCount] = {};
  };
  // Where the calling thread's next record (an event or not) goes, with room for `words` payload words; null when
  // the pool is empty.
  Chunk* room(size_t words, bool event);
  Chunk* next_chunk(ProducerSlot& slot, size_t words, bool event);
  ProducerSlot& claim_slot();
  bool capped() const;
  bool count_event();  // false: over the cap
  bool drop_event(Action a, bool over_cap);
  bool stamp_and_write(Chunk& c, const Record& r, size_t payload_len, std::string_view a = {},
                       std::string_view b = {});
  int32_t since_taken(uint32_t seq) const;
  uint64_t first_unwritten();
  void move_records(Batch& out, uint64_t end);
  void give_back();

  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> seq_{kStopped};
  std::atomic<uint64_t> stopped_at_{0};  // seq_ when disabled: every stamp below it gets written
  std::atomic<uint64_t> max_events_{0}, kept_events_{0};
  DropCounters drops_;
  std::atomic<ProducerSlot*> slots_{nullptr};  // every thread that pushed, newest first; never shrinks
  std::mutex scope_mu_;  // a scope's id and its stamp are taken together: ids count up in stamp order
  uint32_t next_scope_ = 1;

  mutable std::mutex pool_mu_;  // chunks change hands under it (once a chunk), and the drain is woken under it
  std::vector<Chunk*> free_;  // chunks not handed out (the ones never handed out are raw storage)
  size_t chunks_made_ = 0, chunks_held_ = 0, chunks_limit_ = 0, handed_since_take_ = 0;
  uint32_t chunk_records_ = 0, chunk_words_ = 0;
  bool woken_ = false;
  Waker* waker_ = nullptr;

  // The drain's own.
  size_t records_cap_ = 0, payload_cap_ = 0;
  uint64_t next_seq_ = 0;       // the stamp the next record taken must carry
  std::vector<uint64_t> seen_;  // a bit per stamp from next_seq_: which ones the threads have written
  std::vector<Chunk*> read_;    // chunks read to the end, for the pool
};

// A global that is never destroyed, constant-initialized (no guard on each use).
template <class T>
union NeverDestroyed {
  constexpr NeverDestroyed() : value() {}
  ~NeverDestroyed() {}
  T value;
};
extern constinit NeverDestroyed<EventBuffer> g_event_buffer;  // hooks may still run during static destruction
inline EventBuffer& EventBuffer::get() { return g_event_buffer.value; }

// Recording state read by the hooks on every allocation.
struct HookConfig {
  bool stacks = false;       // C++ frames
  bool free_stacks = false;
  ScriptFrames* script = nullptr;  // interpreter frames (owned by the Recorder's options)
  StackCapture capture = StackCapture::unwind_backtrace;
  int max_frames = 64;
};
extern constinit HookConfig g_hook_config;
inline HookConfig& hook_config() { return g_hook_config; }

// Stack words with this bit set are ScriptFrames words; the others are return addresses.
inline constexpr uint64_t kScriptFrameBit = uint64_t(1) << 63;

// Raw return addresses of the calling thread, innermost first. Returns how many were written.
int capture_stack(StackCapture method, uint64_t* out, int max);

// libunwind's unw_backtrace once loaded (capture.cpp), else null.
using UnwBacktrace = int (*)(void**, int);
extern constinit UnwBacktrace g_unw_backtrace;

// capture_stack, with libunwind's walk started in the caller's own frame rather than in one more of ours.
[[gnu::always_inline]] inline int capture_here(StackCapture method, uint64_t* out, int max) {
  if (method == StackCapture::libunwind && g_unw_backtrace)
    return max > 0 ? g_unw_backtrace(reinterpret_cast<void**>(out), max) : 0;
  return detail::capture_stack(method, out, max);
}

// Appends the interpreter's frames for an event, tagged with kScriptFrameBit: `script` when the allocator gathered
// them already (outside its lock), else the recorder's own capture. Returns how many were written.
int script_frames(const HookConfig& cfg, const Record& r, const std::span<const uint64_t>* script, uint64_t* out,
                  int max);

// The innermost scope of this thread (materializing lazily-recorded op scopes), or the ambient user scope.
uint32_t current_scope();
// Starts a new scope generation (on Recorder::start) and registers/unregisters the aten op callbacks (with
// `modules`, also for backward nodes' module scopes).
// Op scopes on some steps only: the first `first`, then every `every`-th (as the kernels' rule).
struct OpStepRule {
  bool chosen = false;
  uint32_t first = 0, every = 1;
};
struct OpStepCount {
  uint32_t traced = 0, begun = 0;
};
void scopes_begin(bool ops, bool user_ops, bool modules, OpStepRule op_steps);
void op_step_begins();     // a step scope opens
OpStepCount op_steps();    // steps begun, and those with op scopes
void scopes_end();
void scopes_forget();  // after fork: stop recording scopes, touching no lock

inline bool wants_stack(const HookConfig& cfg, Action a) {
  if (!cfg.stacks && !cfg.script) return false;
  switch (a) {
    case Action::alloc:
    case Action::segment_alloc:
    case Action::segment_map:
    case Action::oom: return true;
    case Action::free_requested: return cfg.free_stacks;
    default: return false;
  }
}

// Records one allocator action from the allocating thread: stack (if asked), scope, then the event.
// `script` (when given) holds the interpreter's frames already gathered for it, outside the allocator's lock.
// Inlined into each hook, so that a C++ stack's walk starts in the hook's frame: a frame costs the walk 11-20 ns.
[[gnu::always_inline]] inline void record_event(Record r, const std::span<const uint64_t>* script = nullptr) {
  HookTimer timer(HookKind::event, t_event_calls);
  const HookConfig& cfg = hook_config();
  if (!wants_stack(cfg, r.action)) {
    r.scope = current_scope();
    EventBuffer::get().push_event(r, {});
    return;
  }
  constexpr int kMaxFrames = 128;  // each of the C++ and the interpreter's frames
  uint64_t pcs[2 * kMaxFrames];
  int max = std::min(cfg.max_frames, kMaxFrames);
  int n = cfg.stacks ? capture_here(cfg.capture, pcs, max) : 0;
  n += script_frames(cfg, r, script, pcs + n, max);
  r.scope = current_scope();
  EventBuffer::get().push_event(r, {pcs, static_cast<size_t>(n)});
}

// CPU allocator wrapper (cpu_allocator.cpp).
struct CpuCounters {
  uint64_t allocs = 0, zero_allocs = 0, unwrapped = 0;
};
void cpu_install();
void cpu_uninstall();
void cpu_forget();  // after fork: stop recording, touching no lock
CpuCounters cpu_counters();

// CUDA caching allocator and CUPTI (cuda_recorder.cpp / cupti.cpp; cuda_none.cpp without CUDA).
bool cuda_recordable();                   // built with CUDA and a device is present
std::vector<std::string> cuda_pci_bus_ids();  // of each CUDA device, by ordinal (NVML finds devices by them)
// Hooks (once per process), segments_start, metadata. With `script` that cannot capture under the allocator's
// lock, the allocator gathers its frames for each alloc through recordHistory's context function, which runs before
// the allocator's lock is taken.
void cuda_start(Snapshot& s, ScriptFrames* script);
void cuda_stop(Snapshot& s);              // synchronizes, segments_end
void cuda_forget();                       // after fork: stop recording, touching no lock

// A CUPTI activity record; `name` indexes the CUPTI module's own name list, handed over by cupti_take.
struct KernelRecord {
  Kernel kernel;        // Kernel::name and ::stream unset
  uint64_t stream = 0;  // CUPTI stream id
  uint32_t name = 0;
};
// A CUPTI memory activity record, or one of a virtual memory call; `source` indexes the same name list as
// KernelRecord::name; `pcs` is the stack of the allocating call when cupti_start_calls(true) (innermost first).
struct MemoryActivity {
  DeviceMemoryRecord record;  // DeviceMemoryRecord::source and ::stack unset
  uint32_t source = 0;
  std::vector<uint64_t> pcs;
};
// Enables the kernel timeline (kernels, memcpy, memset) and/or the memory activity (allocations and releases).
// CUPTI takes one callback subscriber per process, and its activity buffers go to whoever registered last, so memrec
// shares it: with `lent_to` (the program's profiler holds it now) nothing is touched until cupti_take_back; when
// another user holds the subscription and `kineto` does not explain it (Nsight Systems, a profiler memrec did not
// see start) memrec leaves CUPTI alone for the whole recording. Each window without tracing is kept (cupti_gaps_json).
void cupti_start(bool kernels, bool memory, uint32_t kernel_first_steps, uint32_t kernel_every,
                 const std::string& lent_to, bool kineto);
// A step scope opens: traces its kernels or not, as cupti_start's step rule says.
void cupti_step_begins();
struct KernelStepCount {
  uint32_t traced = 0, begun = 0;
};
KernelStepCount cupti_kernel_steps();
// After cupti_start with `memory`, CUPTI's callback API: records of the virtual memory calls (cuMemCreate, cuMemRelease,
// cuMemMap, cuMemUnmap), and with `stacks` the stack of each call that allocates device memory. Returns "on" or
// "on, with stacks", or why not (another CUPTI subscriber, e.g. torch.profiler).
std::string cupti_start_calls(bool stacks);
uint64_t cupti_stacks_dropped();  // stacks of calls whose memory record had not come when the pending ones overflowed
// Before the program's profiler starts: forced flush, memrec's kinds disabled, its subscription given up.
void cupti_lend(const std::string& why);
// After the profiler stopped (it flushed its buffers): memrec's buffers and kinds again, its subscription if free.
void cupti_take_back();
void cupti_stop();   // forced flush, then disable (stacks included); leaves a lent CUPTI alone
// The windows memrec did not trace, as JSON [{"what", "from_ns", "to_ns", "why"}] (to_ns null: open at the end); ""
// when there were none. Read by format/src/load.cpp.
std::string cupti_gaps_json();
// Moves the records completed so far into `kernels` and `memory`; appends names first seen since the last call
// to `new_names`.
void cupti_take(std::vector<KernelRecord>& kernels, std::vector<MemoryActivity>& memory,
                std::vector<std::string>& new_names);
uint64_t cupti_dropped();  // records CUPTI itself could not keep (kernels and memory alike)

// NVML samples of each CUDA device's used memory (nvml.cpp), taken on the drain thread.
class NvmlSampler {
 public:
  NvmlSampler();
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;
  // Loads libnvidia-ml.so.1 and finds each CUDA device (by ordinal) by its PCI bus id. Returns "on", or why there
  // will be no samples ("absent: ...", "off: ..."), for the recording's metadata.
  std::string open(const std::vector<std::string>& pci_bus_ids);
  void sample(Snapshot& s);  // one sample of every device, now; nothing when not open
  bool sampling() const { return initialized_; }
  uint64_t failures() const { return failures_; }  // samples NVML refused (counted, not written)
  void close();

 private:
  struct Api;
  struct Device {
    uint8_t ordinal;
    void* handle;
  };
  std::unique_ptr<Api> api_;
  void* lib_ = nullptr;
  bool initialized_ = false;
  std::vector<Device> devices_;
  uint64_t failures_ = 0;
};

}  // namespace memrec::detail
