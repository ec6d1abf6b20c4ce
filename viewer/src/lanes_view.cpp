// Kernel lanes (one per stream) and scope lanes (phase, module, op by nesting depth) under the timeline, on the
// same pixel columns. Painted into one texture; names are written only on items wide enough to read.
#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "memrec/file_info.h"
#include "memrec/units.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr int kLaneHeight = 14;
constexpr float kMinLabelWidth = 48;

uint32_t item_name(const Document& doc, const Lane& lane, uint32_t id) {
  return lane.kernels ? doc.snapshot.kernels[id].name : doc.snapshot.scopes[id].name;
}

size_t lane_count(const Document& doc) { return doc.kernel_lanes.size() + doc.scope_lanes.size(); }

const Lane& lane_at(const Document& doc, size_t i) {
  return i < doc.kernel_lanes.size() ? doc.kernel_lanes[i] : doc.scope_lanes[i - doc.kernel_lanes.size()];
}

// What a lane holds, for the tooltip of its name.
std::string lane_explanation(const Document& doc, const Lane& lane) {
  if (lane.kernels) {
    std::string steps = kernel_steps_note(doc.snapshot);
    return "CUDA kernels and copies that ran on " + lane.title + " (recorded with --kernels" +
           (steps.empty() ? "" : "; " + steps) + ")";
  }
  if (lane.ids.empty()) return lane.title;
  switch (doc.snapshot.scopes[lane.ids[0]].kind) {
    case ScopeKind::phase: return "training phases: forward, backward, optimizer step";
    case ScopeKind::module: return "the nn.Module whose forward or backward ran (" + lane.title + ")";
    case ScopeKind::op: return "the aten op that ran (" + lane.title + ")";
    case ScopeKind::step: return "training steps";
    case ScopeKind::annotation: return "annotations: record_function ranges and PyTorch's own (e.g. Optimizer.step)";
  }
  return lane.title;
}

}  // namespace

float LanesView::height_for(const Document& doc) {
  return static_cast<float>(lane_count(doc) * (kLaneHeight + 1));
}

// Panned by whole columns: keep the columns still visible, with their items.
void LanesView::scroll(const Document& doc, int64_t shift) {
  int w = image_.width();
  image_.shift_left(static_cast<int>(shift));
  for (size_t l = 0; l < lane_count(doc); ++l) {
    auto lane = items_.begin() + static_cast<std::ptrdiff_t>(l * w);
    if (shift > 0) std::rotate(lane, lane + shift, lane + w);
    else std::rotate(lane, lane + (w + shift), lane + w);
  }
}

// Paints columns [from, to) of every lane.
void LanesView::paint(const Document& doc, const ColumnGrid& grid, int from, int to) {
  const ImU32 background = ImGui::GetColorU32(ImGuiCol_FrameBg) | 0xFF000000u;
  for (size_t l = 0; l < lane_count(doc); ++l) {
    const Lane& lane = lane_at(doc, l);
    std::span<uint32_t> items(items_.data() + l * grid.width, static_cast<size_t>(grid.width));
    lane.columns(grid.origin, grid.first + from, grid.dt, items.subspan(from, to - from));
    int top = static_cast<int>(l) * (kLaneHeight + 1);
    for (int x = from; x < to;) {
      int end = x + 1;
      while (end < to && items[end] == items[x]) ++end;
      uint32_t c = items[x] == kNone ? background : name_color(item_name(doc, lane, items[x]));
      for (int y = 0; y < kLaneHeight; ++y)
        for (int i = x; i < end; ++i) image_.at(i, top + y) = c;
      x = end;
    }
    for (int x = from; x < to; ++x) image_.at(x, top + kLaneHeight) = 0xFF000000u;
  }
  image_.mark_changed();
}

// Runs of columns wide enough to carry the item's name.
void LanesView::find_labels(const Document& doc) {
  labels_.clear();
  int w = image_.width();
  for (size_t l = 0; l < lane_count(doc); ++l) {
    const uint32_t* items = items_.data() + l * w;
    for (int x = 0; x < w;) {
      int end = x + 1;
      while (end < w && items[end] == items[x]) ++end;
      if (items[x] != kNone && end - x >= kMinLabelWidth)
        labels_.push_back(Label{x, end, static_cast<int>(l) * (kLaneHeight + 1), item_name(doc, lane_at(doc, l), items[x])});
      x = end;
    }
  }
}

