// Status bar: file, device, event counts, peak, and the visible span.
#include <filesystem>

#include "units.h"
#include "views.h"

namespace memrec::viewer {

void draw_status_bar(const Document& doc, const ViewState& state, float frame_ms) {
  const Snapshot& s = doc.snapshot;
  const Replay& r = *doc.replay;
  ImGui::Separator();
  ImGui::Text("%s | device %u of %zu | %llu events (%zu in file) | %u blocks | %zu kernels | %zu scopes",
              std::filesystem::path(doc.path).filename().c_str(), doc.device, doc.devices.size(),
              static_cast<unsigned long long>(doc.device_events()), s.events.size(), r.allocations().size(),
              s.kernels.size(), s.scopes.size() - 1);
  ImGui::SameLine();
  ImGui::Text("| peak allocated %s, reserved %s | view %s | %.1f ms/frame", human_bytes(r.peak_allocated().bytes).c_str(),
              human_bytes(r.peak_reserved().bytes).c_str(), human_duration(static_cast<int64_t>(state.span)).c_str(),
              frame_ms);
  if (s.dropped_events || !s.complete || r.unmatched_frees()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1, 0.6f, 0.2f, 1), "| %llu dropped, %llu unmatched frees%s",
                       static_cast<unsigned long long>(s.dropped_events),
                       static_cast<unsigned long long>(r.unmatched_frees()), s.complete ? "" : ", file incomplete");
  }
}

}  // namespace memrec::viewer
