#include "memrec/recorder.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <torch/version.h>

#include "internal.h"
#include "memrec/format.h"
#include "symbolize.h"

namespace memrec {
namespace {

std::atomic<bool> g_running{false};  // one recording per process: the hooks are process-wide

constexpr size_t kPayloadWordsPerEvent = 32;  // room for the average stack; a full payload drops like full records
constexpr auto kSamplePeriod = std::chrono::milliseconds(20);  // NVML: a 10 ms step shows as 1-2 samples

StackCapture resolve_capture(StackCapture c) {
  if (c == StackCapture::automatic) {
    for (StackCapture fastest : {StackCapture::libunwind, StackCapture::torch_unwind})
      if (stack_capture_available(fastest)) return fastest;
    return StackCapture::unwind_backtrace;
  }
  if (!stack_capture_available(c))
    throw Error(fmt::format("stack capture '{}' is not available here: it needs {}", to_string(c),
                            c == StackCapture::libunwind ? "libunwind.so.8 (libunwind8)" : "libtorch >= 2.1"));
  return c;
}

// Which rank of which host this process is, from the variables torchrun sets: `memrec stats --by rank` and the
// viewer put the ranks of a run side by side with them (hosts decide whether the clocks can be shared).
void note_process(std::map<std::string, std::string>& metadata) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) metadata["host"] = host;
  for (auto [variable, key] : {std::pair{"RANK", "rank"}, {"LOCAL_RANK", "local_rank"}, {"WORLD_SIZE", "world_size"}})
    if (const char* value = std::getenv(variable)) metadata[key] = value;
}

// 2nd, 3rd, 10th, 11th, 21st.
std::string ordinal(uint32_t n) {
  const char* suffix = n % 100 / 10 == 1 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return fmt::format("{}{}", n, suffix);
}

}  // namespace

size_t buffer_events_for_bytes(size_t bytes) {
  constexpr size_t kPerEvent = 2 * (sizeof(detail::Record) + kPayloadWordsPerEvent * sizeof(uint64_t));
  return std::max<size_t>(1, bytes / kPerEvent);
}

struct Recorder::Impl {
  RecorderOptions opt;
  Snapshot snap;  // the whole recording in memory; a window of it when writing a file (Writer::flush_and_release)
  std::unique_ptr<Writer> writer;
  std::optional<Snapshot> read_back;  // the file read back, for snapshot() after stop()
  detail::Symbolizer symbolizer;
  detail::TickClock stamps;  // turns the hooks' stamps into ns
  detail::Batch spare;
  bool running = false, cuda = false, cupti = false;
  detail::NvmlSampler nvml;

  std::thread drain_thread;
  std::mutex mu;  // guards snap and writer between the drain thread and the caller
  detail::Waker waker;
  std::exception_ptr drain_error;

  std::unordered_map<uint64_t, uint64_t> cpu_live;  // CPU address -> requested bytes (frees arrive without size)
  std::vector<detail::KernelRecord> kernel_records;
  std::vector<detail::MemoryActivity> memory_records;
  std::vector<std::string> new_kernel_names;
  std::vector<uint32_t> kernel_names;  // CUPTI module's name ids (kernels and libraries) -> snapshot string ids
  int64_t last_event_ns = 0;           // the latest event kept (threads can push slightly out of time order)
  int64_t capped_at_ns = -1;           // last_event_ns once max_events is reached (the last kept event's time)
  uint64_t kernels_over_cap = 0;
  uint64_t cpu_unmatched_frees = 0;
  uint64_t rows_held_peak = 0;

  void start();
  void start_cupti();
  void start_nvml();
  void note_kernel_steps();
  void note_hook_times();
  void stop();
  void drain_loop();
  void drain_once();
  void apply(const detail::Batch& b);
  void add_event(const detail::Record& r, const detail::Batch& b);
  void add_owner(const detail::Record& r, const detail::Batch& b);
  void end_scope(uint32_t id, int64_t end_ns);
  void add_cupti();
  RecorderStats drop_stats() const;
  RowStart released() const { return writer ? writer->released() : RowStart{}; }
  uint64_t rows_held() const;
};

