// Under the allocator's timeline, on its time axis: the device memory as the driver sees it (memrec/device_memory.h).
// Each pixel column stacks, from the bottom, the allocator's reserved bytes, the other allocations and the context
// and driver, at the column's last NVML sample; NVML's used is a white line over them, so a negative context
// (something counted twice) shows as the stack reaching above the line. Its own scale: the largest used.
#include <algorithm>

#include "memrec/device_memory.h"
#include "memrec/units.h"
#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr float kBandHeight = 44;
constexpr float kGap = 4;
constexpr ImU32 kOtherColor = IM_COL32(200, 80, 200, 255);
constexpr ImU32 kContextColor = IM_COL32(110, 110, 110, 255);
constexpr ImU32 kUsedColor = IM_COL32(255, 255, 255, 255);

// The accounting of the shown device, computed once per document and device: it pairs every CUPTI record.
const DeviceMemory& accounting(const Document& doc) {
  static const Document* doc_of = nullptr;
  static uint8_t device_of = 0;
  static size_t samples_of = 0;
  static DeviceMemory d;
  if (doc_of != &doc || device_of != doc.device || samples_of != doc.snapshot.memory_samples.size()) {
    d = device_memory(doc.snapshot, *doc.replay);
    doc_of = &doc, device_of = doc.device, samples_of = doc.snapshot.memory_samples.size();
  }
  return d;
}

void tooltip(const DeviceMemoryPoint& p, int64_t origin) {
  ImGui::BeginTooltip();
  ImGui::Text("NVML sample at %s: used %s", format_duration(p.time_ns - origin).c_str(), format_bytes(p.used).c_str());
  ImGui::Text("reserved %s   other allocations %s   context and driver %s%s", format_bytes(p.reserved).c_str(),
              format_bytes(p.other).c_str(), p.context < 0 ? "-" : "",
              format_bytes(p.context < 0 ? 0 - static_cast<uint64_t>(p.context) : static_cast<uint64_t>(p.context)).c_str());
  ImGui::EndTooltip();
}

}  // namespace

float device_band_height(const Document& doc) {
  return doc.snapshot.memory_samples.empty() ? 0 : kBandHeight + kGap;
}

void draw_device_band(const Document& doc, const ColumnGrid& grid, ImDrawList* list, float top) {
  if (doc.snapshot.memory_samples.empty()) return;
  const DeviceMemory& d = accounting(doc);
  if (d.points.empty()) return;
  top += kGap;
  float bottom = top + kBandHeight;
  uint64_t scale = 1;
  for (const DeviceMemoryPoint& p : d.points) scale = std::max({scale, p.used, p.reserved + p.other});
  auto y_of = [&](uint64_t bytes) { return bottom - kBandHeight * static_cast<float>(static_cast<double>(bytes) / scale); };
  const DeviceMemoryPoint* hovered = nullptr;
  ImVec2 mouse = ImGui::GetIO().MousePos;
  std::vector<ImVec2> used;
  for (int i = 0; i < grid.width; ++i) {
    int64_t end = grid.absolute(grid.t0 + (i + 1) * grid.dt);
    if (end < d.points.front().time_ns) continue;
    const DeviceMemoryPoint& p = *d.point_at(end);
    if (p.time_ns < grid.absolute(grid.t0 + i * grid.dt) && &p == &d.points.back()) break;  // past the last sample
    float x = grid.x + i;
    float reserved = y_of(p.reserved), other = y_of(p.reserved + p.other), total = y_of(p.used);
    list->AddRectFilled(ImVec2(x, reserved), ImVec2(x + 1, bottom), kReservedColor);
    list->AddRectFilled(ImVec2(x, other), ImVec2(x + 1, reserved), kOtherColor);
    if (total < other) list->AddRectFilled(ImVec2(x, total), ImVec2(x + 1, other), kContextColor);
    used.emplace_back(x + 0.5f, total);
    if (mouse.x >= x && mouse.x < x + 1 && mouse.y >= top && mouse.y < bottom) hovered = &p;
  }
  if (used.size() > 1) list->AddPolyline(used.data(), static_cast<int>(used.size()), kUsedColor, 0, 1.0f);
  ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  list->AddText(ImVec2(grid.x - 74, top), text, "GPU used");
  list->AddText(ImVec2(grid.x - 74, top + 14), text, format_bytes(scale, Digits::compact).c_str());
  if (hovered) tooltip(*hovered, grid.origin);
}

}  // namespace memrec::viewer
