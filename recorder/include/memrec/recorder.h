// Records libtorch's allocators (CUDA caching allocator, CPU allocator), C++ stacks, scopes and CUDA kernels
// into a memrec::Snapshot streamed to a .memrec file. No torch headers here: users include this freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "memrec/snapshot.h"

namespace memrec {

// How raw return addresses are taken on the allocating thread (bench/recorder measures each).
enum class StackCapture : uint8_t {
  automatic,         // the fastest available: libunwind, else torch_unwind (libtorch >= 2.1), else unwind_backtrace
  unwind_backtrace,  // libgcc's _Unwind_Backtrace
  boost,             // boost::stacktrace::safe_dump_to
  torch_unwind,      // torch::unwind::unwind() (libtorch >= 2.1)
  libunwind,         // libunwind's unw_backtrace with per-thread caches (libunwind.so.8 loaded at run time)
};
std::string_view to_string(StackCapture c);
// Whether `c` works in this process; the first call for libunwind loads it (call before capture_stack).
bool stack_capture_available(StackCapture c);
// Raw return addresses of the calling thread, innermost first (the first one inside the capture itself).
// Returns how many were written, at most `max`. `c` is an available method other than automatic.
int capture_stack(StackCapture c, uint64_t* out, int max);

// Frames of an interpreter running on the allocating thread (the Python module supplies one), joined with the
// C++ frames where the interpreter's frame-evaluation function appears, as PyTorch's stacks="all" does.
class ScriptFrames {
 public:
  virtual ~ScriptFrames() = default;
  // On the allocating thread: up to `max` frames, innermost first, as opaque words below 2^63. `may_block`
  // is false where the caller holds a lock another thread may wait for under the interpreter's lock
  // (the CUDA allocator's): then it must not wait for the interpreter's lock.
  virtual int capture(uint64_t* out, int max, bool may_block) = 0;
  // Whether capture(..., may_block=false) gives the frames of threads that do not hold the interpreter's lock.
  // Asked on the thread that starts the recording; where not, the CUDA allocator gathers them before its lock.
  virtual bool captures_unlocked() { return false; }
  // On the drain thread, once per distinct word: what the frame shows.
  virtual void describe(uint64_t word, std::string& function, std::string& file, uint32_t& line) = 0;
};

struct RecorderOptions {
  std::string output;          // .memrec path, written as the program runs (the recorder keeps only what later
                               // chunks need); empty = keep the whole recording in memory (Recorder::snapshot())
  bool stacks = true;          // C++ stack for every alloc
  std::shared_ptr<ScriptFrames> script;  // interpreter frames for every alloc (also when `stacks` is off)
  bool free_stacks = false;    // ... and for every free
  bool kernels = true;         // CUPTI kernel/memcpy/memset timeline (CUDA builds only)
  // Which steps (ScopeKind::step scopes, counted from 1 as they open) have kernels: every step up to
  // kernel_first_steps, then every kernel_every-th; 1 = every step. CUPTI's cost is paid per kernel traced, so a
  // long run pays it on a tenth of its steps. Before the first step, kernels are traced.
  uint32_t kernel_first_steps = 3;
  uint32_t kernel_every = 10;
  bool device_memory = true;   // device memory outside the caching allocator (CUDA builds only): CUPTI's memory
                               // activity (with `stacks`, each allocating call's C++ stack) and NVML's used memory
                               // of each device, sampled every 20 ms
  std::string cupti_busy;      // why CUPTI is the program's now (its torch.profiler runs): the recording starts
                               // with CUPTI lent (lend_cupti); empty = take it
  bool cupti_kineto = false;   // torch.profiler's Kineto was set up in this process before: it keeps CUPTI's one
                               // callback subscription, which is then no sign of an unknown CUPTI user
  bool quiet = false;          // print nothing: what a message would say is in the file's metadata, for the
                               // program's own stderr to stay its own (memrec record prints it afterwards)
  bool cpu = true;             // wrap libtorch's CPU allocator when the CUDA allocator is not recorded (device 0)
  bool cuda = true;            // hook the CUDA caching allocator (CUDA builds, when a GPU is present)
  bool ops = true;             // aten op scopes through at::RecordFunction
  bool user_ops = false;       // ... and record_function() blocks (torch.compile's "Torch-Compiled Region: 0/0")
  bool ops_on_chosen_steps = false;  // op scopes on the kernels' steps only (kernel_first_steps, then every
                                     // kernel_every-th): RecordFunction's machinery costs every aten op while on
  bool module_scopes = false;  // module scopes (open_scope, ScopeKind::module) keep the autograd nodes their call
                               // makes, and backward runs each node inside the module scopes of its call
  StackCapture capture = StackCapture::automatic;
  size_t buffer_events = 1 << 16;  // events buffered between drains; more in one interval are dropped (counted)
  uint64_t max_events = 0;     // keep at most this many allocator events (0 = no cap); later events, scopes and
                               // kernels are dropped and counted, so the recording is a prefix of bounded size
  int max_frames = 64;
  int flush_ms = 500;          // drain + file flush period: a killed process loses at most about this much
};

// The buffer_events whose hand-off buffers (both halves, room for stacks included) take about `bytes`.
size_t buffer_events_for_bytes(size_t bytes);

// What the recorder saw besides the snapshot, for reports and self-checks.
struct RecorderStats {
  uint64_t events = 0;          // events kept
  uint64_t dropped = 0;         // allocator events lost: buffer_full + over_cap + cpu_unwrapped
  uint64_t dropped_buffer_full = 0;  // more events in one drain interval than the buffer holds
  uint64_t dropped_over_cap = 0;     // events after max_events
  uint64_t dropped_by_action[kActionCount] = {};  // buffer_full + over_cap, by Action
  uint64_t scopes_dropped = 0;  // scope records lost to a full buffer or the cap
  uint64_t owners = 0;          // owner rows kept (Snapshot::owners)
  uint64_t owners_dropped = 0;  // owner rows lost to a full buffer or the cap
  uint64_t kernels_dropped = 0; // kernel records CUPTI lost, or that came after the cap
  uint64_t cpu_allocs = 0;      // non-empty allocations the CPU wrapper served while recording
  uint64_t cpu_zero_allocs = 0; // zero-byte allocations (no pointer, no free: not events)
  uint64_t cpu_unwrapped = 0;   // allocations whose deleter could not be wrapped (counted as dropped)
  uint64_t cpu_unmatched_frees = 0;  // CPU frees of blocks allocated before start (or whose alloc was
                                     // dropped): the recording has no such block, so these are not events
  uint64_t kernels = 0;
  uint64_t unique_frames = 0;
  double symbolize_ms = 0;      // time spent symbolizing new frames
  uint64_t bytes_written = 0;
  uint64_t rows_held = 0;       // rows of the recording's tables (scopes, events, kernels, device memory, owners) in
                                // memory now: all of them without a file; with one, those not written yet and
                                // the few later chunks read (open scopes, owner rows the index has yet to place)
  uint64_t rows_held_peak = 0;  // the most rows held at once, counted as each drain ends, before the file takes them
};

// One recording at a time per process. start() installs the hooks, stop() writes the end state and closes the file.
class Recorder {
 public:
  explicit Recorder(RecorderOptions options = {});
  ~Recorder();  // stops if still running
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void start();  // throws Error (bad path, another recorder running, capture method unavailable)
  void stop();
  bool running() const;

