#include "memrec/recorder.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
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

StackCapture resolve_capture(StackCapture c) {
  if (c == StackCapture::automatic)
    return stack_capture_available(StackCapture::torch_unwind) ? StackCapture::torch_unwind
                                                               : StackCapture::unwind_backtrace;
  if (!stack_capture_available(c)) throw Error(fmt::format("stack capture '{}' needs libtorch >= 2.1", to_string(c)));
  return c;
}

}  // namespace

struct Recorder::Impl {
  RecorderOptions opt;
  Snapshot snap;
  std::unique_ptr<Writer> writer;
  detail::Symbolizer symbolizer;
  detail::Batch spare;
  bool running = false, cuda = false, cupti = false;

  std::thread drain_thread;
  std::mutex mu;  // guards snap, writer and `stopping` between the drain thread and the caller
  std::condition_variable wake;
  bool stopping = false;
  std::exception_ptr drain_error;

  std::unordered_map<uint64_t, uint64_t> cpu_live;  // CPU address -> requested bytes (frees arrive without size)
  std::vector<uint32_t> frame_ids;
  std::vector<detail::KernelRecord> kernel_records;
  std::vector<std::string> new_kernel_names;
  std::vector<uint32_t> kernel_names;  // CUPTI module's name ids -> snapshot string ids

  void start();
  void stop();
  void drain_loop();
  void drain_once();
  void apply(const detail::Batch& b);
  void add_event(const detail::Record& r, const detail::Batch& b);
  void add_kernels();
};

void Recorder::Impl::start() {
  if (g_running.exchange(true)) throw Error("another memrec::Recorder is already recording in this process");
  try {
    auto& cfg = detail::hook_config();
    cfg = {opt.stacks, opt.stacks && opt.free_stacks, resolve_capture(opt.capture), opt.max_frames};
    snap = Snapshot{};
    snap.metadata["recorder.stacks"] = opt.stacks ? to_string(cfg.capture) : "off";
    snap.metadata["recorder.free_stacks"] = cfg.free_stacks ? "on" : "off";
    snap.metadata["torch_version"] = TORCH_VERSION;
    snap.metadata["clock"] = "CLOCK_REALTIME ns";
    snap.metadata["pid"] = std::to_string(getpid());
    if (!opt.output.empty()) writer = std::make_unique<Writer>(opt.output);

    auto& buffer = detail::EventBuffer::get();
    buffer.set_waker(&wake);
    buffer.enable(opt.buffer_events, opt.buffer_events * kPayloadWordsPerEvent);
    detail::scopes_begin(opt.ops);
    cuda = opt.cuda && detail::cuda_recordable();
    if (cuda) {
      detail::cuda_start(snap);
      snap.metadata["device.0.type"] = "cuda";
    } else {
      snap.metadata["device.0.type"] = "cpu";
      snap.metadata["device.0.name"] = "cpu (libtorch CPU allocator)";
      if (opt.cpu) detail::cpu_install();
    }
    cupti = cuda && opt.kernels;
    if (cupti) detail::cupti_start();
  } catch (...) {
    detail::scopes_end();
    detail::EventBuffer::get().disable();
    writer.reset();
    g_running = false;
    throw;
  }
  running = true;
  stopping = false;
  drain_thread = std::thread([this] { drain_loop(); });
}

void Recorder::Impl::stop() {
  if (!running) return;
  running = false;
  if (cuda) detail::cuda_stop(snap);  // synchronizes, stops the hook, takes the end state
  if (opt.cpu && !cuda) detail::cpu_uninstall();
  if (cupti) detail::cupti_stop();
  detail::scopes_end();
  detail::EventBuffer::get().disable();
  {
    std::lock_guard lock(mu);
    stopping = true;
  }
  wake.notify_one();
  drain_thread.join();
  std::lock_guard lock(mu);
  drain_once();  // what arrived since the last pass
  auto counters = detail::cpu_counters();
  uint64_t kernels_dropped = cupti ? detail::cupti_dropped() : 0;
  snap.metadata["recorder.kernels_dropped"] = std::to_string(kernels_dropped);
  snap.dropped_events = detail::EventBuffer::get().dropped() + (cuda ? 0 : counters.unwrapped) + kernels_dropped;
  snap.metadata["recorder.unique_pcs"] = std::to_string(symbolizer.unique_pcs());
  g_running = false;
  if (writer) writer->close(snap);
  if (drain_error) std::rethrow_exception(std::exchange(drain_error, nullptr));
}

