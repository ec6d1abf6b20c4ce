// The CUDA caching allocator through its own hooks (libtorch >= 2.1): every trace entry reaches on_trace() in
// the allocating thread, under the allocator's lock. No recordHistory needed: trace trackers run without it.
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "internal.h"

namespace memrec::detail {
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

std::atomic<bool> g_enabled{false};

// Interpreter frames are read in on_trace, through the recorder's own capture, where the script frames read them
// without the interpreter's lock (captures_unlocked). Elsewhere they are gathered by the allocator's context
// function (outside its lock, where taking the interpreter's lock is safe, as PyTorch's own recorder does) and
// handed to on_trace with the trace entry; at RecordContext::ALLOC a free's entry carries the block's context, which
// on_trace leaves unused as the recorder keeps no stack for frees of a Python program.
// The allocator also keeps the context with each block it hands out, and the program's own
// torch.cuda.memory._snapshot() reads every block's context as a CapturedTraceback: ours is one, with no frames of
// its own for PyTorch, so a snapshot taken under memrec shows those blocks without frames, as it would without it.
// The words are as many as the stack's frames (most stacks are 20-40): the allocator keeps the context with the block
// for the block's whole life.
constexpr int kScriptFrames = 128;
struct ScriptContext final : torch::CapturedTraceback {
  std::vector<uint64_t> words;
};
std::atomic<ScriptFrames*> g_script{nullptr};
bool g_history = false;  // recordHistory was turned on by us

std::shared_ptr<c10::GatheredContext> gather_script() {
  auto ctx = std::make_shared<ScriptContext>();
  if (ScriptFrames* script = g_script.load()) {
    thread_local uint64_t t_words[kScriptFrames];  // trivially destructible: allocations may outlive thread_locals
    ctx->words.assign(t_words, t_words + script->capture(t_words, kScriptFrames, true));
  }
  return ctx;
}

template <class A>
bool history_enabled(A* a) {
  if constexpr (requires { a->isHistoryEnabled(); }) return a->isHistoryEnabled();
  else return false;
}

// recordHistory's arguments grew over libtorch versions (clearHistory, then skip_actions).
template <class A>
void record_history(A* a, bool on) {
  using alloc::RecordContext;
  c10::cuda::CUDACachingAllocator::CreateContextFn fn = on ? &gather_script : nullptr;
  RecordContext when = on ? RecordContext::ALLOC : RecordContext::NEVER;
  size_t entries = on ? 1 : 0;  // PyTorch's own ring of entries: we read ours through the tracker
  if constexpr (requires { a->recordHistory(on, fn, entries, when, false, std::vector<std::string>{}); })
    a->recordHistory(on, fn, entries, when, false, std::vector<std::string>{});
  else if constexpr (requires { a->recordHistory(on, fn, entries, when, false); })
    a->recordHistory(on, fn, entries, when, false);
  else
    a->recordHistory(on, fn, entries, when);
}

template <class S>
uint64_t raw_stream(const S& s) {
  if constexpr (std::is_pointer_v<S>) return reinterpret_cast<uint64_t>(s);
  else return static_cast<uint64_t>(s.id());
}

Action action_of(alloc::TraceEntry::Action a) {
  using T = alloc::TraceEntry;
  switch (a) {
    case T::ALLOC: return Action::alloc;
    case T::FREE_REQUESTED: return Action::free_requested;
    case T::FREE_COMPLETED: return Action::free_completed;
    case T::SEGMENT_ALLOC: return Action::segment_alloc;
    case T::SEGMENT_FREE: return Action::segment_free;
    case T::SEGMENT_MAP: return Action::segment_map;
    case T::SEGMENT_UNMAP: return Action::segment_unmap;
    case T::SNAPSHOT: return Action::snapshot;
    case T::OOM: return Action::oom;
    default: return Action::user_defined;
  }
}

// The entry's own time stamp where it is a TSC read (c10's getApproximateTime() on x86-64) and ours are too: one
// clock read fewer an event. The drain converts it with the scopes' stamps, not with c10's converter (which gave
// every event one time in a C++ program recorded from before main()).
template <class Entry>
int64_t stamp_of(const Entry& te) {
  if constexpr (requires { te.time_.approx_t_; }) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(te.time_.approx_t_)>, uint64_t>)
      if (g_tsc_stamps.load(std::memory_order_relaxed)) return static_cast<int64_t>(te.time_.approx_t_);
  }
  return stamp();
}

void on_trace(const alloc::TraceEntry& te) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  Record r;
  r.time = stamp_of(te);
  r.cuda = true;
  r.addr = static_cast<uint64_t>(te.addr_);
  r.size = static_cast<uint64_t>(te.size_);
  r.stream = raw_stream(te.stream_);
  r.device = static_cast<uint8_t>(te.device_);
  r.action = action_of(te.action_);
  if (auto* ctx = dynamic_cast<const ScriptContext*>(te.context_.get())) {
    std::span<const uint64_t> words(ctx->words);
    record_event(r, &words);
  } else {
    record_event(r);  // someone else's context (their own _record_memory_history), or none
  }
}