  // Adds run metadata ("workload", "config.layers", ...); call before stop().
  void set_metadata(const std::string& key, const std::string& value);
  // Without an output file: the recording so far (complete after stop()); not thread-safe against a running drain,
  // so read it after stop(). With one, the file is the record: after stop() this is the file read back whole
  // (read once, on the first call, so it costs the whole recording's memory then); while recording it throws Error.
  const Snapshot& snapshot() const;
  RecorderStats stats() const;
  bool cuda_active() const;  // the CUDA allocator is being recorded
  // The program's profiler (torch.profiler's Kineto) is about to use CUPTI: memrec lets go of it until
  // take_back_cupti(), and the file names the window it did not trace kernels or device memory calls in (`why`).
  // The allocator's events are recorded throughout. Nothing while CUPTI is not in use.
  void lend_cupti(const std::string& why);
  void take_back_cupti();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Scopes on the recording's clock, opened and closed on the calling thread in stack order. open_scope returns
// false (and records nothing) when nothing records; call close_scope only after an open that returned true.
bool open_scope(std::string_view name, ScopeKind kind = ScopeKind::annotation);
void close_scope();
// A scope name kept for the process's lifetime: code that opens scopes of the same names again and again (a
// module's, once per call) interns each name once, and opening by it looks nothing up by the name's text.
struct ScopeName {
  const std::string* text = nullptr;  // never null once interned
};
ScopeName intern_scope_name(std::string_view name);
bool open_scope(ScopeName name, ScopeKind kind);
// How many scopes this thread opened the recorder has closed on its own since the last call: a "recompute" phase
// (with the scopes inside it) still open when a backward node starts was stopped early, and is closed then.
int take_scopes_closed();

// Names the tensor storage at `addr` (`size` bytes, on `device` as events number devices) while it is live: the
// block there belongs to `name` ("model.layers.3.mlp.up_proj.weight.exp_avg") of `module` (its module scope name,
// "" for none) for its whole life, including before this call and before the recording began. Not for the
// allocation path: once per tensor per change. Returns false (nothing recorded) when nothing records or the row
// was dropped (full buffer, max_events reached), so that the caller can try again later.
bool record_owner(uint8_t device, uint64_t addr, uint64_t size, std::string_view name, std::string_view module,
                  OwnerKind kind);

// Stops recording in a child process made by fork() without touching the parent's drain thread, file or locks
// (none of them exist in the child): the hooks stop recording, nothing is written, the recorder is leaked.
void forget_recording_after_fork();

// open_scope/close_scope for a block. Cheap no-ops when nothing records.
class ScopeGuard {
 public:
  explicit ScopeGuard(std::string_view name, ScopeKind kind = ScopeKind::annotation);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace memrec

#define MEMREC_CONCAT_INNER(a, b) a##b
#define MEMREC_CONCAT(a, b) MEMREC_CONCAT_INNER(a, b)
// MEMREC_SCOPE("name") or MEMREC_SCOPE("forward", memrec::ScopeKind::phase): a scope until the end of the block.
#define MEMREC_SCOPE(...) ::memrec::ScopeGuard MEMREC_CONCAT(memrec_scope_, __LINE__)(__VA_ARGS__)
