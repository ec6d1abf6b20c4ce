// Flame graph (an icicle, root on top): one box per group of the attribution tree, as wide as its bytes, each
// child under its parent, largest first. It shows the memory live at the instant (following it) or the bytes
// allocated in a time range. A click zooms into a box, whose ancestors stay above it as full-width rows; the search
// text highlights the boxes it names; hovering gives bytes, share and block count. The module view is the same
// graph over the module tree, each box split by category, a click also highlighting its blocks on the timeline.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "memrec/units.h"
#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr float kRowHeight = 18;
constexpr float kMinTextWidth = 36;

bool contains_nocase(const std::string& haystack, const std::string& needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != haystack.end();
}

// The allocations (ids) whose alloc event lies in [t0, t1] ns after the first event: ids after the pre-existing
// blocks are in allocation order, so the range is one binary search each side.
std::vector<uint32_t> allocated_between(const Document& doc, int64_t t0, int64_t t1) {
  const Timeline& tl = *doc.timeline;
  const auto& steps = doc.replay->alloc_steps();
  uint32_t before = tl.step_at(tl.begin_ns() + t0 - 1), last = tl.step_at(tl.begin_ns() + t1);
  uint32_t first = before == kNoEvent ? 0 : before + 1;
  auto born = std::partition_point(steps.begin(), steps.end(), [](uint32_t s) { return s == kNoEvent; });
  auto lo = std::lower_bound(born, steps.end(), first);
  auto hi = last == kNoEvent ? lo : std::upper_bound(lo, steps.end(), last);
  std::vector<uint32_t> ids(static_cast<size_t>(hi - lo));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>(lo - steps.begin() + static_cast<std::ptrdiff_t>(i));
  return ids;
}

uint32_t key_color(const Document& doc, Grouping g, uint32_t key) {
  if (key == kMissing) return 0xFF707070u;
  bool stack = g == Grouping::stack_top_down || g == Grouping::stack_bottom_up;
  return name_color(stack ? doc.snapshot.frames[key].function : key);
}

uint32_t dimmed(uint32_t c) { return (c & 0x00FFFFFFu) | 0x50000000u; }

}  // namespace

float FlameView::row_height() { return kRowHeight; }

std::string describe_instant(const Document& doc, const ViewState& state) {
  const Timeline& tl = *doc.timeline;
  bool at_peak = state.instant == doc.replay->peak_allocated().step;
  return fmt::format("live at {}{}", format_duration(tl.time_of(state.instant) - tl.begin_ns()), at_peak ? " (peak)" : "");
}

// The tree of the instant is the attribution panel's (ViewState keeps it); that of a range, and the module tree,
// are built here.
void FlameView::update_tree(const Document& doc, const ViewState& state) {
  bool ranged = state.range.has_value();
  bool own = ranged || mode_ == Mode::modules;
  Grouping grouping = mode_ == Mode::modules ? Grouping::module : state.grouping;
  bool same = built_doc_ == doc.id && built_device_ == doc.device && built_ranged_ == ranged &&
              (ranged ? built_range_ == *state.range && built_grouping_ == grouping && built_frames_ == state.frames
                      : built_version_ == state.attribution_version);
  if (same && tree_) return;
  if (own) {
    std::vector<uint32_t> ids;
    if (ranged) ids = allocated_between(doc, state.range->first, state.range->second);
    else doc.timeline->live_at(state.instant, ids);
    own_tree_.emplace(doc.snapshot, *doc.replay, ids, grouping, state.frames);
    tree_ = &*own_tree_;
    if (mode_ == Mode::modules) count_categories(doc, ids);
    if (ranged) built_range_ = *state.range;
  } else {
    own_tree_.reset();
    tree_ = &*state.attribution;
  }
  built_doc_ = doc.id;
  built_device_ = doc.device;
  built_ranged_ = ranged;
  built_grouping_ = grouping;
  built_frames_ = state.frames;
  built_version_ = state.attribution_version;
  labels_.assign(tree_->nodes().size(), std::string());
  searched_.clear();
  // Keep the zoom on the same group where the new tree has it (following the instant), else its deepest ancestor.
  zoom_ = 0;
  for (uint32_t key : zoom_path_) {
    const auto& children = tree_->nodes()[zoom_].children;
    auto it = std::find_if(children.begin(), children.end(), [&](uint32_t c) { return tree_->nodes()[c].key == key; });
    if (it == children.end()) break;
    zoom_ = *it;
  }
  laid_width_ = -1;
}

// Each block's bytes go to its leaf and every ancestor, under the block's category.
void FlameView::count_categories(const Document& doc, std::span<const uint32_t> ids) {
  category_bytes_.assign(tree_->nodes().size(), {});
  const auto& categories = doc.categories();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto c = static_cast<size_t>(categories[ids[i]]);
    uint64_t size = doc.replay->size_of(ids[i]);
    for (uint32_t n = tree_->leaves()[i];; n = tree_->nodes()[n].parent) {
      category_bytes_[n][c] += size;
      if (n == 0) break;
    }
  }
}

