// CUPTI activity records: kernels, memcpy and memset for the kernel timeline, and the memory activity (every
// allocation and release the CUDA driver makes: cudaMalloc, cuMemAlloc, cuMemCreate, cudaHostAlloc, ... of NCCL,
// cuBLAS, extensions and the caching allocator itself). CUPTI's timestamps are CLOCK_REALTIME nanoseconds, the clock
// of every other time in the snapshot.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "internal.h"

namespace memrec::detail {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr CUpti_ActivityKind kKernelKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};

std::mutex g_mu;  // CUPTI completes buffers on its own thread
uint64_t g_dropped = 0;

// CUPTI's callback API on the calls that allocate device memory, on the calling thread:
// - with stacks on, the stack of each allocating call, waiting for its memory record (matched by correlation id when
//   CUPTI hands the record over). Calls outside the caching allocator are few, so a stack each is cheap.
// - the virtual memory API (cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap: NCCL's buffers, expandable segments),
//   recorded from the calls themselves, since CUPTI's memory activity need not report it.
constexpr size_t kMaxPendingStacks = 4096;
constexpr int kMaxStackFrames = 48;
struct PendingStack {
  uint32_t correlation;
  int count;
  uint64_t pcs[kMaxStackFrames];
};
std::mutex g_call_mu;
uint64_t g_stacks_dropped = 0;
bool g_call_stacks = false;
CUpti_SubscriberHandle g_subscriber = nullptr;

// What the callbacks fill. Made on first use and never destroyed: CUPTI calls back, and the recorder flushes it, while
// the process exits, after the static objects of this library may have been destroyed.
struct State {
  std::vector<KernelRecord> done;
  std::vector<MemoryActivity> memory;
  std::unordered_map<std::string, uint32_t> name_ids;
  std::vector<std::string> new_names;
  // A kernel's mangled name, as CUPTI points to it, to its id: demangled once per kernel, not once per launch. The
  // pointer is the driver's and may be reused after a module unloads, so the mangled text is compared too.
  std::unordered_map<const char*, std::pair<std::string, uint32_t>> kernel_ids;
  std::deque<PendingStack> pending;
  std::vector<MemoryActivity> vmm;                       // records of virtual memory calls, not yet taken
  std::unordered_map<uint64_t, uint8_t> handle_device;  // live cuMemCreate handles -> device
};

State& state() {
  static State* s = new State;
  return *s;
}

// Kernel tracing by step. Toggling the kernel kinds costs about 30 us (H100 host), a traced step about +0.2%.
struct KernelSteps {
  std::mutex mu;
  bool tracing = false;  // this recording traces kernels
  bool want = false;     // the step rule wants the kernel kinds now
  bool on = false;       // the kernel kinds are enabled now (never while CUPTI is lent)
  bool lent = false;     // the program's profiler holds CUPTI, or another user does for the whole recording
  uint32_t first = 0, every = 1;
  KernelStepCount count;
};

KernelSteps& kernel_steps() {
  static KernelSteps* k = new KernelSteps;
  return *k;
}

constexpr CUpti_CallbackId kRuntimeAllocations[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,       CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020,     CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,   CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020};
constexpr CUpti_CallbackId kDriverAllocations[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,      CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,  CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,     CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz};
constexpr CUpti_CallbackId kVirtualMemoryCalls[] = {CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
                                                    CUPTI_DRIVER_TRACE_CBID_cuMemMap, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap};

void keep_stack(uint32_t correlation) {
  PendingStack p;
  p.correlation = correlation;
  p.count = detail::capture_stack(hook_config().capture, p.pcs, kMaxStackFrames);
  std::lock_guard lock(g_call_mu);
  if (state().pending.size() == kMaxPendingStacks) {
    state().pending.pop_front();
    ++g_stacks_dropped;
  }
  state().pending.push_back(p);
}