void Recorder::Impl::start() {
  detail::choose_stamps();  // before g_running lets record_owner through
  if (g_running.exchange(true)) throw Error("another memrec::Recorder is already recording in this process");
  try {
    auto& cfg = detail::hook_config();
    cfg = {opt.stacks, (opt.stacks || opt.script) && opt.free_stacks, opt.script.get(), resolve_capture(opt.capture),
           opt.max_frames};
    symbolizer.start(opt.script.get());
    snap = Snapshot{};
    read_back.reset();
    rows_held_peak = 0;
    snap.metadata["recorder.stacks"] = opt.stacks ? to_string(cfg.capture) : "off";
    snap.metadata["recorder.script_frames"] = opt.script ? "on" : "off";
    snap.metadata["recorder.free_stacks"] = cfg.free_stacks ? "on" : "off";
    snap.metadata["torch_version"] = TORCH_VERSION;
    snap.metadata["clock"] = "CLOCK_REALTIME ns";
    stamps.start();
    detail::hook_times_reset();
    snap.metadata["recorder.stamps"] = stamps.tsc() ? "tsc" : "clock_gettime";
    snap.metadata["pid"] = std::to_string(getpid());
    note_process(snap.metadata);
    if (!opt.output.empty()) writer = std::make_unique<Writer>(opt.output);

    auto& buffer = detail::EventBuffer::get();
    waker.reset();
    buffer.set_waker(&waker);
    buffer.enable(opt.buffer_events, opt.buffer_events * kPayloadWordsPerEvent, opt.max_events);
    capped_at_ns = -1;
    last_event_ns = 0;
    kernels_over_cap = 0;
    cpu_unmatched_frees = 0;
    cpu_live.clear();  // blocks of an earlier recording are not this one's
    if (opt.max_events) snap.metadata["recorder.max_events"] = std::to_string(opt.max_events);
    detail::scopes_begin(opt.ops, opt.user_ops, opt.module_scopes,
                         {opt.ops_on_chosen_steps, opt.kernel_first_steps, opt.kernel_every});
    cuda = opt.cuda && detail::cuda_recordable();
    if (cuda) {
      detail::cuda_start(snap, opt.script.get());
      snap.metadata["device.0.type"] = "cuda";
    } else {
      snap.metadata["device.0.type"] = "cpu";
      snap.metadata["device.0.name"] = "cpu (libtorch CPU allocator)";
      if (opt.cpu) detail::cpu_install();
    }
    cupti = cuda && (opt.kernels || opt.device_memory);
    if (cupti) start_cupti();
    if (cuda && opt.device_memory) start_nvml();
  } catch (...) {
    detail::scopes_end();
    detail::EventBuffer::get().disable();
    writer.reset();
    g_running = false;
    throw;
  }
  running = true;
  drain_thread = std::thread([this] { drain_loop(); });
}

// CUPTI is shared with the program's profiler (cupti.cpp): held by it now (cupti_busy), it is taken when lent back.
void Recorder::Impl::start_cupti() {
  kernel_names.clear();  // CUPTI's name list starts over
  try {
    detail::cupti_start(opt.kernels, opt.device_memory, opt.kernel_first_steps, opt.kernel_every, opt.cupti_busy,
                        opt.cupti_kineto);
    if (opt.device_memory) snap.metadata["recorder.device_memory"] = "on";
    if (opt.device_memory) snap.metadata["recorder.device_memory_calls"] = detail::cupti_start_calls(opt.stacks);
  } catch (const Error& e) {
    cupti = false;
    snap.metadata["recorder.kernels"] = std::string("off: ") + e.what();
    if (opt.device_memory) snap.metadata["recorder.device_memory"] = std::string("off: ") + e.what();
    if (!opt.quiet)
      fmt::print(stderr, "memrec: recording without kernels and device memory activity: {}\n", e.what());
  }
}

// Which steps have kernels: "all", or the rule, and how many of the steps begun were traced.
void Recorder::Impl::note_kernel_steps() {
  if (!opt.kernels) return;
  detail::KernelStepCount n = detail::cupti_kernel_steps();
  snap.metadata["recorder.kernel_steps"] =
      opt.kernel_every <= 1 ? std::string("all")
                            : fmt::format("first {}, then every {}", opt.kernel_first_steps, ordinal(opt.kernel_every));
  snap.metadata["recorder.kernel_steps_traced"] = fmt::format("{} of {}", n.traced, n.begun);
}

