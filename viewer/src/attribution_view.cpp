// Peak attribution: the memory live at the selected instant as a tree (by stack top-down or bottom-up, op, module
// or phase) or as one row per key (site, category, layer, pool: the keys of `memrec stats --by`), with bytes and
// share. Clicking a row highlights every block of that group along the timeline.
#include <fmt/format.h>

#include "memrec/viewer.h"

#include <unordered_map>

#include "memrec/units.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr size_t kMaxChildren = 64;  // per node; the rest is summed in one row

void highlight_group(const Document& doc, ViewState& state, uint32_t node) {
  const Attribution& at = *state.attribution;
  state.selected_node = node;
  state.set_highlight(blocks_under(doc, at, node), at.label(node));
}

void draw_row_values(const GroupNode& n, uint64_t total) {
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_bytes(n.bytes).c_str());
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

// Highlights the blocks whose key under `by` is `key`: keys depend on the stack, the scope or the category only,
// so each is computed once.
void highlight_key(const Document& doc, ViewState& state, GroupBy by, const Group& group) {
  const Replay& r = *doc.replay;
  std::vector<uint8_t> marks(r.allocations().size());
  if (by == GroupBy::pool) {
    std::vector<uint32_t> ids(marks.size());
    for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
    auto pools = pool_keys(doc.snapshot, r, ids);
    for (size_t i = 0; i < marks.size(); ++i) marks[i] = pools[i] == group.key;
  } else {
    bool by_category = by == GroupBy::category;
    std::unordered_map<uint64_t, uint8_t> memo;
    for (uint32_t i = 0; i < marks.size(); ++i) {
      Allocation a = r.allocations()[i];
      Category c = by_category ? doc.categories()[i] : Category::unknown;  // the other keys do not read it
      auto [it, fresh] = memo.try_emplace(group_source(doc.snapshot, a, by, c), 0);
      if (fresh) {
        std::string key = group_key(doc.snapshot, a, by, c);
        it->second = (key.empty() ? "<none>" : key) == group.key;
      }
      marks[i] = it->second;
    }
  }
  state.set_highlight(std::move(marks), group.key);
}

void draw_flat(const Document& doc, ViewState& state) {
  uint64_t total = state.attribution->root().bytes;
  for (size_t i = 0; i < state.flat_groups.size(); ++i) {
    const Group& g = state.flat_groups[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    bool selected = !state.highlight.empty() && state.highlight_reason == g.key;
    ImGui::PushID(static_cast<int>(i));
    if (ImGui::Selectable(g.key.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
      if (selected) state.clear_highlight();
      else highlight_key(doc, state, *state.flat, g);
    }
    ImGui::PopID();
    draw_row_values(GroupNode{.bytes = g.bytes, .blocks = g.count, .children = {}}, total);
  }
}

// The keys the panel offers: the trees, then the flat keys of `memrec stats --by`.
struct Choice {
  std::string name;
  Grouping tree;
  std::optional<GroupBy> flat;
};

std::vector<Choice> choices() {
  std::vector<Choice> out;
  for (int i = 0; i < kGroupingCount; ++i)
    out.push_back({std::string(to_string(static_cast<Grouping>(i))), static_cast<Grouping>(i), std::nullopt});
  for (GroupBy by : {GroupBy::stack, GroupBy::category, GroupBy::layer, GroupBy::pool})
    out.push_back({by == GroupBy::stack ? "site" : std::string(to_string(by)), Grouping::stack_top_down, by});
  return out;
}

void draw_choice(const Document& doc, ViewState& state) {
  auto all = choices();
  auto current = std::find_if(all.begin(), all.end(), [&](const Choice& c) {
    return c.flat == state.flat && (state.flat || c.tree == state.grouping);
  });
  ImGui::SetNextItemWidth(150);
  if (!ImGui::BeginCombo("group by", current == all.end() ? "" : current->name.c_str())) return;
  for (auto it = all.begin(); it != all.end(); ++it)
    if (ImGui::Selectable(it->name.c_str(), it == current) && it != current) {
      if (!it->flat) state.grouping = it->tree;
      state.flat = it->flat;
      state.clear_highlight();
      state.regroup(doc);
    }
  ImGui::EndCombo();
}

// What the timeline's colors mean.
void draw_legend() {
  auto swatch = [](uint32_t color, const char* text) {
    ImVec2 p = ImGui::GetCursorScreenPos();
    float h = ImGui::GetTextLineHeight();
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + h - 4, p.y + h - 2), color);
    ImGui::Dummy(ImVec2(h - 2, h));
    ImGui::SameLine(0, 2);
    ImGui::TextUnformatted(text);
    ImGui::SameLine();
  };
  swatch(band_palette()[0], "block (hue: call stack)");
  swatch(kAllocatedColor, "allocated");
  swatch(kReservedColor, "reserved");
  swatch(kPeakColor, "peak");
  swatch(kSelectedColor, "selected instant");
  ImGui::NewLine();
}

}  // namespace

std::vector<uint8_t> blocks_under(const Document& doc, const Attribution& at, uint32_t node) {
  GroupMatcher matches(doc.snapshot, *doc.replay, at.grouping(), at.frames(), at.path(node));
  std::vector<uint8_t> marks(doc.replay->allocations().size());
  for (uint32_t i = 0; i < marks.size(); ++i) marks[i] = matches(i);
  return marks;
}

void draw_attribution(const Document& doc, ViewState& state) {
  state.group(doc);
  draw_legend();
  draw_choice(doc, state);
  ImGui::SameLine();
  ImGui::Text("| %s: %s in %llu blocks", describe_instant(doc, state).c_str(),
              format_bytes(state.attribution->root().bytes).c_str(),
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
  if (state.flat) draw_flat(doc, state);
  else draw_node(doc, state, 0);
  ImGui::EndTable();
}

}  // namespace memrec::viewer