// One record of a virtual memory call that succeeded; `addr` is the handle for create and release.
void record_vmm(CUpti_CallbackId id, const CUpti_CallbackData& call) {
  MemoryActivity a;
  DeviceMemoryRecord& r = a.record;
  r.time_ns = now_ns();
  r.correlation = call.correlationId;
  r.kind = MemoryKind::device;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuMemCreate && g_call_stacks) {
    uint64_t pcs[kMaxStackFrames];
    a.pcs.assign(pcs, pcs + detail::capture_stack(hook_config().capture, pcs, kMaxStackFrames));
  }
  std::lock_guard lock(g_call_mu);
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* p = static_cast<const cuMemCreate_params*>(call.functionParams);
      r.op = MemoryOp::vmm_create;
      r.addr = *p->handle;
      r.bytes = p->size;
      bool on_device = p->prop && p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
      r.kind = on_device ? MemoryKind::device : MemoryKind::pinned;
      r.device = on_device ? static_cast<uint8_t>(p->prop->location.id) : 0;
      state().handle_device[r.addr] = r.device;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      r.op = MemoryOp::vmm_release;
      r.addr = static_cast<const cuMemRelease_params*>(call.functionParams)->handle;
      auto it = state().handle_device.find(r.addr);
      if (it != state().handle_device.end()) r.device = it->second, state().handle_device.erase(it);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      auto* p = static_cast<const cuMemMap_params*>(call.functionParams);
      r.op = MemoryOp::vmm_map;
      r.addr = p->ptr;
      r.bytes = p->size;
      r.handle = p->handle;
      auto it = state().handle_device.find(r.handle);
      if (it != state().handle_device.end()) r.device = it->second;
      break;
    }
    default: {  // cuMemUnmap
      auto* p = static_cast<const cuMemUnmap_params*>(call.functionParams);
      r.op = MemoryOp::vmm_unmap;
      r.addr = p->ptr;
      r.bytes = p->size;
    }
  }
  state().vmm.push_back(std::move(a));
}

bool is_virtual_memory_call(CUpti_CallbackDomain domain, CUpti_CallbackId id) {
  return domain == CUPTI_CB_DOMAIN_DRIVER_API &&
         std::find(std::begin(kVirtualMemoryCalls), std::end(kVirtualMemoryCalls), id) != std::end(kVirtualMemoryCalls);
}

void CUPTIAPI on_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const auto& call = *static_cast<const CUpti_CallbackData*>(data);
  if (!is_virtual_memory_call(domain, id)) {
    if (call.callbackSite == CUPTI_API_ENTER && g_call_stacks) keep_stack(call.correlationId);
    return;
  }
  if (call.callbackSite != CUPTI_API_EXIT) return;
  if (call.functionReturnValue && *static_cast<const CUresult*>(call.functionReturnValue) != CUDA_SUCCESS) return;
  record_vmm(id, call);
}

// The stack of the call with this correlation id (the runtime's or the driver's: both are kept), taken out.
std::vector<uint64_t> take_stack(uint32_t correlation) {
  std::lock_guard lock(g_call_mu);
  auto it = std::find_if(state().pending.begin(), state().pending.end(),
                         [&](const PendingStack& p) { return p.correlation == correlation; });
  if (it == state().pending.end()) return {};
  std::vector<uint64_t> pcs(it->pcs, it->pcs + it->count);
  state().pending.erase(it);
  return pcs;
}

void stop_calls() {
  if (!g_subscriber) return;
  cuptiUnsubscribe(g_subscriber);
  g_subscriber = nullptr;
  std::lock_guard lock(g_call_mu);
  state().pending.clear();
  state().handle_device.clear();
}

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  throw Error(fmt::format("CUPTI {} failed: {}", what, msg ? msg : "unknown error"));
}

uint32_t name_id(const std::string& name) {
  auto [it, added] = state().name_ids.emplace(name, static_cast<uint32_t>(state().name_ids.size()));
  if (added) state().new_names.push_back(name);
  return it->second;
}

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && out ? out : name;
  std::free(out);
  return s;
}

uint32_t kernel_id(const char* mangled) {
  if (!mangled) return name_id("");
  auto& [text, id] = state().kernel_ids[mangled];
  if (text.empty() || text != mangled) {
    text = mangled;
    id = name_id(demangle(mangled));
  }
  return id;
}

const char* copy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