void on_oom(int64_t, size_t, size_t, size_t) { EventBuffer::get().wake(); }

BlockState state_of(const alloc::BlockInfo& b) {
  if (b.allocated) return BlockState::active_allocated;
  return b.active ? BlockState::active_pending_free : BlockState::inactive;
}

std::vector<Segment> segments(Snapshot& s, const alloc::SnapshotInfo& info) {
  std::vector<Segment> out;
  for (const auto& seg : info.segments) {
    Segment o;
    o.addr = seg.address;
    o.total_size = seg.total_size;
    o.allocated_size = seg.allocated_size;
    o.active_size = seg.active_size;
    o.requested_size = seg.requested_size;
    o.pool_id[0] = static_cast<int64_t>(seg.owner_private_pool_id.first);
    o.pool_id[1] = static_cast<int64_t>(seg.owner_private_pool_id.second);
    o.stream = s.intern_stream(raw_stream(seg.stream));
    o.device = static_cast<uint8_t>(seg.device);
    o.is_large = seg.is_large;
    o.is_expandable = seg.is_expandable;
    uint64_t addr = seg.address;
    for (const auto& b : seg.blocks) {
      o.blocks.push_back(Block{addr, b.size, b.requested_size, 0, state_of(b)});
      addr += b.size;
    }
    out.push_back(std::move(o));
  }
  return out;
}

void describe_devices(Snapshot& s, const alloc::SnapshotInfo& info) {
  int n = c10::cuda::device_count();
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    auto key = [&](const char* k) { return fmt::format("device.{}.{}", i, k); };
    s.metadata[key("type")] = "cuda";
    s.metadata[key("name")] = p.name;
    s.metadata[key("total_memory")] = std::to_string(p.totalGlobalMem);
    s.metadata[key("capability")] = fmt::format("{}.{}", p.major, p.minor);
    s.metadata[key("multiprocessors")] = std::to_string(p.multiProcessorCount);
  }
  const auto& c = info.config_metadata;
  nlohmann::json j = {{"expandable_segments", c.expandable_segments},
                      {"max_split_size", c.max_split_size},
                      {"garbage_collection_threshold", c.garbage_collection_threshold},
                      {"last_allocator_settings", c.last_allocator_settings}};
  s.metadata["allocator_settings"] = j.dump();
  s.metadata["allocator"] = alloc::get()->name();
}

}  // namespace

bool cuda_recordable() { return c10::cuda::device_count() > 0; }

std::vector<std::string> cuda_pci_bus_ids() {
  std::vector<std::string> ids;
  for (int i = 0; i < c10::cuda::device_count(); ++i) {
    char id[32] = {};  // "0000:00:00.0" and its terminator
    if (cudaDeviceGetPCIBusId(id, sizeof id, i) != cudaSuccess) break;  // later ordinals would shift: stop here
    ids.emplace_back(id);
  }
  return ids;
}

// The per-device allocators exist only after CUDA's lazy init. Run it without allocating: a tensor of ours would
// show in the program's own memory_stats() (one more allocation and a 2 MiB segment).
template <class Context>
void init_cuda(Context& context) {
  if constexpr (requires { context.lazyInitDevice(c10::DeviceType::CUDA); }) context.lazyInitDevice(c10::DeviceType::CUDA);
  else context.lazyInitCUDA();
}

void cuda_start(Snapshot& s, ScriptFrames* script) {
  init_cuda(at::globalContext());
  static std::once_flag attached;  // trackers cannot be detached: attach once, gate with g_enabled
  std::call_once(attached, [] {
    alloc::get()->attachAllocatorTraceTracker(&on_trace);
    alloc::get()->attachOutOfMemoryObserver(&on_oom);
  });
  g_script = script;
  // Never take over a history the program records.
  g_history = script && !script->captures_unlocked() && !history_enabled(alloc::get());
  if (g_history) record_history(alloc::get(), true);
  if (script) s.metadata["recorder.cuda_script_frames"] = g_history ? "context function" : "allocator hook";
  alloc::SnapshotInfo info = alloc::get()->snapshot();
  s.segments_start = segments(s, info);
  s.has_segments_start = true;
  describe_devices(s, info);
  g_enabled = true;
}

void cuda_stop(Snapshot& s) {
  c10::cuda::device_synchronize();
  g_enabled = false;
  if (g_history && history_enabled(alloc::get())) record_history(alloc::get(), false);
  g_history = false;
  g_script = nullptr;
  s.segments_end = segments(s, alloc::get()->snapshot());
}

void cuda_forget() { g_enabled = false; }

}  // namespace memrec::detail