const std::string& FlameView::label(uint32_t node) {
  if (labels_[node].empty()) labels_[node] = tree_->label(node);
  return labels_[node];
}

void FlameView::update_search(const std::string& text) {
  if (text == searched_) return;
  searched_ = text;
  hits_.assign(tree_->nodes().size(), 0);
  if (text.empty()) return;
  for (uint32_t n = 1; n < hits_.size(); ++n) hits_[n] = contains_nocase(label(n), text);
}

// Boxes narrower than a pixel are left out with their subtrees: the count stays below width x depth.
void FlameView::place(uint32_t node, uint32_t depth, float x0, double scale) {
  const GroupNode& n = tree_->nodes()[node];
  auto w = static_cast<float>(static_cast<double>(n.bytes) * scale);
  if (w < 1 && node != zoom_) return;
  boxes_.push_back(Box{node, depth, x0, x0 + w});
  rows_ = std::max(rows_, depth + 1);
  double x = x0;
  for (uint32_t c : n.children) {
    place(c, depth + 1, static_cast<float>(x), scale);
    x += static_cast<double>(tree_->nodes()[c].bytes) * scale;
  }
}

void FlameView::lay_out(float width) {
  if (width == laid_width_) return;
  laid_width_ = width;
  boxes_.clear();
  rows_ = 0;
  std::vector<uint32_t> chain;
  for (uint32_t n = zoom_; n != 0; n = tree_->nodes()[n].parent) chain.push_back(n);
  chain.push_back(0);
  std::reverse(chain.begin(), chain.end());
  for (size_t d = 0; d + 1 < chain.size(); ++d) boxes_.push_back(Box{chain[d], static_cast<uint32_t>(d), 0, width});
  const GroupNode& z = tree_->nodes()[zoom_];
  place(zoom_, static_cast<uint32_t>(chain.size() - 1), 0, z.bytes ? width / static_cast<double>(z.bytes) : 0);
  rows_ = std::max<uint32_t>(rows_, static_cast<uint32_t>(chain.size()));
}

void FlameView::zoom_to(uint32_t node) {
  zoom_ = node;
  zoom_path_ = tree_->path(node);
  laid_width_ = -1;
}

// The module view's key: one swatch per category.
void draw_category_legend() {
  ImDrawList* list = ImGui::GetWindowDrawList();
  for (int c = 0; c < kCategoryCount; ++c) {
    ImVec2 p = ImGui::GetCursorScreenPos();
    float h = ImGui::GetTextLineHeight();
    list->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + h - 4, p.y + h - 2), category_color(static_cast<Category>(c)));
    ImGui::Dummy(ImVec2(h - 2, h));
    ImGui::SameLine(0, 2);
    ImGui::TextUnformatted(std::string(to_string(static_cast<Category>(c))).c_str());
    ImGui::SameLine();
  }
  ImGui::NewLine();
}

// The grouping of the tree and whether its stacks are folded.
void FlameView::draw_grouping_choice(const Document& doc, ViewState& state) {
  int g = static_cast<int>(state.grouping);
  ImGui::SetNextItemWidth(150);
  if (ImGui::BeginCombo("##flame grouping", std::string(to_string(state.grouping)).c_str())) {
    for (int i = 0; i < kGroupingCount; ++i)
      if (ImGui::Selectable(std::string(to_string(static_cast<Grouping>(i))).c_str(), i == g)) g = i;
    ImGui::EndCombo();
  }
  // Folded by default: the interpreter, libc and dispatcher frames would fill the top rows of every stack.
  bool all = state.frames == Frames::all;
  ImGui::SameLine();
  bool toggled = ImGui::Checkbox("every frame", &all);
  if (g == static_cast<int>(state.grouping) && !toggled) return;
  state.grouping = static_cast<Grouping>(g);
  state.frames = all ? Frames::all : Frames::user;
  state.regroup(doc);
  zoom_path_.clear();
}

void FlameView::draw_header(const Document& doc, ViewState& state) {
  if (mode_ == Mode::modules) draw_category_legend();
  else draw_grouping_choice(doc, state);
  ImGui::SameLine();
  bool ranged = state.range.has_value();
  if (ImGui::RadioButton("instant", !ranged)) state.range.reset();
  ImGui::SameLine();
  // The range is the timeline's visible span when chosen here.
  if (ImGui::RadioButton("allocated in view", ranged) && !ranged)
    state.range = {static_cast<int64_t>(std::max(0.0, state.t0)), static_cast<int64_t>(state.t1())};
  ImGui::SameLine();
  const GroupNode& root = tree_ ? tree_->root() : GroupNode{};
  std::string what = state.range ? fmt::format("allocated in {} .. {}", format_duration(state.range->first),
                                               format_duration(state.range->second))
                                 : describe_instant(doc, state);
  ImGui::Text("| %s: %s in %llu blocks", what.c_str(), format_bytes(root.bytes).c_str(),
              static_cast<unsigned long long>(root.blocks));
  if (zoom_ != 0) {
    ImGui::SameLine();
    if (ImGui::SmallButton("zoom out")) zoom_to(0);
  }
}