// A forced flush (memrec's, as it lends CUPTI or stops) hands back the records of kernels, copies and memsets still
// running with start and end 0: CUPTI did not time them. They are dropped, not kept at the epoch.
template <class R>
void add(const R& r, KernelKind kind, uint64_t bytes, uint32_t name) {
  if (r.start == 0 || r.end < r.start) {
    ++g_dropped;
    return;
  }
  KernelRecord k;
  k.kernel.start_ns = static_cast<int64_t>(r.start);
  k.kernel.end_ns = static_cast<int64_t>(r.end);
  k.kernel.correlation = r.correlationId;
  k.kernel.bytes = bytes;
  k.kernel.kind = kind;
  k.kernel.device = static_cast<uint8_t>(r.deviceId);
  k.stream = r.streamId;
  k.name = name;
  state().done.push_back(k);
}

void add_memory(const CUpti_ActivityMemory4& m) {
  if (m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
      m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
    return;
  MemoryActivity a;
  DeviceMemoryRecord& r = a.record;
  r.time_ns = static_cast<int64_t>(m.timestamp);
  r.addr = m.address;
  r.bytes = m.bytes;
  r.pc = m.PC;
  r.correlation = m.correlationId;
  r.kind = m.memoryKind <= CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC ? static_cast<MemoryKind>(m.memoryKind)
                                                                     : MemoryKind::unknown;
  bool release = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  r.op = release ? MemoryOp::release : MemoryOp::allocation;
  r.async = m.isAsync != 0;
  r.device = static_cast<uint8_t>(m.deviceId);
  a.source = name_id(m.source ? m.source : "");
  if (g_call_stacks && !release) a.pcs = take_stack(m.correlationId);
  state().memory.push_back(std::move(a));
}

// The buffers memrec handed CUPTI: a buffer completed while memrec's callbacks are registered may be the profiler's
// (it registers its own while it profiles), which is the profiler's to read and free.
std::mutex g_buffers_mu;
std::unordered_set<uint8_t*> g_buffers;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
  if (!*buffer) return;
  std::lock_guard lock(g_buffers_mu);
  g_buffers.insert(*buffer);
}

bool take_buffer(uint8_t* buffer) {
  std::lock_guard lock(g_buffers_mu);
  return g_buffers.erase(buffer) > 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  if (!take_buffer(buffer)) return;
  std::lock_guard lock(g_mu);
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        add(*k, KernelKind::kernel, 0, kernel_id(k->name));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        add(*m, KernelKind::memcpy, m->bytes, name_id(copy_kind(m->copyKind)));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        add(*m, KernelKind::memset, m->bytes, name_id("memset"));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMORY2: add_memory(*reinterpret_cast<const CUpti_ActivityMemory4*>(rec)); break;
      default: break;
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::free(buffer);
}

// Called with the kernel steps' lock held.
void set_kernel_kinds(KernelSteps& k, bool on) {
  if (on == k.on) return;
  for (auto kind : kKernelKinds) on ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind);
  k.on = on;
}

// How this recording shares CUPTI (see cupti_start), and the windows it did not trace: kernels (with memcpy and
// memset), device memory (the memory activity) and device memory calls (the callback API: virtual memory calls and
// the stacks of allocating calls). A window still open has to_ns -1.
struct Gap {
  int64_t from_ns = 0, to_ns = -1;
  std::string what, why;
};
struct Sharing {
  std::mutex mu;
  bool active = false;   // this recording uses CUPTI
  bool foreign = false;  // another user held the subscription at start: CUPTI is left alone throughout
  bool lent = true;      // memrec's activity kinds are off and its buffers handed back (taken by take_activity)
  bool kernels = false, memory = false, stacks = false;
  std::vector<Gap> gaps;
};

Sharing& sharing() {
  static Sharing* s = new Sharing;
  return *s;
}

constexpr const char* kKernelsGap = "kernels";
constexpr const char* kMemoryGap = "device memory";
constexpr const char* kCallsGap = "device memory calls";