// The hooks' own time on the program's threads (hook_time.h), each kind's estimate for all its calls, and how many
// calls that is: what `memrec info` reports as the recording's cost.
void Recorder::Impl::note_hook_times() {
  static constexpr const char* kNames[detail::kHookKinds] = {"events", "ops", "scopes"};
  for (int i = 0; i < detail::kHookKinds; ++i) {
    uint64_t timed = detail::g_hook_times.timed[i].load(std::memory_order_relaxed);
    int64_t time = stamps.duration_ns(detail::g_hook_times.stamps[i].load(std::memory_order_relaxed));
    snap.metadata[fmt::format("recorder.hook_ns.{}", kNames[i])] = std::to_string(time * detail::kTimedEvery);
    snap.metadata[fmt::format("recorder.hook_calls.{}", kNames[i])] = std::to_string(timed * detail::kTimedEvery);
  }
}

// Without NVML (no driver library, a container without it) the recording says why, and stats repeats it.
void Recorder::Impl::start_nvml() {
  snap.metadata["recorder.nvml"] = nvml.open(detail::cuda_pci_bus_ids());
  nvml.sample(snap);
}

void Recorder::Impl::stop() {
  if (!running) return;
  running = false;
  if (cuda) detail::cuda_stop(snap);  // synchronizes, stops the hook, takes the end state
  if (opt.cpu && !cuda) detail::cpu_uninstall();
  if (cupti) note_kernel_steps();
  if (cupti) detail::cupti_stop();
  if (std::string gaps = cupti ? detail::cupti_gaps_json() : ""; !gaps.empty())
    snap.metadata["recorder.cupti_gaps"] = gaps;
  detail::scopes_end();
  detail::EventBuffer::get().disable();
  waker.stop();
  drain_thread.join();
  std::lock_guard lock(mu);
  drain_once();  // what arrived since the last pass
  nvml.sample(snap);
  if (opt.device_memory && cuda) {
    snap.metadata["recorder.nvml_failed_samples"] = std::to_string(nvml.failures());
    snap.metadata["recorder.cupti_dropped"] = std::to_string(cupti ? detail::cupti_dropped() : 0);
    snap.metadata["recorder.device_memory_stacks_dropped"] = std::to_string(cupti ? detail::cupti_stacks_dropped() : 0);
  }
  nvml.close();
  RecorderStats d = drop_stats();
  snap.dropped_events = d.dropped;
  snap.metadata["recorder.dropped.buffer_full"] = std::to_string(d.dropped_buffer_full);
  snap.metadata["recorder.dropped.over_max_events"] = std::to_string(d.dropped_over_cap);
  snap.metadata["recorder.dropped.cpu_unwrapped"] = std::to_string(d.cpu_unwrapped);
  if (!cuda) snap.metadata["recorder.cpu_unmatched_frees"] = std::to_string(d.cpu_unmatched_frees);
  snap.metadata["recorder.scopes_dropped"] = std::to_string(d.scopes_dropped);
  if (d.owners_dropped) snap.metadata["recorder.owners_dropped"] = std::to_string(d.owners_dropped);
  snap.metadata["recorder.kernels_dropped"] = std::to_string(d.kernels_dropped);
  if (capped_at_ns >= 0) snap.metadata["recorder.capped_at_ns"] = std::to_string(capped_at_ns);
  snap.metadata["recorder.unique_pcs"] = std::to_string(symbolizer.unique_pcs());
  note_hook_times();
  if (opt.ops && opt.ops_on_chosen_steps) {
    detail::OpStepCount n = detail::op_steps();
    snap.metadata["recorder.op_steps"] = fmt::format("first {}, then every {}", opt.kernel_first_steps,
                                                     ordinal(opt.kernel_every));
    snap.metadata["recorder.op_steps_traced"] = fmt::format("{} of {}", n.traced, n.begun);
  }
  g_running = false;
  if (drain_error) std::rethrow_exception(std::exchange(drain_error, nullptr));  // the cause, not its echo in close()
  if (writer) writer->close(snap);
}

// Drains every flush_ms (or when woken), and samples NVML every kSamplePeriod in between when it samples.
void Recorder::Impl::drain_loop() {
  if (opt.stacks) symbolizer.warm_up();  // in the background now rather than at the first drain or at stop()
  using clock = std::chrono::steady_clock;
  auto flush = std::chrono::milliseconds(opt.flush_ms);
  auto period = nvml.sampling() ? std::min(flush, kSamplePeriod) : flush;
  auto next_drain = clock::now() + flush;
  bool requested = false;
  while (waker.wait(period, &requested)) {
    std::lock_guard lock(mu);
    nvml.sample(snap);
    if (!requested && clock::now() < next_drain) continue;
    next_drain = clock::now() + flush;
    try {
      drain_once();
    } catch (...) {  // e.g. the disk filled up: reported by stop()
      if (!drain_error) drain_error = std::current_exception();
    }
  }
}

