// The device's used memory from NVML, the driver's libnvidia-ml.so.1, loaded at run time: memrec builds and runs
// where there is none (a CPU machine, a container without the driver's libraries), and then says so.
#include <dlfcn.h>

#include <memory>
#include <type_traits>

#include <fmt/format.h>

#include "internal.h"

namespace memrec::detail {
namespace {

// The few declarations of nvml.h this needs (its ABI has been stable since NVML 2).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;

}  // namespace

struct NvmlSampler::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  nvmlReturn_t (*by_pci_bus_id)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*memory_info)(nvmlDevice_t, nvmlMemory_t*);
  const char* (*error_string)(nvmlReturn_t);
};

NvmlSampler::NvmlSampler() = default;
NvmlSampler::~NvmlSampler() { close(); }

std::string NvmlSampler::open(const std::vector<std::string>& pci_bus_ids) {
  close();
  failures_ = 0;
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) return fmt::format("absent: {}", dlerror());
  api_ = std::make_unique<Api>();
  auto find = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib_, name));
    return fn != nullptr;
  };
  if (!find(api_->init, "nvmlInit_v2") || !find(api_->shutdown, "nvmlShutdown") ||
      !find(api_->by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") ||
      !find(api_->memory_info, "nvmlDeviceGetMemoryInfo") || !find(api_->error_string, "nvmlErrorString")) {
    close();
    return "absent: libnvidia-ml.so.1 lacks the functions memrec calls";
  }
  if (nvmlReturn_t rc = api_->init(); rc != kNvmlSuccess) {
    std::string why = fmt::format("off: nvmlInit failed: {}", api_->error_string(rc));
    api_.reset();  // not initialized: no shutdown
    close();
    return why;
  }
  initialized_ = true;
  for (size_t ordinal = 0; ordinal < pci_bus_ids.size(); ++ordinal) {
    nvmlDevice_t handle = nullptr;
    if (nvmlReturn_t rc = api_->by_pci_bus_id(pci_bus_ids[ordinal].c_str(), &handle); rc != kNvmlSuccess) {
      std::string why = fmt::format("off: NVML does not know CUDA device {} (PCI {}): {}", ordinal,
                                    pci_bus_ids[ordinal], api_->error_string(rc));
      close();
      return why;
    }
    devices_.push_back({static_cast<uint8_t>(ordinal), handle});
  }
  if (devices_.empty()) {
    close();
    return "off: no CUDA device to sample";
  }
  return "on";
}

void NvmlSampler::sample(Snapshot& s) {
  if (!initialized_) return;
  int64_t t = now_ns();
  for (const Device& d : devices_) {
    nvmlMemory_t m{};
    if (api_->memory_info(static_cast<nvmlDevice_t>(d.handle), &m) != kNvmlSuccess || m.used > m.total) {
      ++failures_;
      continue;
    }
    s.memory_samples.push_back({t, m.used, m.total, d.ordinal});
  }
}

void NvmlSampler::close() {
  if (initialized_) api_->shutdown();
  initialized_ = false;
  devices_.clear();
  api_.reset();
  if (lib_) dlclose(lib_);
  lib_ = nullptr;
}

}  // namespace memrec::detail