void open_gap(Sharing& s, const char* what, const std::string& why) {
  for (const Gap& g : s.gaps)
    if (g.to_ns < 0 && g.what == what) return;
  s.gaps.push_back(Gap{now_ns(), -1, what, why});
}

void close_gap(Sharing& s, const char* what) {
  for (Gap& g : s.gaps)
    if (g.to_ns < 0 && g.what == what) g.to_ns = now_ns();
}

// The activity kinds this recording traces, lent or not.
void open_activity_gaps(Sharing& s, const std::string& why) {
  if (s.kernels) open_gap(s, kKernelsGap, why);
  if (s.memory) open_gap(s, kMemoryGap, why);
}

bool subscribe() {
  if (g_subscriber) return true;
  if (cuptiSubscribe(&g_subscriber, &on_call, nullptr) == CUPTI_SUCCESS) return true;
  g_subscriber = nullptr;
  return false;
}

void enable_calls(bool stacks) {
  g_call_stacks = stacks;
  for (CUpti_CallbackId id : kVirtualMemoryCalls) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  if (!stacks) return;
  for (CUpti_CallbackId id : kRuntimeAllocations) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (CUpti_CallbackId id : kDriverAllocations) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
}

// memrec's activity buffers and kinds, registered again each time: the profiler registers its own buffers while it
// profiles. CUPTI's records go to buffers it allocates, on the device by default: in pinned host memory they cost
// the program no device memory (same step time, measured on GPT-2 on the H100 host).
void take_activity(Sharing& s) {
  check(cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed), "register");
  uint8_t pinned = 1;
  size_t pinned_size = sizeof(pinned);
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &pinned_size, &pinned);
  if (s.memory) check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2), "enable");
  s.lent = false;
  KernelSteps& k = kernel_steps();
  std::lock_guard lock(k.mu);
  k.lent = false;
  if (k.tracing) set_kernel_kinds(k, k.want);
}

// Disabled first, so that nothing arrives after the forced flush hands every buffer of memrec's back: a buffer of
// ours completed after the profiler registered its callbacks would reach the profiler, which does not know it.
void give_activity(Sharing& s) {
  {
    KernelSteps& k = kernel_steps();
    std::lock_guard lock(k.mu);
    set_kernel_kinds(k, false);
    k.lent = true;
  }
  if (s.memory) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  s.lent = true;
}

}  // namespace

void cupti_start(bool kernels, bool memory, uint32_t kernel_first_steps, uint32_t kernel_every,
                 const std::string& lent_to, bool kineto) {
  {
    std::lock_guard lock(g_mu);
    state().done.clear();
    state().memory.clear();
    state().name_ids.clear();
    state().new_names.clear();
    state().kernel_ids.clear();
    g_dropped = 0;
  }
  {
    KernelSteps& k = kernel_steps();
    std::lock_guard lock(k.mu);
    k.tracing = k.want = kernels;
    k.on = false;
    k.lent = true;
    k.first = kernel_first_steps, k.every = kernel_every;
    k.count = {};
  }
  Sharing& s = sharing();
  std::lock_guard lock(s.mu);
  s.kernels = kernels, s.memory = memory, s.stacks = false;
  s.active = true, s.foreign = false, s.lent = true;
  s.gaps.clear();
  if (!lent_to.empty()) return open_activity_gaps(s, lent_to);
  // One subscriber per process: a held subscription is torch.profiler's Kineto (it keeps it from its first use on),
  // or a user memrec cannot see start and stop (Nsight Systems), whose activity buffers memrec must not take.
  bool subscribed = subscribe();
  if (!subscribed && !kineto) {
    s.foreign = true;
    return open_activity_gaps(s, "another CUPTI user held CUPTI (Nsight Systems, or a profiler started before memrec)");
  }
  if (subscribed && !memory) stop_calls();  // only asked whether CUPTI was free
  try {
    take_activity(s);
  } catch (...) {  // leave nothing half-enabled, and the subscription free for the program's profiler
    give_activity(s);
    stop_calls();
    s.active = false;
    throw;
  }
}

