// A recording wrapper around libtorch's CPU allocator. The deleter only gets the pointer, so frees carry no
// size here: the drain thread knows it from the alloc it saw earlier.
#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>

#include "internal.h"

#if TORCH_VERSION_MAJOR >= 2
#define MEMREC_ALLOC_CONST
#else
#define MEMREC_ALLOC_CONST const
#endif

namespace memrec::detail {
namespace {

// Plain globals that are never destroyed: memory allocated while recording may be freed during static destruction.
std::atomic<c10::Allocator*> g_base{nullptr};
std::atomic<c10::DeleterFnPtr> g_base_deleter{nullptr};
std::atomic<bool> g_recording{false};
std::atomic<uint64_t> g_allocs{0}, g_zero{0}, g_unwrapped{0};

Record cpu_record(Action action, void* ptr, uint64_t size) {
  Record r;
  r.time = stamp();
  r.action = action;
  r.addr = reinterpret_cast<uint64_t>(ptr);
  r.size = size;
  return r;
}

void recording_delete(void* ptr) {
  if (g_recording.load(std::memory_order_relaxed) && ptr) {
    record_event(cpu_record(Action::free_requested, ptr, 0));
    record_event(cpu_record(Action::free_completed, ptr, 0));
  }
  g_base_deleter.load(std::memory_order_relaxed)(ptr);
}

class RecordingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) MEMREC_ALLOC_CONST override {
    c10::DataPtr dp = allocate_or_record_oom(n);
    if (!g_recording.load(std::memory_order_relaxed)) return dp;
    if (!dp.get()) {  // zero bytes: no pointer, and the deleter never runs
      g_zero.fetch_add(1, std::memory_order_relaxed);
      return dp;
    }
    if (dp.get_context() != dp.get() || !dp.compare_exchange_deleter(g_base_deleter.load(), &recording_delete)) {
      g_unwrapped.fetch_add(1, std::memory_order_relaxed);  // reported with the drops
      return dp;
    }
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    record_event(cpu_record(Action::alloc, dp.get(), n));
    return dp;
  }
  c10::DeleterFnPtr raw_deleter() const override { return &recording_delete; }

 private:
  // An allocation the base allocator refuses (out of memory) is recorded as an oom event, like the CUDA
  // allocator's, and sent to disk at once: the program is likely to die of it.
  static c10::DataPtr allocate_or_record_oom(size_t n) {
    try {
      return g_base.load(std::memory_order_relaxed)->allocate(n);
    } catch (...) {
      if (g_recording.load(std::memory_order_relaxed)) {
        record_event(cpu_record(Action::oom, nullptr, n));
        EventBuffer::get().wake();
      }
      throw;
    }
  }
#if TORCH_VERSION_MAJOR >= 2
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#endif
};

RecordingCpuAllocator& wrapper() {
  static auto* a = new RecordingCpuAllocator;  // never destroyed, like the pointers it hands out
  return *a;
}

constexpr uint8_t kPriority = 255;  // above anything installed before us; c10 only replaces at >= priority

}  // namespace

void cpu_install() {
  c10::Allocator* current = c10::GetAllocator(c10::DeviceType::CPU);
  if (current != &wrapper()) {
    c10::DeleterFnPtr deleter = current->raw_deleter();
    if (!deleter) throw Error("libtorch's CPU allocator has no raw deleter: cannot record it");
    g_base = current;
    g_base_deleter = deleter;
    c10::SetAllocator(c10::DeviceType::CPU, &wrapper(), kPriority);
    if (c10::GetAllocator(c10::DeviceType::CPU) != &wrapper())
      throw Error("could not install the recording CPU allocator");
  }
  g_allocs = 0;
  g_zero = 0;
  g_unwrapped = 0;
  g_recording = true;
}

void cpu_uninstall() {
  g_recording = false;
  // Restore the original for new allocations; pointers we handed out keep our deleter, which forwards to it.
  if (c10::GetAllocator(c10::DeviceType::CPU) == &wrapper())
    c10::SetAllocator(c10::DeviceType::CPU, g_base.load(), kPriority);
}

void cpu_forget() { g_recording = false; }  // blocks keep the recording deleter, which forwards

CpuCounters cpu_counters() { return {g_allocs.load(), g_zero.load(), g_unwrapped.load()}; }

}  // namespace memrec::detail
