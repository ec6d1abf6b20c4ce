// Status bar: the recording's warnings first (dropped events, a file cut short, unmatched frees, what the reader
// noted), then file, device, event counts, peaks, and the visible span. Hovering it lists every warning.
#include <filesystem>

#include <fmt/format.h>

#include "memrec/units.h"
#include "views.h"

namespace memrec::viewer {
namespace {

std::vector<std::string> warnings_of(const Document& doc) {
  const Snapshot& s = doc.snapshot;
  std::vector<std::string> out;
  if (s.dropped_events) out.push_back(fmt::format("{} events dropped by the recorder", s.dropped_events));
  if (!s.complete) out.push_back("the file is incomplete (its writer never closed it)");
  if (uint64_t n = doc.replay->unmatched_frees()) out.push_back(fmt::format("{} frees of unknown blocks", n));
  out.insert(out.end(), s.warnings.begin(), s.warnings.end());
  return out;
}

}  // namespace

void draw_status_bar(const Document& doc, const ViewState& state, float frame_ms) {
  const Snapshot& s = doc.snapshot;
  const Replay& r = *doc.replay;
  ImGui::Separator();
  auto warnings = warnings_of(doc);
  if (!warnings.empty()) {
    std::string first = warnings.size() == 1 ? warnings[0] : fmt::format("{} (+{} more)", warnings[0], warnings.size() - 1);
    ImGui::TextColored(ImVec4(1, 0.6f, 0.2f, 1), "warning: %s |", first.c_str());
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      for (const std::string& w : warnings) ImGui::BulletText("%s", w.c_str());
      ImGui::EndTooltip();
    }
    ImGui::SameLine();
  }
  ImGui::Text("%s | device %u of %zu | %llu events (%zu in file) | %u blocks | %zu kernels | %zu scopes",
              std::filesystem::path(doc.path).filename().c_str(), doc.device, doc.devices.size(),
              static_cast<unsigned long long>(doc.device_events()), s.events.size(), r.allocations().size(),
              s.kernels.size(), s.scopes.size() - 1);
  ImGui::SameLine();
  ImGui::Text("| peak allocated %s, reserved %s | view %s | %.1f ms/frame", format_bytes(r.peak_allocated().bytes).c_str(),
              format_bytes(r.peak_reserved().bytes).c_str(), format_duration(static_cast<int64_t>(state.span)).c_str(),
              frame_ms);
}

}  // namespace memrec::viewer
