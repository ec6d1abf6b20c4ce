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

#include <fmt/format.h>

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
  std::vector<CUpti_ActivityKind> enabled;
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
  bool on = false;       // the kernel kinds are enabled now
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

template <class R>
void add(const R& r, KernelKind kind, uint64_t bytes, uint32_t name) {
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

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
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

}  // namespace

void cupti_start(bool kernels, bool memory, uint32_t kernel_first_steps, uint32_t kernel_every) {
  static std::once_flag registered;
  std::call_once(registered,
                 [] { check(cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed), "register"); });
  {
    std::lock_guard lock(g_mu);
    state().done.clear();
    state().memory.clear();
    state().name_ids.clear();
    state().new_names.clear();
    state().kernel_ids.clear();
    g_dropped = 0;
  }
  state().enabled.clear();
  // CUPTI's kernel timestamps go to buffers it allocates, on the device by default: in pinned host memory they cost
  // the program no device memory (same step time, measured on GPT-2 on the H100 host).
  uint8_t pinned = 1;
  size_t pinned_size = sizeof(pinned);
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &pinned_size, &pinned);
  if (kernels) state().enabled.assign(std::begin(kKernelKinds), std::end(kKernelKinds));
  if (memory) state().enabled.push_back(CUPTI_ACTIVITY_KIND_MEMORY2);
  try {
    for (auto kind : state().enabled) check(cuptiActivityEnable(kind), "enable");
  } catch (...) {  // leave nothing half-enabled
    for (auto kind : state().enabled) cuptiActivityDisable(kind);
    state().enabled.clear();
    throw;
  }
  KernelSteps& k = kernel_steps();
  std::lock_guard lock(k.mu);
  k.tracing = k.on = kernels;
  k.first = kernel_first_steps, k.every = kernel_every;
  k.count = {};
}

std::string cupti_start_calls(bool stacks) {
  {
    std::lock_guard lock(g_call_mu);
    state().pending.clear();
    state().vmm.clear();
    state().handle_device.clear();
    g_stacks_dropped = 0;
  }
  if (CUptiResult r = cuptiSubscribe(&g_subscriber, &on_call, nullptr); r != CUPTI_SUCCESS) {
    g_subscriber = nullptr;
    const char* msg = nullptr;
    cuptiGetResultString(r, &msg);
    return fmt::format("off: CUPTI subscribe failed: {}", msg ? msg : "unknown error");
  }
  g_call_stacks = stacks;
  for (CUpti_CallbackId id : kVirtualMemoryCalls) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  if (stacks) {
    for (CUpti_CallbackId id : kRuntimeAllocations)
      cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
    for (CUpti_CallbackId id : kDriverAllocations) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  }
  return stacks ? "on, with stacks" : "on";
}

uint64_t cupti_stacks_dropped() {
  std::lock_guard lock(g_call_mu);
  return g_stacks_dropped;
}

void cupti_step_begins() {
  KernelSteps& k = kernel_steps();
  std::lock_guard lock(k.mu);
  if (!k.tracing) return;
  uint32_t n = ++k.count.begun;
  bool want = n <= k.first || k.every <= 1 || n % k.every == 0;
  k.count.traced += want;
  if (want == k.on) return;
  for (auto kind : kKernelKinds) want ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind);
  k.on = want;
}

KernelStepCount cupti_kernel_steps() {
  std::lock_guard lock(kernel_steps().mu);
  return kernel_steps().count;
}

void cupti_stop() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto kind : state().enabled) cuptiActivityDisable(kind);
  state().enabled.clear();
  {
    std::lock_guard lock(kernel_steps().mu);
    kernel_steps().tracing = kernel_steps().on = false;
  }
  stop_calls();
  g_call_stacks = false;
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
