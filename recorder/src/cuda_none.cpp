// Build without CUDA (MEMREC_WITH_CUDA=OFF): the CUDA allocator and CUPTI are never recordable.
#include "internal.h"

namespace memrec::detail {

bool cuda_recordable() { return false; }
void cuda_start(Snapshot&, ScriptFrames*) { throw Error("this memrec was built without CUDA (MEMREC_WITH_CUDA=OFF)"); }
void cuda_stop(Snapshot&) {}
void cuda_forget() {}
std::vector<std::string> cuda_pci_bus_ids() { return {}; }
void cupti_start(bool, bool, uint32_t, uint32_t, const std::string&, bool) {
  throw Error("this memrec was built without CUDA (MEMREC_WITH_CUDA=OFF)");
}
std::string cupti_start_calls(bool) { return "off: built without CUDA"; }
uint64_t cupti_stacks_dropped() { return 0; }
void cupti_step_begins() {}
KernelStepCount cupti_kernel_steps() { return {}; }
void cupti_lend(const std::string&) {}
void cupti_take_back() {}
void cupti_stop() {}
std::string cupti_gaps_json() { return ""; }
void cupti_take(std::vector<KernelRecord>&, std::vector<MemoryActivity>&, std::vector<std::string>&) {}
uint64_t cupti_dropped() { return 0; }

}  // namespace memrec::detail