void LanesView::draw(const Document& doc, ViewState& state, const ColumnGrid& grid) {
  size_t lanes = lane_count(doc);
  if (lanes == 0) return;
  ImVec2 origin = ImGui::GetCursorScreenPos();
  int height = static_cast<int>(height_for(doc));
  bool resized = image_.resize(grid.width, height);
  items_.resize(lanes * grid.width);
  bool same = !resized && grid.dt == painted_.dt && doc.id == painted_doc_ && doc.device == painted_device_;
  int64_t shift = grid.first - painted_.first;
  if (!same || std::abs(shift) >= grid.width) {
    paint(doc, grid, 0, grid.width);
  } else if (shift != 0) {
    scroll(doc, shift);
    paint(doc, grid, shift > 0 ? grid.width - static_cast<int>(shift) : 0,
          shift > 0 ? grid.width : static_cast<int>(-shift));
  }
  if (!same || shift != 0) find_labels(doc);
  painted_ = grid;
  painted_doc_ = doc.id;
  painted_device_ = doc.device;
  ImDrawList* list = ImGui::GetWindowDrawList();
  float y0 = std::floor(origin.y);
  image_.draw(list, ImVec2(grid.x, y0));
  ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  ImVec2 mouse = ImGui::GetIO().MousePos;
  for (size_t l = 0; l < lanes; ++l) {
    float top = y0 + static_cast<float>(l * (kLaneHeight + 1));
    // Names are clipped to the axis column; hovering one says what the lane holds.
    ImVec4 clip(origin.x, top, grid.x - 2, top + kLaneHeight);
    list->AddText(nullptr, 0, ImVec2(origin.x, top), text, lane_at(doc, l).title.c_str(), nullptr, 0, &clip);
    if (mouse.x >= origin.x && mouse.x < grid.x && mouse.y >= top && mouse.y < top + kLaneHeight + 1 &&
        ImGui::IsWindowHovered())
      ImGui::SetTooltip("%s: %zu items", lane_explanation(doc, lane_at(doc, l)).c_str(), lane_at(doc, l).ids.size());
  }
  for (const Label& label : labels_) {
    ImVec4 clip(grid.x + label.x0, y0 + label.top, grid.x + label.x1, y0 + label.top + kLaneHeight);
    list->AddText(nullptr, 0, ImVec2(grid.x + label.x0 + 2, y0 + label.top), IM_COL32(0, 0, 0, 255),
                  doc.snapshot.strings[label.name].c_str(), nullptr, 0, &clip);
  }

  ImGui::SetCursorScreenPos(ImVec2(grid.x, y0));
  ImGui::InvisibleButton("##lanes", ImVec2(static_cast<float>(grid.width), static_cast<float>(height)));
  if (ImGui::IsItemHovered()) {
    ImVec2 m = ImGui::GetIO().MousePos;
    size_t l = std::min(lanes - 1, static_cast<size_t>((m.y - y0) / (kLaneHeight + 1)));
    const Lane& lane = lane_at(doc, l);
    uint32_t one[1];
    lane.columns(grid.origin, grid.first + static_cast<int64_t>(std::floor(m.x - grid.x)), grid.dt, one);
    if (one[0] != kNone) {
      auto it = std::find(lane.ids.begin(), lane.ids.end(), one[0]);
      size_t k = it - lane.ids.begin();
      ImGui::SetTooltip("%s\n%s, %s after start\nclick: group the memory live at its start",
                        doc.snapshot.strings[item_name(doc, lane, one[0])].c_str(),
                        format_duration(lane.end(k) - lane.start(k)).c_str(),
                        format_duration(lane.start(k) - doc.timeline->begin_ns()).c_str());
      if (ImGui::IsItemClicked()) state.set_instant(doc, doc.timeline->step_at(lane.start(k)));
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + height + 2));
}

}  // namespace memrec::viewer