// A box in its group's color; in the module view, split from the left by category in proportion to the bytes.
void FlameView::draw_box(const Document& doc, uint32_t node, ImVec2 a, ImVec2 z, bool dim) {
  ImDrawList* list = ImGui::GetWindowDrawList();
  auto fill = [&](float x0, float x1, uint32_t color) { list->AddRectFilled(ImVec2(x0, a.y), ImVec2(x1, z.y), dim ? dimmed(color) : color); };
  const GroupNode& n = tree_->nodes()[node];
  if (mode_ != Mode::modules || n.bytes == 0) {
    fill(a.x, z.x, node == 0 ? 0xFF606060u : key_color(doc, tree_->grouping(), n.key));
    return;
  }
  double x = a.x, scale = (z.x - a.x) / static_cast<double>(n.bytes);
  for (int c = 0; c < kCategoryCount; ++c) {
    double w = static_cast<double>(category_bytes_[node][c]) * scale;
    if (w > 0) fill(static_cast<float>(x), static_cast<float>(x + w), category_color(static_cast<Category>(c)));
    x += w;
  }
}

// The module view's click: the node's blocks stand out along the timeline.
void FlameView::highlight_blocks(const Document& doc, ViewState& state, uint32_t node) {
  if (node == 0) return state.clear_highlight();
  state.set_highlight(blocks_under(doc, *tree_, node), label(node));
}

void FlameView::draw(const Document& doc, ViewState& state) {
  state.group(doc);
  update_tree(doc, state);
  draw_header(doc, state);
  update_tree(doc, state);  // the header may have changed the mode or grouping
  update_search(state.search);
  if (!ImGui::BeginChild("boxes")) {
    ImGui::EndChild();
    return;
  }
  float width = std::max(16.0f, std::floor(ImGui::GetContentRegionAvail().x));
  lay_out(width);
  ImVec2 p = ImGui::GetCursorScreenPos();
  origin_ = ImVec2(std::floor(p.x), std::floor(p.y));
  float height = std::max(ImGui::GetContentRegionAvail().y, static_cast<float>(rows_) * kRowHeight);
  ImGui::InvisibleButton("##flame", ImVec2(width, height));
  bool hovered = ImGui::IsItemHovered();
  bool clicked = ImGui::IsItemClicked();
  ImDrawList* list = ImGui::GetWindowDrawList();
  ImVec2 clip0 = ImGui::GetWindowPos(), clip1 = ImVec2(clip0.x + ImGui::GetWindowWidth(), clip0.y + ImGui::GetWindowHeight());
  ImGuiIO& io = ImGui::GetIO();
  const Box* under = nullptr;
  bool searching = !state.search.empty();
  for (const Box& b : boxes_) {
    ImVec2 a(origin_.x + b.x0, origin_.y + static_cast<float>(b.depth) * kRowHeight);
    ImVec2 z(origin_.x + b.x1, a.y + kRowHeight - 1);
    if (z.y < clip0.y || a.y > clip1.y) continue;
    // A pixel of background between neighbours where there is room for it.
    draw_box(doc, b.node, a, ImVec2(b.x1 - b.x0 >= 3 ? z.x - 1 : z.x, z.y), searching && !hits_[b.node]);
    if (b.x1 - b.x0 >= kMinTextWidth) {
      ImVec4 clip(a.x + 2, a.y, z.x - 2, z.y);
      list->AddText(nullptr, 0, ImVec2(a.x + 3, a.y + 2), 0xFF000000u, label(b.node).c_str(), nullptr, 0, &clip);
    }
    if (hovered && io.MousePos.x >= a.x && io.MousePos.x < z.x && io.MousePos.y >= a.y && io.MousePos.y < z.y + 1) under = &b;
  }
  if (under) {
    const GroupNode& n = tree_->nodes()[under->node];
    uint64_t total = tree_->root().bytes;
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(label(under->node).c_str());
    ImGui::Text("%s (%llu bytes), %.1f%% of %s, %llu blocks", format_bytes(n.bytes).c_str(),
                static_cast<unsigned long long>(n.bytes), total ? 100.0 * static_cast<double>(n.bytes) / static_cast<double>(total) : 0.0,
                format_bytes(total).c_str(), static_cast<unsigned long long>(n.blocks));
    if (mode_ == Mode::modules)
      for (int c = 0; c < kCategoryCount; ++c)
        if (uint64_t bytes = category_bytes_[under->node][c])
          ImGui::Text("  %s: %s", std::string(to_string(static_cast<Category>(c))).c_str(), format_bytes(bytes).c_str());
    ImGui::TextDisabled(under->node == zoom_ && zoom_ != 0 ? "click: zoom out" : "click: zoom in");
    ImGui::EndTooltip();
    if (clicked) {
      uint32_t node = under->node == zoom_ && zoom_ != 0 ? tree_->nodes()[zoom_].parent : under->node;
      zoom_to(node);
      if (mode_ == Mode::modules) highlight_blocks(doc, state, node);
    }
  }
  ImGui::EndChild();
}

}  // namespace memrec::viewer