void Recorder::Impl::drain_once() {
  bool capped = detail::EventBuffer::get().take(spare);
  stamps.read_pair();  // after every stamp taken: they are converted between pairs, not past the last
  apply(spare);
  // Again at each pass once capped: an event counted under the cap may be written just after the take that saw
  // the cap, and the scopes opened before it are kept.
  if (capped) capped_at_ns = last_event_ns;
  if (cupti) add_cupti();
  rows_held_peak = std::max(rows_held_peak, rows_held());
  if (writer && !drain_error) writer->flush_and_release(snap);
}

uint64_t Recorder::Impl::rows_held() const {
  return snap.scopes.size() + snap.events.size() + snap.kernels.size() + snap.device_memory.size() +
         snap.memory_samples.size() + snap.owners.size() + (writer ? writer->scopes_held() : 0);
}

void Recorder::Impl::apply(const detail::Batch& b) {
  for (const detail::Record& r : b.records) {
    switch (r.kind) {
      case detail::RecordKind::scope_open: {
        std::string_view name(reinterpret_cast<const char*>(b.payload.data() + r.payload), r.payload_len);
        // Ids are handed out in buffer order, so each new scope lands at its own index.
        snap.scopes.push_back(Scope{stamps.to_ns(r.time), -1, snap.strings.intern(name), r.parent, r.scope_kind, 0});
        break;
      }
      case detail::RecordKind::scope_close: end_scope(r.scope, stamps.to_ns(r.time)); break;
      case detail::RecordKind::event: add_event(r, b); break;
      case detail::RecordKind::owner: add_owner(r, b); break;
    }
  }
}

// A scope the writer let go of ends there; the others in the snapshot.
void Recorder::Impl::end_scope(uint32_t id, int64_t end_ns) {
  uint64_t first = released().scopes;
  if (id < first) return writer->end_scope(id, end_ns);
  if (id - first < snap.scopes.size()) snap.scopes.update(id - first, [&](Scope& sc) { sc.end_ns = end_ns; });
}

// An owner row goes after the events buffered before it. On the CPU, a block allocated before the recording
// began becomes known here, so that its free is an event (with its size) rather than an unmatched free.
void Recorder::Impl::add_owner(const detail::Record& r, const detail::Batch& b) {
  std::string_view bytes(reinterpret_cast<const char*>(b.payload.data() + r.payload), r.payload_len);
  uint32_t module = snap.strings.intern(bytes.substr(0, r.parent));
  uint32_t name = snap.strings.intern(bytes.substr(r.parent));
  uint64_t events = released().events + snap.events.size();
  snap.owners.push_back(Owner{stamps.to_ns(r.time), events, r.addr, r.size, name, module, r.owner_kind, r.device});
  if (!cuda) cpu_live.try_emplace(r.addr, r.size);
}

void Recorder::Impl::add_event(const detail::Record& r, const detail::Batch& b) {
  Event e;
  e.addr = r.addr;
  e.size = r.size;
  e.action = r.action;
  e.device = r.device;
  e.scope = r.scope;
  e.time_ns = stamps.to_ns(r.time);
  if (!r.cuda) {  // CPU wrapper: frees come without size, and frees of blocks allocated before start are not ours
    if (r.action == Action::alloc) {
      cpu_live[r.addr] = r.size;
    } else if (r.action == Action::free_requested || r.action == Action::free_completed) {
      auto it = cpu_live.find(r.addr);
      if (it == cpu_live.end()) {
        ++cpu_unmatched_frees;
        return;
      }
      e.size = it->second;
      if (r.action == Action::free_completed) cpu_live.erase(it);
    }
  }
  e.stream = snap.intern_stream(r.stream);
  if (r.payload_len > 0) e.stack = symbolizer.stack_of({b.payload.data() + r.payload, r.payload_len}, snap);
  snap.events.push_back(e);
  last_event_ns = std::max(last_event_ns, e.time_ns);
}

