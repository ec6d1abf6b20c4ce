// `memrec info`: what a file holds, per device, as text for people and JSON for scripts (from memrec/file_info.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memrec/file_info.h"

namespace memrec {

std::string info_text(const FileInfo& info);
// "recording cost: ..." (one line): the recorder's hooks per step and their share of the steps' time.
std::string cost_text(const RecordingCost& c);
// The field names are a contract with scripts and agents (`memrec info --json`, the MCP tool `info`): keep them.
nlohmann::json info_json(const FileInfo& info);

}  // namespace memrec