void Recorder::Impl::drain_loop() {
  if (opt.stacks) symbolizer.warm_up();  // in the background now rather than at the first drain or at stop()
  std::unique_lock lock(mu);
  while (!stopping) {
    wake.wait_for(lock, std::chrono::milliseconds(opt.flush_ms));
    if (stopping) break;
    try {
      drain_once();
    } catch (...) {  // e.g. the disk filled up: reported by stop()
      if (!drain_error) drain_error = std::current_exception();
    }
  }
}

void Recorder::Impl::drain_once() {
  if (cuda) detail::cuda_refresh_clock();
  detail::EventBuffer::get().take(spare);
  apply(spare);
  if (cupti) add_kernels();
  if (writer && !drain_error) writer->flush(snap);
}

void Recorder::Impl::apply(const detail::Batch& b) {
  for (const detail::Record& r : b.records) {
    switch (r.kind) {
      case detail::RecordKind::scope_open: {
        std::string_view name(reinterpret_cast<const char*>(b.payload.data() + r.payload), r.payload_len);
        // Ids are handed out in buffer order, so each new scope lands at its own index.
        snap.scopes.push_back(Scope{r.time, -1, snap.strings.intern(name), r.parent, r.scope_kind, 0});
        break;
      }
      case detail::RecordKind::scope_close:
        if (r.scope < snap.scopes.size()) snap.scopes[r.scope].end_ns = r.time;
        break;
      case detail::RecordKind::event: add_event(r, b); break;
    }
  }
}

void Recorder::Impl::add_event(const detail::Record& r, const detail::Batch& b) {
  Event e;
  e.addr = r.addr;
  e.size = r.size;
  e.action = r.action;
  e.device = r.device;
  e.scope = r.scope;
  if (r.ticks) {  // CUDA allocator
    e.time_ns = detail::cuda_ticks_to_ns(r.time);
  } else {        // CPU wrapper: frees come without size, and frees of blocks allocated before start are not ours
    e.time_ns = r.time;
    if (r.action == Action::alloc) {
      cpu_live[r.addr] = r.size;
    } else {
      auto it = cpu_live.find(r.addr);
      if (it == cpu_live.end()) return;
      e.size = it->second;
      if (r.action == Action::free_completed) cpu_live.erase(it);
    }
  }
  e.stream = snap.intern_stream(r.stream);
  if (r.payload_len > 0) {
    frame_ids.clear();
    symbolizer.frames_of({b.payload.data() + r.payload, r.payload_len}, snap, frame_ids);
    e.stack = frame_ids.empty() ? 0 : snap.stacks.intern(frame_ids);
  }
  snap.events.push_back(e);
}

void Recorder::Impl::add_kernels() {
  kernel_records.clear();
  new_kernel_names.clear();
  detail::cupti_take(kernel_records, new_kernel_names);
  for (const std::string& name : new_kernel_names) kernel_names.push_back(snap.strings.intern(name));
  for (const detail::KernelRecord& k : kernel_records) {
    Kernel kernel = k.kernel;
    kernel.name = kernel_names.at(k.name);
    kernel.stream = snap.intern_stream(k.stream);
    snap.kernels.push_back(kernel);
  }
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

void Recorder::set_metadata(const std::string& key, const std::string& value) {
  std::lock_guard lock(impl_->mu);
  impl_->snap.metadata[key] = value;
}

const Snapshot& Recorder::snapshot() const { return impl_->snap; }

RecorderStats Recorder::stats() const {
  std::lock_guard lock(impl_->mu);
  auto counters = detail::cpu_counters();
  RecorderStats st;
  st.events = impl_->snap.events.size();
  st.dropped = detail::EventBuffer::get().dropped() + (impl_->cuda ? 0 : counters.unwrapped);
  st.cpu_allocs = counters.allocs;
  st.cpu_zero_allocs = counters.zero_allocs;
  st.cpu_unwrapped = counters.unwrapped;
  st.kernels = impl_->snap.kernels.size();
  st.unique_frames = impl_->snap.frames.size();
  st.symbolize_ms = impl_->symbolizer.seconds() * 1e3;
  st.bytes_written = impl_->writer ? impl_->writer->bytes_written() : 0;
  return st;
}

}  // namespace memrec
