// Segment history: the memory map of the reserved segments at the selected instant (memory_viz's Allocator State
// History on the time axis). Each segment is a bar of its address range: live blocks in their band color, blocks
// freed but not yet released (pending free) in amber, the free pieces of a segment that holds blocks (inactive
// split) in dark red, a segment with nothing in it in gray. The slider scrubs the instant through the recording;
// hovering a block gives its site and lifetime, clicking it selects it and highlights it on the timeline.
#include <algorithm>

#include <fmt/format.h>

#include "memrec/sites.h"
#include "memrec/units.h"
#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr float kBarHeight = 14;

}  // namespace

// The blocks that are freed and released later (record_stream), by free step: the only ones that can be pending.
SegmentsView::Delayed::Delayed(const Replay& r) {
  const auto& freed = r.free_steps();
  const auto& released = r.completed_steps();
  for (uint32_t i = 0; i < freed.size(); ++i)
    if (freed[i] < kBeforeStart && released[i] != kNoEvent && released[i] > freed[i]) {
      ids.push_back(i);
      longest = std::max(longest, released[i] - freed[i]);
    }
  std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return freed[a] < freed[b]; });
}

// Pending after `step`: freed at or before it and released after it, so freed at most `longest` steps before.
std::vector<uint32_t> SegmentsView::Delayed::pending_after(const Replay& r, uint32_t step) const {
  std::vector<uint32_t> out;
  if (step == kNoEvent) return out;
  const auto& freed = r.free_steps();
  uint32_t from = step >= longest ? step - longest + 1 : 0;
  auto it = std::lower_bound(ids.begin(), ids.end(), from, [&](uint32_t id, uint32_t s) { return freed[id] < s; });
  for (; it != ids.end() && freed[*it] <= step; ++it)
    if (r.completed_steps()[*it] > step) out.push_back(*it);
  return out;
}

namespace {

std::string when(const Document& doc, uint32_t step) {
  return format_duration(doc.timeline->time_of(step) - doc.timeline->begin_ns());
}

void block_tooltip(const Document& doc, uint32_t id, bool pending) {
  const Allocation& a = doc.replay->allocations()[id];
  ImGui::BeginTooltip();
  ImGui::Text("%s%s at 0x%llx", pending ? "pending free: " : "", format_bytes(a.size).c_str(),
              static_cast<unsigned long long>(a.addr));
  ImGui::TextUnformatted(allocation_site(doc.snapshot, a.stack).c_str());
  ImGui::Text("allocated %s, %s", a.alloc_step == kNoEvent ? "before the recording" : when(doc, a.alloc_step).c_str(),
              a.free_step < kBeforeStart ? ("freed " + when(doc, a.free_step)).c_str() : "never freed");
  if (a.alloc_step != kNoEvent && a.free_step < kBeforeStart)
    ImGui::Text("lifetime %s", format_duration(doc.timeline->time_of(a.free_step) - doc.timeline->time_of(a.alloc_step)).c_str());
  if (pending && a.completed_step != kNoEvent) ImGui::Text("released %s", when(doc, a.completed_step).c_str());
  ImGui::TextDisabled("click: inspect it and highlight it on the timeline");
  ImGui::EndTooltip();
}

}  // namespace

float SegmentsView::bar_height() { return kBarHeight; }

void SegmentsView::update(const Document& doc, const ViewState& state) {
  bool same_replay = doc_id_ == doc.id && device_ == doc.device;
  if (!same_replay) {
    delayed_ = Delayed(*doc.replay);
    history_.emplace(doc.snapshot, *doc.replay);
  }
  if (step_ == state.instant && same_replay) return;
  step_ = state.instant;
  doc_id_ = doc.id;
  device_ = doc.device;
  std::vector<uint32_t> live;
  doc.timeline->live_at(state.instant, live);
  segments_ = history_->at(state.instant, live);
  // Pending blocks by segment: few, so a search per block.
  pending_.assign(segments_.size(), {});
  const auto& allocs = doc.replay->allocations();
  for (uint32_t id : delayed_.pending_after(*doc.replay, state.instant)) {
    Allocation a = allocs[id];
    auto it = std::upper_bound(segments_.begin(), segments_.end(), a.addr,
                               [](uint64_t addr, const SegmentAt& s) { return addr < s.addr; });
    if (it != segments_.begin() && std::prev(it)->size && a.addr < std::prev(it)->addr + std::prev(it)->size)
      pending_[static_cast<size_t>(std::prev(it) - segments_.begin())].push_back(id);
  }
  totals_ = {};
  for (size_t i = 0; i < segments_.size(); ++i) {
    const SegmentAt& s = segments_[i];
    if (!s.size) continue;
    uint64_t pending = 0;
    for (uint32_t id : pending_[i]) pending += allocs[id].size;
    totals_.reserved += s.size;
    totals_.allocated += s.allocated;
    totals_.pending += pending;
    uint64_t free = s.size - std::min(s.size, s.allocated + pending);
    (s.blocks.empty() && pending_[i].empty() ? totals_.free : totals_.inactive_split) += free;
  }
}

void SegmentsView::draw_scrubber(const Document& doc, ViewState& state) {
  const Timeline& tl = *doc.timeline;
  int64_t now = state.instant == kNoEvent ? 0 : tl.time_of(state.instant) - tl.begin_ns();
  int64_t lo = 0, hi = tl.end_ns() - tl.begin_ns();
  if (ImGui::ArrowButton("##earlier", ImGuiDir_Left) && state.instant != kNoEvent)
    state.set_instant(doc, state.instant == 0 ? kNoEvent : state.instant - 1);
  ImGui::SameLine();
  if (ImGui::ArrowButton("##later", ImGuiDir_Right) && tl.steps() > 0 &&
      (state.instant == kNoEvent || state.instant + 1 < tl.steps()))
    state.set_instant(doc, state.instant == kNoEvent ? 0 : state.instant + 1);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(std::max(120.0f, ImGui::GetContentRegionAvail().x));
  std::string label = format_duration(now) + (state.instant == doc.replay->peak_allocated().step ? " (peak)" : "");
  if (ImGui::SliderScalar("##instant", ImGuiDataType_S64, &now, &lo, &hi, label.c_str()))
    state.set_instant(doc, tl.step_at(tl.begin_ns() + now));
}

