// The growth tab: what `memrec growth` finds (memrec/growth.h), drawn. A small chart of allocated and reserved at
// each step's start, the verdict and slope, and a legend of the growing sites; the blocks each site kept past their
// step are marked on the timeline in the site's color.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "memrec/units.h"
#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr float kChartHeight = 90;

std::string signed_bytes(double b) {
  return (b < 0 ? "-" : "+") + format_bytes(static_cast<uint64_t>(std::abs(b)));
}

// "grows: +512 KiB allocated, +512 KiB reserved a step from step 2; full at step 9,000 (in 3 min)"
std::string summary(const GrowthResult& g) {
  if (g.steps.empty()) return "no steps: the recording has no \"step N\" scopes and no phases to infer them from";
  std::string out(to_string(g.verdict));
  if (g.verdict == GrowthVerdict::too_few_steps) return out + fmt::format(" ({} steps)", g.steps.size());
  out += fmt::format(": {} allocated, {} reserved a step from step {}", signed_bytes(g.allocated_per_step),
                     signed_bytes(g.reserved_per_step), *g.settled_from);
  if (g.projected_full_step) out += fmt::format("; full at step {}", *g.projected_full_step);
  if (g.projected_full_in_s) out += fmt::format(" (in {})", format_duration(static_cast<int64_t>(*g.projected_full_in_s * 1e9)));
  return out;
}

}  // namespace

void GrowthView::update(const Document& doc) {
  if (result_ && made_of_.same(doc)) return;
  GrowthOptions options;
  options.device = doc.device;
  result_ = growth(doc.snapshot, options);
  made_of_ = MadeOf::of(doc);
  marks_.reset();
}

// Marks each growing site's blocks in its legend row's color; sites past the palette share its last color.
void GrowthView::mark(const Document& doc, ViewState& state) {
  if (marks_.current(state) || result_->growing.empty()) return;
  std::vector<std::span<const uint32_t>> sites;
  std::vector<uint32_t> palette;
  for (size_t i = 0; i < result_->growing.size(); ++i) {
    sites.emplace_back(result_->growing[i].blocks);
    if (i < kGrowthColors) palette.push_back(growth_color(i));
  }
  marks_.set(doc, state, sites, std::move(palette), "growing sites");
}

void GrowthView::draw(const Document& doc, ViewState& state) {
  update(doc);
  const GrowthResult& g = *result_;
  mark(doc, state);
  ImGui::TextUnformatted(summary(g).c_str());
  if (g.steps.empty()) return;
  draw_chart(g);
  draw_legend(g);
}

// Allocated (white) and reserved (orange) at each step's start, one point a step; a tick where the warm-up ends.
void GrowthView::draw_chart(const GrowthResult& g) {
  ImVec2 at = ImGui::GetCursorScreenPos();
  float w = std::max(100.0f, ImGui::GetContentRegionAvail().x - 8);
  chart_ = ImVec4(at.x, at.y, w, kChartHeight);
  ImDrawList* list = ImGui::GetWindowDrawList();
  list->AddRectFilled(at, ImVec2(at.x + w, at.y + kChartHeight), kPlotBackground);
  uint64_t top = 1;
  for (const GrowthStep& s : g.steps) top = std::max({top, s.allocated, s.reserved});
  auto x_of = [&](size_t k) { return at.x + 4 + (w - 8) * (g.steps.size() > 1 ? float(k) / float(g.steps.size() - 1) : 0.5f); };
  auto y_of = [&](uint64_t b) { return at.y + kChartHeight - 4 - (kChartHeight - 8) * float(double(b) / double(top)); };
  for (size_t k = 0; k < g.steps.size(); ++k) {
    if (g.settled_from && g.steps[k].step == *g.settled_from)
      list->AddLine(ImVec2(x_of(k), at.y), ImVec2(x_of(k), at.y + kChartHeight), ImGui::GetColorU32(ImGuiCol_TextDisabled));
    if (k == 0) continue;
    list->AddLine(ImVec2(x_of(k - 1), y_of(g.steps[k - 1].reserved)), ImVec2(x_of(k), y_of(g.steps[k].reserved)), kReservedColor, 2);
    list->AddLine(ImVec2(x_of(k - 1), y_of(g.steps[k - 1].allocated)), ImVec2(x_of(k), y_of(g.steps[k].allocated)), kAllocatedColor, 2);
  }
  list->AddText(ImVec2(at.x + 6, at.y + 2), kAllocatedColor,
                fmt::format("at each step's start: {} steps, up to {}", g.steps.size(), format_bytes(top)).c_str());
  ImGui::Dummy(ImVec2(w, kChartHeight + 4));
}

// One row a growing site: its color, bytes and blocks a step, the step it began, where.
void GrowthView::draw_legend(const GrowthResult& g) {
  swatches_.clear();
  for (size_t i = 0; i < g.growing.size(); ++i) {
    const GrowingGroup& site = g.growing[i];
    swatches_.push_back(draw_swatch(growth_color(std::min(i, kGrowthColors - 1))));
    ImGui::Text("%s a step  %.1f blocks  from step %llu  %s", format_bytes(static_cast<uint64_t>(site.bytes_per_step)).c_str(),
                site.blocks_per_step, static_cast<unsigned long long>(site.first_step), site.site.c_str());
  }
}

nlohmann::json GrowthView::layout() const {
  if (!result_) return nullptr;
  const GrowthResult& g = *result_;
  nlohmann::json legend = nlohmann::json::array();
  for (size_t i = 0; i < swatches_.size() && i < g.growing.size(); ++i)
    legend.push_back({{"site", g.growing[i].site}, {"bytes_per_step", g.growing[i].bytes_per_step},
                      {"blocks", g.growing[i].blocks.size()}, {"color", growth_color(std::min(i, kGrowthColors - 1))},
                      {"x", swatches_[i].x}, {"y", swatches_[i].y}, {"size", kSwatch}});
  return {{"verdict", std::string(to_string(g.verdict))}, {"steps", g.steps.size()}, {"marked", marks_.marked()},
          {"chart", {{"x", chart_.x}, {"y", chart_.y}, {"w", chart_.z}, {"h", chart_.w}}}, {"legend", legend}};
}

}  // namespace memrec::viewer
