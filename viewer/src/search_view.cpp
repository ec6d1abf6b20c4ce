// Search/filter: highlights every block whose stack has a frame (function or file) or whose enclosing scopes
// (op, module, phase) have a name containing the text. Matching is decided once per frame, stack and scope.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "views.h"

namespace memrec::viewer {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b)); });
  return it != haystack.end();
}

std::vector<uint8_t> search(const Snapshot& s, const Allocations& allocs, const std::string& text) {
  std::vector<uint8_t> string_hit(s.strings.size());
  for (size_t i = 1; i < s.strings.size(); ++i) string_hit[i] = contains(s.strings[static_cast<uint32_t>(i)], text);
  std::vector<uint8_t> stack_hit(s.stacks.size());
  for (uint32_t st = 0; st < s.stacks.size(); ++st)
    for (uint32_t f : s.stacks[st])
      if (string_hit[s.frames[f].function] || string_hit[s.frames[f].file]) stack_hit[st] = 1;
  // Parents come before children, so one pass settles each scope from its parent.
  std::vector<uint8_t> scope_hit(s.scopes.size());
  for (uint32_t sc = 1; sc < s.scopes.size(); ++sc) {
    uint32_t p = s.scopes[sc].parent;
    scope_hit[sc] = string_hit[s.scopes[sc].name] || (p < sc && scope_hit[p]);
  }
  std::vector<uint8_t> marks(allocs.size());
  for (uint32_t i = 0; i < allocs.size(); ++i) {
    Allocation a = allocs[i];
    marks[i] = (a.stack < stack_hit.size() && stack_hit[a.stack]) || (a.scope < scope_hit.size() && scope_hit[a.scope]);
  }
  return marks;
}

}  // namespace

void SearchView::draw(const Document& doc, ViewState& state) {
  ImGui::SetNextItemWidth(320);
  bool entered = ImGui::InputTextWithHint("##search", "search frames, files, ops, modules (Enter)", text_,
                                          sizeof(text_), ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  bool clear = ImGui::Button("clear");
  if (entered && text_[0]) {
    auto marks = search(doc.snapshot, doc.replay->allocations(), text_);
    size_t n = std::count(marks.begin(), marks.end(), 1);
    state.set_highlight(std::move(marks), fmt::format("\"{}\": {} blocks", text_, n));
    state.search = text_;
  }
  if (clear || (entered && !text_[0])) {
    text_[0] = 0;
    state.clear_highlight();
    state.search.clear();
  }
  ImGui::SameLine();
  if (!state.highlight.empty()) ImGui::Text("highlighted: %s", state.highlight_reason.c_str());
  else ImGui::TextDisabled("W/S zoom  A/D pan  wheel zoom  drag pan  F fit peak  0 fit all  click: inspect");
}

}  // namespace memrec::viewer
