// Peak attribution: the memory live at the selected instant as a tree (by stack top-down or bottom-up, op, module
// or phase) with bytes and share. Clicking a row highlights every block of that group along the timeline.
#include <fmt/format.h>

#include "units.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr size_t kMaxChildren = 64;  // per node; the rest is summed in one row

void highlight_group(const Document& doc, ViewState& state, uint32_t node) {
  const Attribution& at = *state.attribution;
  GroupMatcher matches(doc.snapshot, at.grouping(), at.path(node));
  const auto& allocs = doc.replay->allocations();
  std::vector<uint8_t> marks(allocs.size());
  for (size_t i = 0; i < allocs.size(); ++i) marks[i] = matches(allocs[i]);
  state.selected_node = node;
  state.set_highlight(std::move(marks), at.label(node));
}

void draw_row_values(const GroupNode& n, uint64_t total) {
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(human_bytes(n.bytes).c_str());
  ImGui::TableNextColumn();
  ImGui::Text("%5.1f%%", total ? 100.0 * static_cast<double>(n.bytes) / static_cast<double>(total) : 0.0);
  ImGui::TableNextColumn();
  ImGui::Text("%llu", static_cast<unsigned long long>(n.blocks));
}

void draw_node(const Document& doc, ViewState& state, uint32_t id) {
  const Attribution& at = *state.attribution;
  const GroupNode& n = at.nodes()[id];
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGuiTreeNodeFlags flags = ImGuiTreeNodeFlags_SpanFullWidth | ImGuiTreeNodeFlags_OpenOnArrow;
  if (n.children.empty()) flags |= ImGuiTreeNodeFlags_Leaf | ImGuiTreeNodeFlags_NoTreePushOnOpen;
  if (id == state.selected_node && !state.highlight.empty()) flags |= ImGuiTreeNodeFlags_Selected;
  // The largest path opens by default down to a few levels: at a glance it names who holds the most.
  if (n.depth < 3 && (id == 0 || at.nodes()[n.parent].children.front() == id)) ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  bool open = ImGui::TreeNodeEx(reinterpret_cast<void*>(static_cast<uintptr_t>(id)), flags, "%s", at.label(id).c_str());
  if (ImGui::IsItemClicked() && !ImGui::IsItemToggledOpen()) {
    if (id == state.selected_node && !state.highlight.empty()) state.clear_highlight();
    else highlight_group(doc, state, id);
  }
  draw_row_values(n, at.root().bytes);
  if (!open || n.children.empty()) return;
  size_t shown = std::min(n.children.size(), kMaxChildren);
  for (size_t i = 0; i < shown; ++i) draw_node(doc, state, n.children[i]);
  if (shown < n.children.size()) {
    GroupNode rest;
    for (size_t i = shown; i < n.children.size(); ++i) {
      rest.bytes += at.nodes()[n.children[i]].bytes;
      rest.blocks += at.nodes()[n.children[i]].blocks;
    }
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("%zu more groups", n.children.size() - shown);
    draw_row_values(rest, at.root().bytes);
  }
  ImGui::TreePop();
}

}  // namespace

void draw_attribution(const Document& doc, ViewState& state) {
  if (!state.attribution) state.set_instant(doc, state.instant);
  int g = static_cast<int>(state.grouping);
  ImGui::SetNextItemWidth(170);
  if (ImGui::BeginCombo("group by", std::string(to_string(state.grouping)).c_str())) {
    for (int i = 0; i < kGroupingCount; ++i)
      if (ImGui::Selectable(std::string(to_string(static_cast<Grouping>(i))).c_str(), i == g)) g = i;
    ImGui::EndCombo();
  }
  if (g != static_cast<int>(state.grouping)) {
    state.grouping = static_cast<Grouping>(g);
    state.attribution.reset();
    state.set_instant(doc, state.instant);
  }
  ImGui::SameLine();
  const Timeline& tl = *doc.timeline;
  bool at_peak = state.instant == doc.replay->peak_allocated().step;
  ImGui::Text("live at %s%s: %s in %llu blocks", human_duration(tl.time_of(state.instant) - tl.begin_ns()).c_str(),
              at_peak ? " (peak)" : "", human_bytes(state.attribution->root().bytes).c_str(),
              static_cast<unsigned long long>(state.attribution->root().blocks));
  ImGuiTableFlags flags = ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                          ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("attribution", 4, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("group", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("bytes", ImGuiTableColumnFlags_WidthFixed, 80);
  ImGui::TableSetupColumn("share", ImGuiTableColumnFlags_WidthFixed, 52);
  ImGui::TableSetupColumn("blocks", ImGuiTableColumnFlags_WidthFixed, 56);
  ImGui::TableHeadersRow();
  draw_node(doc, state, 0);
  ImGui::EndTable();
}

}  // namespace memrec::viewer