std::string cupti_start_calls(bool stacks) {
  {
    std::lock_guard lock(g_call_mu);
    state().pending.clear();
    state().vmm.clear();
    state().handle_device.clear();
    g_stacks_dropped = 0;
  }
  Sharing& s = sharing();
  std::lock_guard lock(s.mu);
  s.stacks = stacks;
  if (!g_subscriber) {
    open_gap(s, kCallsGap, !s.gaps.empty() ? s.gaps.front().why  // lent from the start, or another user's
                                           : "the program's profiler holds CUPTI's callbacks from its first use on");
    return "off: another CUPTI user holds CUPTI's one callback subscription";
  }
  enable_calls(stacks);
  return stacks ? "on, with stacks" : "on";
}

uint64_t cupti_stacks_dropped() {
  std::lock_guard lock(g_call_mu);
  return g_stacks_dropped;
}

void cupti_lend(const std::string& why) {
  Sharing& s = sharing();
  std::lock_guard lock(s.mu);
  if (!s.active || s.foreign || s.lent) return;
  give_activity(s);
  open_activity_gaps(s, why);
  if (s.memory && g_subscriber) {
    stop_calls();
    g_call_stacks = false;
    open_gap(s, kCallsGap, why);
  }
}

void cupti_take_back() {
  Sharing& s = sharing();
  std::lock_guard lock(s.mu);
  if (!s.active || s.foreign || !s.lent) return;
  try {
    take_activity(s);
  } catch (const Error&) {  // the windows stay open: the file says so
    return;
  }
  close_gap(s, kKernelsGap);
  close_gap(s, kMemoryGap);
  if (s.memory && subscribe()) {  // free again only where the profiler never set up Kineto's callbacks
    enable_calls(s.stacks);
    close_gap(s, kCallsGap);
  }
}

void cupti_step_begins() {
  KernelSteps& k = kernel_steps();
  std::lock_guard lock(k.mu);
  if (!k.tracing) return;
  uint32_t n = ++k.count.begun;
  k.want = n <= k.first || k.every <= 1 || n % k.every == 0;
  k.count.traced += k.want && !k.lent;
  if (!k.lent) set_kernel_kinds(k, k.want);
}

KernelStepCount cupti_kernel_steps() {
  std::lock_guard lock(kernel_steps().mu);
  return kernel_steps().count;
}

void cupti_stop() {
  Sharing& s = sharing();
  std::lock_guard lock(s.mu);
  if (s.active && !s.lent) give_activity(s);  // a lent CUPTI is the profiler's: neither flushed nor disabled
  {
    std::lock_guard steps(kernel_steps().mu);
    kernel_steps().tracing = false;
  }
  stop_calls();
  g_call_stacks = false;
  s.active = false;
}

std::string cupti_gaps_json() {
  Sharing& s = sharing();
  std::lock_guard lock(s.mu);
  if (s.gaps.empty()) return "";
  nlohmann::json out = nlohmann::json::array();
  for (const Gap& g : s.gaps) {
    nlohmann::json to = g.to_ns < 0 ? nlohmann::json() : nlohmann::json(g.to_ns);
    out.push_back({{"what", g.what}, {"from_ns", g.from_ns}, {"to_ns", to}, {"why", g.why}});
  }
  return out.dump();
}

void cupti_take(std::vector<KernelRecord>& kernels, std::vector<MemoryActivity>& memory,
                std::vector<std::string>& new_names) {
  std::lock_guard lock(g_mu);
  kernels.insert(kernels.end(), state().done.begin(), state().done.end());
  state().done.clear();
  for (MemoryActivity& a : state().memory) memory.push_back(std::move(a));
  state().memory.clear();
  std::vector<MemoryActivity> vmm;
  {
    std::lock_guard calls(g_call_mu);
    vmm.swap(state().vmm);
  }
  for (MemoryActivity& a : vmm) {
    a.source = name_id("");  // the virtual memory calls have no source: their stack names the library
    memory.push_back(std::move(a));
  }
  new_names.insert(new_names.end(), state().new_names.begin(), state().new_names.end());
  state().new_names.clear();
}

uint64_t cupti_dropped() {
  std::lock_guard lock(g_mu);
  return g_dropped;
}

}  // namespace memrec::detail