// Device memory records are kept past max_events: they are few, and the accounting needs every one.
void Recorder::Impl::add_cupti() {
  kernel_records.clear();
  memory_records.clear();
  new_kernel_names.clear();
  detail::cupti_take(kernel_records, memory_records, new_kernel_names);
  for (const std::string& name : new_kernel_names) kernel_names.push_back(snap.strings.intern(name));
  for (const detail::MemoryActivity& m : memory_records) {
    DeviceMemoryRecord r = m.record;
    r.source = kernel_names.at(m.source);
    if (!m.pcs.empty()) r.stack = symbolizer.stack_of(m.pcs, snap);
    snap.device_memory.push_back(r);
  }
  for (const detail::KernelRecord& k : kernel_records) {
    if (capped_at_ns >= 0 && k.kernel.start_ns > capped_at_ns) {
      ++kernels_over_cap;
      continue;
    }
    Kernel kernel = k.kernel;
    kernel.name = kernel_names.at(k.name);
    kernel.stream = snap.intern_stream(k.stream);
    snap.kernels.push_back(kernel);
  }
}

RecorderStats Recorder::Impl::drop_stats() const {
  RecorderStats st;
  auto counters = detail::cpu_counters();
  st.cpu_allocs = counters.allocs;
  st.cpu_zero_allocs = counters.zero_allocs;
  st.cpu_unwrapped = cuda ? 0 : counters.unwrapped;
  st.cpu_unmatched_frees = cpu_unmatched_frees;
  detail::Drops d = detail::EventBuffer::get().drops();
  st.dropped_buffer_full = d.buffer_full;
  st.dropped_over_cap = d.over_cap;
  std::copy(std::begin(d.by_action), std::end(d.by_action), st.dropped_by_action);
  st.dropped = d.events() + st.cpu_unwrapped;
  st.scopes_dropped = d.scopes;
  st.owners_dropped = d.owners;
  st.kernels_dropped = (cupti ? detail::cupti_dropped() : 0) + kernels_over_cap;
  return st;
}

Recorder::Recorder(RecorderOptions options) : impl_(std::make_unique<Impl>()) { impl_->opt = std::move(options); }

Recorder::~Recorder() {
  try {
    stop();
  } catch (const std::exception& e) {
    fmt::print(stderr, "memrec: recording failed while stopping: {}\n", e.what());
  }
}

void Recorder::start() {
  if (impl_->running) throw Error("this recorder is already running");
  impl_->start();
}

void Recorder::stop() { impl_->stop(); }
bool Recorder::running() const { return impl_->running; }
bool Recorder::cuda_active() const { return impl_->cuda; }

void Recorder::lend_cupti(const std::string& why) {
  if (impl_->running && impl_->cupti) detail::cupti_lend(why);
}

void Recorder::take_back_cupti() {
  if (impl_->running && impl_->cupti) detail::cupti_take_back();
}

void Recorder::set_metadata(const std::string& key, const std::string& value) {
  std::lock_guard lock(impl_->mu);
  impl_->snap.metadata[key] = value;
}

const Snapshot& Recorder::snapshot() const {
  Impl& d = *impl_;
  if (d.opt.output.empty()) return d.snap;
  if (d.running)
    throw Error(fmt::format("{} is still being recorded: a recording to a file is read back from it after stop()",
                            d.opt.output));
  if (!d.read_back) d.read_back = read_file(d.opt.output);
  return *d.read_back;
}

RecorderStats Recorder::stats() const {
  std::lock_guard lock(impl_->mu);
  RecorderStats st = impl_->drop_stats();
  RowStart first = impl_->released();
  st.events = first.events + impl_->snap.events.size();
  st.kernels = first.kernels + impl_->snap.kernels.size();
  st.owners = first.owners + impl_->snap.owners.size();
  st.rows_held = impl_->rows_held();
  st.rows_held_peak = std::max(impl_->rows_held_peak, st.rows_held);
  st.unique_frames = impl_->snap.frames.size();
  st.symbolize_ms = impl_->symbolizer.seconds() * 1e3;
  st.bytes_written = impl_->writer ? impl_->writer->bytes_written() : 0;
  return st;
}

bool record_owner(uint8_t device, uint64_t addr, uint64_t size, std::string_view name, std::string_view module,
                  OwnerKind kind) {
  if (!g_running.load(std::memory_order_acquire)) return false;  // and with it choose_stamps()'s choice
  detail::Record r;
  r.time = detail::stamp();
  r.addr = addr;
  r.size = size;
  r.device = device;
  r.owner_kind = kind;
  return detail::EventBuffer::get().push_owner(r, module, name);
}

void forget_recording_after_fork() {
  detail::EventBuffer::get().forget();
  detail::cpu_forget();
  detail::cuda_forget();
  detail::scopes_forget();
}

}  // namespace memrec