void SegmentsView::draw_bar(const Document& doc, ViewState& state, size_t index, float width) {
  const SegmentAt& seg = segments_[index];
  ImVec2 p = ImGui::GetCursorScreenPos();
  p = ImVec2(std::floor(p.x), std::floor(p.y));
  ImDrawList* list = ImGui::GetWindowDrawList();
  const auto& allocs = doc.replay->allocations();
  bool split = !seg.blocks.empty() || !pending_[index].empty();
  list->AddRectFilled(p, ImVec2(p.x + width, p.y + kBarHeight), split ? kInactiveSplitColor : kFreeSegmentColor);
  double scale = width / static_cast<double>(seg.size);
  auto x_of = [&](uint64_t addr) { return static_cast<float>(static_cast<double>(addr - seg.addr) * scale); };
  // Blocks closer than a pixel merge into one rectangle: the draw count stays below the bar's width.
  float run_x0 = -1, run_x1 = -1;
  uint32_t run_color = 0;
  auto flush = [&] {
    if (run_x1 > run_x0) list->AddRectFilled(ImVec2(p.x + run_x0, p.y), ImVec2(p.x + run_x1, p.y + kBarHeight), run_color);
  };
  auto add = [&](uint32_t id, uint32_t color) {
    const Allocation& a = allocs[id];
    float x0 = x_of(a.addr), x1 = std::max(x0 + 1, x_of(a.addr + a.size));
    if (run_x1 >= 0 && x0 <= run_x1 + 1 && color == run_color) {
      run_x1 = std::max(run_x1, x1);
      return;
    }
    flush();
    run_x0 = x0, run_x1 = x1, run_color = color;
  };
  for (uint32_t id : seg.blocks) add(id, band_color(doc.replay->stack_of(id), id));
  for (uint32_t id : pending_[index]) add(id, kPendingFreeColor);
  flush();
  ImGui::InvisibleButton("##bar", ImVec2(width, kBarHeight));
  if (!ImGui::IsItemHovered()) return;
  // The block under the mouse: the last one starting at or before its address.
  auto addr = seg.addr + static_cast<uint64_t>((ImGui::GetIO().MousePos.x - p.x) / scale);
  auto under = [&](const std::vector<uint32_t>& ids) -> uint32_t {
    for (uint32_t id : ids)
      if (allocs[id].addr <= addr && addr < allocs[id].addr + std::max<uint64_t>(allocs[id].size, static_cast<uint64_t>(1 / scale)))
        return id;
    return kNone;
  };
  uint32_t id = under(seg.blocks);
  bool pending = false;
  if (id == kNone) id = under(pending_[index]), pending = id != kNone;
  if (id == kNone) {
    ImGui::SetTooltip("%s", split ? "free piece of a segment in use (inactive split)" : "free segment (cached)");
    return;
  }
  block_tooltip(doc, id, pending);
  if (ImGui::IsItemClicked()) {
    state.selected_allocation = id;
    std::vector<uint8_t> marks(allocs.size());
    marks[id] = 1;
    state.set_highlight(std::move(marks), fmt::format("block 0x{:x}", allocs[id].addr));
  }
}

void SegmentsView::draw(const Document& doc, ViewState& state) {
  update(doc, state);
  draw_scrubber(doc, state);
  update(doc, state);
  ImGui::Text("%zu segments: reserved %s, allocated %s, pending free %s, inactive split %s, free segments %s",
              segments_.size(), format_bytes(totals_.reserved).c_str(), format_bytes(totals_.allocated).c_str(),
              format_bytes(totals_.pending).c_str(), format_bytes(totals_.inactive_split).c_str(),
              format_bytes(totals_.free).c_str());
  if (!ImGui::BeginChild("bars")) {
    ImGui::EndChild();
    return;
  }
  float width = std::floor(std::max(60.0f, ImGui::GetContentRegionAvail().x - 8));
  bars_.clear();
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(segments_.size()), ImGui::GetTextLineHeightWithSpacing() + kBarHeight + 4);
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const SegmentAt& s = segments_[i];
      ImGui::PushID(i);
      if (s.size == 0) {
        ImGui::Text("outside known segments: %zu blocks, %s", s.blocks.size(), format_bytes(s.allocated).c_str());
        ImGui::Dummy(ImVec2(width, kBarHeight));
      } else {
        std::string kind = s.expandable ? "  expandable" : "";
        if (s.recorded && (s.recorded->pool_id[0] || s.recorded->pool_id[1]))
          kind += fmt::format("  private pool ({}, {})", s.recorded->pool_id[0], s.recorded->pool_id[1]);
        ImGui::Text("0x%llx  %s  stream %u  %zu blocks%s", static_cast<unsigned long long>(s.addr),
                    format_bytes(s.size).c_str(), s.stream, s.blocks.size(), kind.c_str());
        ImVec2 p = ImGui::GetCursorScreenPos();
        bars_.push_back(Bar{static_cast<size_t>(i), std::floor(p.x), std::floor(p.y), width});
        draw_bar(doc, state, static_cast<size_t>(i), width);
      }
      ImGui::PopID();
    }
  }
  ImGui::EndChild();
}

}  // namespace memrec::viewer
