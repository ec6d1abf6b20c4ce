// The device memory section of `memrec stats` and `memrec report` as text and JSON, from memrec/device_memory.h.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "memrec/device_memory.h"

namespace memrec {

// null for a recording without the section.
nlohmann::json device_memory_json(const std::optional<DeviceMemoryStats>& d);
std::string device_memory_text(const DeviceMemoryStats& d);

}  // namespace memrec
