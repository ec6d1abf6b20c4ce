// Segments view: the reserved segments at the selected instant, each with its live blocks drawn to scale, and the
// fragmentation (reserved - allocated) they add up to.
#include <algorithm>

#include "memrec/viewer.h"
#include "units.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr float kBarHeight = 12;

void draw_blocks(const Document& doc, const SegmentAt& seg, float width) {
  ImVec2 p = ImGui::GetCursorScreenPos();
  ImDrawList* list = ImGui::GetWindowDrawList();
  list->AddRectFilled(p, ImVec2(p.x + width, p.y + kBarHeight), kPlotBackground);
  const auto& allocs = doc.replay->allocations();
  double scale = seg.size ? width / static_cast<double>(seg.size) : 0;
  // Blocks closer than a pixel merge into one rectangle: the draw count stays below the bar's width.
  float run_x0 = -1, run_x1 = -1;
  uint32_t run_color = 0;
  auto flush = [&] {
    if (run_x1 > run_x0) list->AddRectFilled(ImVec2(p.x + run_x0, p.y), ImVec2(p.x + run_x1, p.y + kBarHeight), run_color);
  };
  for (uint32_t id : seg.blocks) {
    const Allocation& a = allocs[id];
    auto x0 = static_cast<float>((a.addr - seg.addr) * scale);
    float x1 = std::max(x0 + 1, static_cast<float>((a.addr + a.size - seg.addr) * scale));
    if (x0 <= run_x1 + 1 && run_x1 >= 0) {
      run_x1 = std::max(run_x1, x1);
      continue;
    }
    flush();
    run_x0 = x0;
    run_x1 = x1;
    run_color = band_color(a.stack, id);
  }
  flush();
  ImGui::Dummy(ImVec2(width, kBarHeight));
}

}  // namespace

void SegmentsView::draw(const Document& doc, const ViewState& state) {
  if (step_ != state.instant || replay_ != doc.replay.get()) {
    segments_ = segments_at(doc.snapshot, *doc.replay, state.instant);
    step_ = state.instant;
    replay_ = doc.replay.get();
  }
  uint64_t reserved = 0, allocated = 0;
  for (const SegmentAt& s : segments_) {
    reserved += s.size;
    allocated += s.allocated;
  }
  ImGui::Text("%zu segments, reserved %s, allocated %s, free in segments %s", segments_.size(),
              human_bytes(reserved).c_str(), human_bytes(allocated).c_str(),
              human_bytes(reserved > allocated ? reserved - allocated : 0).c_str());
  if (!ImGui::BeginChild("segments")) {
    ImGui::EndChild();
    return;
  }
  float width = std::max(60.0f, ImGui::GetContentRegionAvail().x - 8);
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(segments_.size()), ImGui::GetTextLineHeightWithSpacing() + kBarHeight + 4);
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const SegmentAt& s = segments_[i];
      if (s.size == 0) ImGui::Text("outside known segments: %zu blocks, %s", s.blocks.size(), human_bytes(s.allocated).c_str());
      else
        ImGui::Text("0x%llx  %s  stream %u  %zu blocks  free %s", static_cast<unsigned long long>(s.addr),
                    human_bytes(s.size).c_str(), s.stream, s.blocks.size(),
                    human_bytes(s.size > s.allocated ? s.size - s.allocated : 0).c_str());
      if (s.size) draw_blocks(doc, s, width);
      else ImGui::Dummy(ImVec2(width, kBarHeight));
    }
  }
  ImGui::EndChild();
}

}  // namespace memrec::viewer
