// The advice tab: what `memrec advise` finds (memrec/advise.h), one row a change, largest saving first. The selected
// change's evidence is marked on the timeline and, where a replay or a fit across sizes predicts it, its curve is
// drawn as a ghost line, as --scale-with's is.

#include <fmt/format.h>

#include "memrec/advise_output.h"
#include "memrec/units.h"
#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

// "advice 1 (replayed): peak 3.25 MiB allocated, 4 MiB reserved"
std::string ghost_label(size_t rank, const Advice& a) {
  return fmt::format("advice {} ({}): peak {}", rank, to_string(a.method), peaks_text(a.peak_after));
}

// What the ghost line shows for the selected change, or why there is none.
std::string curve_note(const Advice& a) {
  if (a.curve && a.method == AdviceMethod::scaled)
    return "ghost line: the run predicted at that size from the runs at other sizes (memrec whatif scale)";
  if (a.curve) return "ghost line: this run replayed with the change, event by event";
  return "no ghost line: no replay of this change exists; its saving counts the bytes it frees at the peak, an upper "
         "bound";
}

}  // namespace

// Computed once a document is shown in the tab: a replay per lever (and one for each curve), slow on a long run, so
// the frame before says so.
void AdviseView::update(const Document& doc) {
  if (result_ && made_of_.same(doc)) return;
  if (!asked_) {
    asked_ = true;
    return;
  }
  AdviseOptions options;
  options.curves = true;
  result_ = std::make_shared<const Advise>(advise(doc.snapshot, doc.device, options));
  made_of_ = MadeOf::of(doc);
  asked_ = false;
  selected_ = 0;
  marks_.reset();
}

void AdviseView::draw(const Document& doc, ViewState& state) {
  update(doc);
  if (!result_ || !made_of_.same(doc)) {
    ImGui::TextUnformatted("computing the advice: a replay of the run for each change...");
    return;
  }
  const Advise& a = *result_;
  ImGui::Text("recorded peak: %s; %zu change%s, largest saving first (memrec advise)", peaks_text(a.peak).c_str(),
              a.advice.size(), a.advice.size() == 1 ? "" : "s");
  if (a.advice.empty()) ImGui::TextUnformatted("no change found that lowers the peak");
  swatches_.clear();
  for (size_t i = 0; i < a.advice.size(); ++i) draw_row(i);
  if (!a.advice.empty()) {
    show(doc, state);
    ImGui::Separator();
    draw_selected(a.advice[selected_]);
  }
  for (const std::string& n : a.not_assessed) ImGui::TextDisabled("not assessed: %s", n.c_str());
}

// The selected change on the timeline: its blocks marked, its curve as the ghost line (set each frame: the app
// drops the ghost while another tab is shown).
void AdviseView::show(const Document& doc, ViewState& state) {
  const Advice& a = result_->advice[selected_];
  if (!marks_.current(state)) {
    std::span<const uint32_t> blocks(a.blocks);
    marks_.set(doc, state, {&blocks, 1}, {kEvidenceColor}, fmt::format("advice {}'s evidence", selected_ + 1));
  }
  state.ghost = a.curve ? std::shared_ptr<const ScaleCurve>(result_, &*a.curve) : nullptr;
  state.ghost_label = a.curve ? ghost_label(selected_ + 1, a) : "";
}

// One change: a swatch in the marks' color where selected, its rank, kind, saving, method and sentence.
void AdviseView::draw_row(size_t index) {
  const Advice& a = result_->advice[index];
  swatches_.push_back(draw_swatch(index == selected_ ? kEvidenceColor : ImGui::GetColorU32(ImGuiCol_TextDisabled)));
  std::string row = fmt::format("{}. [{}] saves {} ({})  {}##advice{}", index + 1, to_string(a.kind),
                                saves_text(a.saves), to_string(a.method), a.change, index);
  if (ImGui::Selectable(row.c_str(), index == selected_) && index != selected_) {
    selected_ = index;
    marks_.reset();
  }
}

// The selected change's evidence, its cost and what the ghost line is.
void AdviseView::draw_selected(const Advice& a) const {
  ImGui::Text("peak after: %s; %zu blocks marked on the timeline", peaks_text(a.peak_after).c_str(), marks_.marked());
  if (a.cost_ns) ImGui::Text("recompute cost: %s of kernel time", format_duration(*a.cost_ns).c_str());
  for (const Evidence& e : a.evidence) ImGui::Text("  %12s  %s", format_bytes(e.bytes).c_str(), e.what.c_str());
  ImGui::TextUnformatted(curve_note(a).c_str());
}

nlohmann::json AdviseView::layout() const {
  if (!result_) return nullptr;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < result_->advice.size() && i < swatches_.size(); ++i) {
    const Advice& a = result_->advice[i];
    rows.push_back({{"kind", to_string(a.kind)}, {"method", to_string(a.method)},
                    {"saves_allocated", a.saves.allocated},
                    {"saves_reserved", a.saves.reserved ? nlohmann::json(*a.saves.reserved) : nlohmann::json(nullptr)},
                    {"change", a.change}, {"blocks", a.blocks.size()}, {"curve", a.curve.has_value()},
                    {"x", swatches_[i].x}, {"y", swatches_[i].y}, {"size", kSwatch}});
  }
  return {{"rows", rows}, {"selected", selected_}, {"marked", marks_.marked()},
          {"marked_bytes", marks_.marked_bytes()}, {"color", kEvidenceColor},
          {"not_assessed", result_->not_assessed}};
}

}  // namespace memrec::viewer
