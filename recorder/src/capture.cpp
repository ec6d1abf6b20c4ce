// Raw stack capture on the allocating thread. Symbolization happens later, once per unique frame.
#include <dlfcn.h>
#include <unwind.h>

#include <algorithm>

#include <boost/stacktrace/safe_dump_to.hpp>
#include <torch/version.h>

#include "internal.h"

#define MEMREC_HAS_TORCH_UNWIND (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))
#if MEMREC_HAS_TORCH_UNWIND
#include <torch/csrc/profiler/unwind/unwind.h>
#endif
#ifdef MEMREC_HAS_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

namespace memrec {
namespace detail {
constinit UnwBacktrace g_unw_backtrace = nullptr;
}
namespace {

// libunwind (nongnu) loaded with RTLD_LOCAL, never linked: libunwind.so also defines _Unwind_RaiseException and
// the rest of the exception ABI, and a linked copy ahead of libgcc_s would take over every C++ throw in the
// program. Loaded locally, only these looked-up entry points are used. Its x86-64 trace caches each return
// address's frame rule per thread, so a warm capture is a table lookup and two stack reads per frame and allocates
// nothing (a thread's first one maps its cache and takes libunwind's thread-local block: one small malloc).
// True when unw_backtrace was found; detail::g_unw_backtrace then holds it.
bool load_libunwind() {
#ifdef MEMREC_HAS_LIBUNWIND
#define MEMREC_NAME(x) MEMREC_NAME2(x)
#define MEMREC_NAME2(x) #x
  void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  auto* set_policy = reinterpret_cast<decltype(&unw_set_caching_policy)>(
      dlsym(lib, MEMREC_NAME(unw_set_caching_policy)));
  auto* local = static_cast<unw_addr_space_t*>(dlsym(lib, MEMREC_NAME(unw_local_addr_space)));
  detail::g_unw_backtrace = reinterpret_cast<detail::UnwBacktrace>(dlsym(lib, "unw_backtrace"));
  // Per-thread caches need no lock (the global one blocks signals around each use).
  if (set_policy && local) set_policy(*local, UNW_CACHE_PER_THREAD);
#undef MEMREC_NAME2
#undef MEMREC_NAME
#endif
  return detail::g_unw_backtrace != nullptr;
}

bool libunwind_loaded() {
  static const bool loaded = load_libunwind();  // by stack_capture_available, before any hook can capture
  return loaded;
}

}  // namespace

std::string_view to_string(StackCapture c) {
  switch (c) {
    case StackCapture::automatic: return "auto";
    case StackCapture::unwind_backtrace: return "unwind_backtrace";
    case StackCapture::boost: return "boost";
    case StackCapture::torch_unwind: return "torch_unwind";
    case StackCapture::libunwind: return "libunwind";
  }
  return "?";
}

bool stack_capture_available(StackCapture c) {
  switch (c) {
    case StackCapture::torch_unwind: return MEMREC_HAS_TORCH_UNWIND;
    case StackCapture::libunwind: return libunwind_loaded();
    default: return true;
  }
}

int capture_stack(StackCapture c, uint64_t* out, int max) { return detail::capture_stack(c, out, max); }

}  // namespace memrec

namespace memrec::detail {
namespace {

struct UnwindState {
  uint64_t* out;
  int max;
  int n;
};

_Unwind_Reason_Code unwind_one(_Unwind_Context* ctx, void* arg) {
  auto* st = static_cast<UnwindState*>(arg);
  if (st->n >= st->max) return _URC_END_OF_STACK;
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  st->out[st->n++] = ip;
  return _URC_NO_REASON;
}

__attribute__((noinline)) int capture_unwind(uint64_t* out, int max) {
  UnwindState st{out, max, 0};
  _Unwind_Backtrace(&unwind_one, &st);
  return st.n;
}

__attribute__((noinline)) int capture_boost(uint64_t* out, int max) {
  static_assert(sizeof(void*) == sizeof(uint64_t));
  // safe_dump_to writes native frame pointers followed by a terminating null.
  size_t n = boost::stacktrace::safe_dump_to(0, out, max * sizeof(uint64_t));
  return static_cast<int>(n);
}

__attribute__((noinline)) int capture_torch(uint64_t* out, int max) {
#if MEMREC_HAS_TORCH_UNWIND
  std::vector<void*> frames = torch::unwind::unwind();
  int n = std::min<int>(max, static_cast<int>(frames.size()));
  for (int i = 0; i < n; ++i) out[i] = reinterpret_cast<uint64_t>(frames[i]);
  return n;
#else
  (void)out, (void)max;
  return 0;
#endif
}

__attribute__((noinline)) int capture_libunwind(uint64_t* out, int max) {
  static_assert(sizeof(void*) == sizeof(uint64_t));
  int n = libunwind_loaded() && max > 0 ? g_unw_backtrace(reinterpret_cast<void**>(out), max) : 0;
  asm volatile("" ::: "memory");  // no tail call: the first frame stays this function's, as with the others
  return n;
}

}  // namespace

int capture_stack(StackCapture method, uint64_t* out, int max) {
  switch (method) {
    case StackCapture::boost: return capture_boost(out, max);
    case StackCapture::torch_unwind: return capture_torch(out, max);
    case StackCapture::libunwind: return capture_libunwind(out, max);
    default: return capture_unwind(out, max);
  }
}

constinit HookConfig g_hook_config;

int script_frames(const HookConfig& cfg, const Record& r, const std::span<const uint64_t>* script, uint64_t* out,
                  int max) {
  int m = 0;
  if (script) {
    m = static_cast<int>(std::min<size_t>(script->size(), max));
    std::copy(script->begin(), script->begin() + m, out);
  } else if (cfg.script) {
    m = cfg.script->capture(out, max, /*may_block=*/!r.cuda);  // CUDA trace: under the allocator lock
  }
  for (int i = 0; i < m; ++i) out[i] |= kScriptFrameBit;
  return m;
}

}  // namespace memrec::detail
