// The memory timeline: every live block stacked as a band (oldest at the bottom), the allocated total as a white
// line on top, reserved as an orange line, the peak as a red marker. Painted per pixel column into one texture from
// the Timeline's level-of-detail structures; panning repaints only the columns that scrolled in. With --scale-with,
// the prediction at another size is drawn over it as dashed ghost lines.
#include <GLFW/glfw3.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "memrec/sites.h"
#include "memrec/units.h"
#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr float kAxisWidth = 76;   // y labels
constexpr float kAxisHeight = 18;  // x labels
// Repainting columns stops for the frame after this long; the rest follow in the next frames.
constexpr std::chrono::microseconds kPaintBudget{2000};

uint32_t dim(uint32_t c) {
  // A quarter of the color over the background: keeps the shape visible behind the highlighted blocks.
  auto mix = [&](int shift) {
    uint32_t a = (c >> shift) & 0xFF, b = (kPlotBackground >> shift) & 0xFF;
    return ((a + 3 * b) / 4) << shift;
  };
  return 0xFF000000u | mix(0) | mix(8) | mix(16);
}

// "size 8 (predicted): peak 3.25 MiB allocated, 4 MiB reserved"
std::string ghost_label(const ScalePrediction& p) {
  std::string out = fmt::format("size {} (predicted): peak {} allocated", p.size, format_bytes(p.peak_allocated));
  if (p.peak_reserved) out += fmt::format(", {} reserved", format_bytes(*p.peak_reserved));
  return out;
}

std::optional<Ghost> ghost_of(const Document& doc, const ViewState& state) {
  if (state.ghost && !state.ghost->time_ns.empty()) return Ghost{state.ghost, state.ghost_label, std::nullopt, nullptr};
  if (!doc.ghost || doc.ghost->predictions.empty()) return std::nullopt;
  const ScalePrediction& p = doc.ghost->predictions.front();
  if (!p.curve || p.curve->time_ns.empty()) return std::nullopt;
  Ghost g{std::shared_ptr<const ScaleCurve>(doc.ghost, &*p.curve), ghost_label(p), std::nullopt, &p};
  if (p.oom.value_or(false)) g.limit = doc.ghost->memory.bytes;
  return g;
}

// The highest bytes a ghost draws: its curve's, its prediction's peaks and the device's memory where it runs out.
uint64_t ghost_top(const Ghost& g) {
  const ScaleCurve& c = *g.curve;
  uint64_t top = std::max(*std::max_element(c.allocated.begin(), c.allocated.end()), g.limit.value_or(0));
  if (!c.reserved.empty()) top = std::max(top, *std::max_element(c.reserved.begin(), c.reserved.end()));
  if (g.scaled) top = std::max({top, g.scaled->peak_allocated, g.scaled->peak_reserved.value_or(0)});
  return top;
}

// Ghost lines are dashed by whole columns, on the absolute column grid so that the dashes stay put while panning.
bool dash_on(int64_t column) { return ((column % 12) + 12) % 12 < 8; }

}  // namespace

void TimelineView::draw(Document& doc, ViewState& state, float height) {
  const Timeline& tl = *doc.timeline;
  ImVec2 origin = ImGui::GetCursorScreenPos();
  float avail = ImGui::GetContentRegionAvail().x;
  int width = std::max(16, static_cast<int>(avail - kAxisWidth));
  int rows = std::max(16, static_cast<int>(height - kAxisHeight - device_band_height(doc)));
  bool resized = image_.resize(width, rows);
  rows_.resize(rows);
  column_step_.resize(width, kNoEvent);

  double dt = state.span / width;
  auto first = static_cast<int64_t>(std::floor(state.t0 / dt));
  grid_ = ColumnGrid{std::floor(origin.x + kAxisWidth), std::floor(origin.y), width, first, first * dt, dt, tl.begin_ns()};
  double per_row = static_cast<double>(plot_max_bytes(doc, state)) / rows;

  stale_.resize(width, 1);
  bool same_source = !resized && cached_highlight_ == state.highlight_version && cached_doc_ == doc.id &&
                     cached_device_ == doc.device && per_row == bytes_per_row_;
  bytes_per_row_ = per_row;
  if (!same_source) {
    std::fill(stale_.begin(), stale_.end(), 1);
  } else if (dt != cached_dt_) {
    resample(first, dt);
  } else if (first != cached_first_) {
    scroll(first - cached_first_);
  }
  cached_first_ = first;
  cached_dt_ = dt;
  cached_highlight_ = state.highlight_version;
  cached_doc_ = doc.id;
  cached_device_ = doc.device;
  refine(doc, state, first);

  ImDrawList* list = ImGui::GetWindowDrawList();
  image_.draw(list, ImVec2(grid_.x, grid_.y));
  draw_overlay(doc, state, list);
  if (std::optional<Ghost> ghost = ghost_of(doc, state)) draw_ghost(*ghost, list);
  draw_device_band(doc, grid_, list, grid_.y + rows + kAxisHeight);

  ImGui::SetCursorScreenPos(ImVec2(grid_.x, grid_.y));
  ImGui::InvisibleButton("##timeline", ImVec2(static_cast<float>(width), static_cast<float>(rows)));
  bool hovered = ImGui::IsItemHovered();
  bool clicked = ImGui::IsItemDeactivated() && ImGui::GetIO().MouseDragMaxDistanceSqr[0] < 9;
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + height));
  handle_input(doc, state, hovered, clicked);
}

// Zoomed: stretch the old columns to the new scale as a stand-in, then repaint them all over the next frames.
void TimelineView::resample(int64_t first, double dt) {
  std::vector<uint32_t> old = image_.pixels();
  std::vector<uint32_t> old_steps = column_step_;
  int w = image_.width();
  for (int i = 0; i < w; ++i) {
    auto j = static_cast<int64_t>(std::floor((first + i + 0.5) * dt / cached_dt_)) - cached_first_;
    bool inside = j >= 0 && j < w;
    for (int y = 0; y < image_.height(); ++y)
      image_.at(i, y) = inside ? old[static_cast<size_t>(y) * w + j] : kPlotBackground;
    column_step_[i] = inside ? old_steps[j] : kNone;
  }
  std::fill(stale_.begin(), stale_.end(), 1);
  image_.mark_changed();
}

// Panned by whole columns: keep the ones still visible, blank and repaint the ones that scrolled in.
void TimelineView::scroll(int64_t shift) {
  int w = image_.width();
  if (std::abs(shift) >= w) {
    std::fill(stale_.begin(), stale_.end(), 1);
    return;
  }
  image_.shift_left(static_cast<int>(shift));
  auto rotate = [&](auto& v) {
    if (shift > 0) std::rotate(v.begin(), v.begin() + shift, v.end());
    else std::rotate(v.rbegin(), v.rbegin() - shift, v.rend());
  };
  rotate(column_step_);
  rotate(stale_);
  int from = shift > 0 ? w - static_cast<int>(shift) : 0, to = shift > 0 ? w : static_cast<int>(-shift);
  for (int i = from; i < to; ++i) {
    stale_[i] = 1;
    for (int y = 0; y < image_.height(); ++y) image_.at(i, y) = kPlotBackground;
  }
}

// Repaints stale columns until the frame's time budget is spent: a frame's cost stays bounded at any zoom.
void TimelineView::refine(const Document& doc, const ViewState& state, int64_t first) {
  auto start = std::chrono::steady_clock::now();
  bool painted = false;
  for (int i = 0, n = 0; i < image_.width(); ++i) {
    if (!stale_[i]) continue;
    paint_column(doc, state, i, first + i);
    stale_[i] = 0;
    painted = true;
    if (++n % 16 == 0 && std::chrono::steady_clock::now() - start > kPaintBudget) break;
  }
  if (painted) image_.mark_changed();
}

bool TimelineView::complete() const { return std::find(stale_.begin(), stale_.end(), 1) == stale_.end(); }

void TimelineView::paint_column(const Document& doc, const ViewState& state, int i, int64_t column) {
  const Timeline& tl = *doc.timeline;
  int rows = image_.height();
  int64_t t0 = grid_.absolute(column * grid_.dt), t1 = grid_.absolute((column + 1) * grid_.dt);
  if (tl.steps() == 0 || t1 <= tl.begin_ns() || t0 > tl.end_ns()) {
    column_step_[i] = kNone;
    for (int y = 0; y < rows; ++y) image_.at(i, y) = kPlotBackground;
    return;
  }
  // The column shows its highest state: peaks survive any zoom.
  Envelope e = tl.envelope(t0, std::max(t1, t0 + 1));
  column_step_[i] = e.peak_step;
  tl.stack_rows(e.peak_step, bytes_per_row_, rows_, scratch_);
  bool highlighting = !state.highlight.empty();
  uint32_t c = kPlotBackground;
  for (int r = 0; r < rows; ++r) {
    uint32_t id = rows_[r];
    if (r == 0 || id != rows_[r - 1]) {  // a block spans many rows: look it up once
      c = kPlotBackground;
      if (id != kNone) {
        c = band_color(doc.replay->stack_of(id), id);
        if (uint8_t mark = highlighting ? state.highlight[id] : 1; !mark) c = dim(c);
        else if (highlighting && !state.highlight_palette.empty()) c = state.highlight_palette[mark - 1];
      }
    }
    image_.at(i, rows - 1 - r) = c;
  }
  // Reserved is drawn above the allocated line only, so it never hides a band.
  int top = row_of(e.allocated_max);
  for (int r = std::max(row_of(e.reserved_min), top + 1); r <= row_of(e.reserved_max); ++r)
    image_.at(i, rows - 1 - r) = kReservedColor;
  if (e.allocated_max > 0) image_.at(i, rows - 1 - top) = kAllocatedColor;
}

void TimelineView::draw_overlay(const Document& doc, const ViewState& state, ImDrawList* list) {
  const Timeline& tl = *doc.timeline;
  float x0 = grid_.x, y0 = grid_.y, x1 = x0 + image_.width(), y1 = y0 + image_.height();
  ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  double max_bytes = bytes_per_row_ * image_.height();
  // Ticks outside the plot: inside it every pixel is data, with its exact color.
  for (int k = 1; k <= 4; ++k) {
    float y = std::floor(y1 - (y1 - y0) * k / 4.0f) + 0.5f;
    list->AddLine(ImVec2(x0 - 5, y), ImVec2(x0, y), text);
    std::string label = format_bytes(static_cast<uint64_t>(max_bytes * k / 4), Digits::compact);
    list->AddText(ImVec2(x0 - kAxisWidth + 2, y), text, label.c_str());
  }
  for (int k = 0; k <= 5; ++k) {
    float x = std::floor(x0 + (x1 - x0) * k / 5.0f) + 0.5f;
    list->AddLine(ImVec2(x, y1), ImVec2(x, y1 + 4), text);
    std::string label = format_duration(static_cast<int64_t>(grid_.time_at(x)), Digits::compact);
    list->AddText(ImVec2(x + 2, y1 + 2), text, label.c_str());
  }
  auto marker = [&](int64_t t, ImU32 color, const std::string& label) {
    float x = grid_.x_of(t);
    if (x < x0 || x >= x1) return;
    list->AddRectFilled(ImVec2(x, y0), ImVec2(x + 1, y1), color);  // exactly one pixel column, no smoothing
    list->AddText(ImVec2(x + 3, y0 + 2), color, label.c_str());
  };
  if (state.instant != doc.replay->peak_allocated().step)
    marker(tl.time_of(state.instant), kSelectedColor, "selected");
  const Peak& peak = doc.replay->peak_allocated();
  marker(peak.time_ns, kPeakColor, "peak " + format_bytes(peak.bytes));
}

int TimelineView::row_of(uint64_t bytes) const {
  return std::clamp(static_cast<int>(static_cast<double>(bytes) / bytes_per_row_), 0, image_.height() - 1);
}

// The columns' highest predicted bytes, found again only when the columns move.
void TimelineView::find_ghost_columns(const std::shared_ptr<const ScaleCurve>& c) {
  std::pair<int64_t, double> grid{grid_.first, grid_.dt};
  if (ghost_curve_ == c && ghost_grid_ == grid && ghost_columns_.size() == static_cast<size_t>(grid_.width)) return;
  ghost_curve_ = c;
  ghost_grid_ = grid;
  ghost_columns_ = curve_spans(*c, grid_.first, grid_.dt, grid_.width);
}

// The plot's top: the recording's highest bytes, or a ghost's with room for its legend above.
uint64_t TimelineView::plot_max_bytes(const Document& doc, const ViewState& state) {
  const Timeline& tl = *doc.timeline;
  Envelope all = tl.envelope_steps(kNoEvent, tl.steps() ? tl.steps() - 1 : kNoEvent);
  uint64_t top = std::max(all.allocated_max, all.reserved_max);
  std::optional<Ghost> ghost = ghost_of(doc, state);
  if (!ghost) return std::max<uint64_t>(top + all.reserved_max / 20, 1024);
  if (ghost_top_.first != ghost->curve) ghost_top_ = {ghost->curve, ghost_top(*ghost)};  // a pass over the curve
  top = std::max(top, ghost_top_.second);
  return top + top / 5;
}

void TimelineView::draw_ghost(const Ghost& g, ImDrawList* list) {
  const ScaleCurve& c = *g.curve;
  find_ghost_columns(g.curve);
  float bottom = grid_.y + static_cast<float>(image_.height() - 1);
  auto y_of = [&](uint64_t bytes) { return bottom - static_cast<float>(row_of(bytes)); };
  auto pixel = [&](float x, float y0, float y1, uint32_t color) {  // one pixel column from y0 to y1, no smoothing
    list->AddRectFilled(ImVec2(x, std::min(y0, y1)), ImVec2(x + 1, std::max(y0, y1) + 1), color);
  };
  std::optional<uint64_t> limit = g.limit;
  if (limit)
    for (int i = 0; i < grid_.width; ++i)
      if (dash_on(grid_.first + i))
        pixel(grid_.x + static_cast<float>(i), y_of(*limit), y_of(*limit), kDeviceMemoryColor);
  auto dashed = [&](uint64_t ScaleSpan::*bytes, uint32_t color) {
    for (int i = 0; i < grid_.width; ++i) {
      const ScaleSpan& col = ghost_columns_[i];
      if (!col.shown || !dash_on(grid_.first + i)) continue;
      float y = y_of(col.*bytes), x = grid_.x + static_cast<float>(i);
      bool joined = i > 0 && ghost_columns_[i - 1].shown && dash_on(grid_.first + i - 1);
      pixel(x, joined ? y_of(ghost_columns_[i - 1].*bytes) : y, y, color);
    }
  };
  if (!c.reserved.empty()) dashed(&ScaleSpan::reserved, kGhostReservedColor);
  dashed(&ScaleSpan::allocated, kGhostAllocatedColor);
  // The predicted peak: a short bar at its height, drawn whatever the dashes.
  float peak_x = grid_.x_of(grid_.origin + c.time_ns[c.peak]), peak_y = y_of(c.allocated[c.peak]);
  for (float x = peak_x - 4; x <= peak_x + 4; ++x)
    if (x >= grid_.x && x < grid_.x + grid_.width) pixel(x, peak_y, peak_y, kGhostAllocatedColor);
  std::vector<std::pair<std::string, uint32_t>> legend = {{g.label, kGhostAllocatedColor}};
  if (limit && c.oom) {
    float x = grid_.x_of(grid_.origin + c.time_ns[*c.oom]);
    if (x >= grid_.x && x < grid_.x + grid_.width) pixel(x, y_of(*limit) - 4, y_of(*limit) + 4, kDeviceMemoryColor);
    legend.emplace_back(fmt::format("device memory {}: runs out at +{}", format_bytes(*limit),
                                    format_duration(c.time_ns[*c.oom])), kDeviceMemoryColor);
  }
  float y = grid_.y + 2 + ImGui::GetTextLineHeight();  // under the peak marker's label
  for (const auto& [text, color] : legend) {
    float x = grid_.x + static_cast<float>(grid_.width) - ImGui::CalcTextSize(text.c_str()).x - 6;
    list->AddText(ImVec2(x, y), color, text.c_str());
    y += ImGui::GetTextLineHeight();
  }
}

nlohmann::json TimelineView::ghost_layout(const Document& doc, const ViewState& state) const {
  std::optional<Ghost> g = ghost_of(doc, state);
  if (!g) return nullptr;
  const ScaleCurve& c = *g->curve;
  nlohmann::json reserved = nullptr;
  if (!c.reserved.empty()) reserved = *std::max_element(c.reserved.begin(), c.reserved.end());
  std::optional<uint64_t> limit = g->limit;
  return {{"size", g->scaled ? nlohmann::json(g->scaled->size) : nlohmann::json(nullptr)},
          {"peak_allocated", *std::max_element(c.allocated.begin(), c.allocated.end())},
          {"peak_reserved", reserved},
          {"peak_ns", c.time_ns[c.peak]},
          {"oom_ns", limit && c.oom ? nlohmann::json(c.time_ns[*c.oom]) : nlohmann::json(nullptr)},
          {"device_memory", limit ? nlohmann::json(*limit) : nlohmann::json(nullptr)},
          {"label", g->label}};
}

void TimelineView::handle_input(Document& doc, ViewState& state, bool hovered, bool clicked) {
  ImGuiIO& io = ImGui::GetIO();
  float mouse_x = std::clamp(io.MousePos.x, grid_.x, grid_.x + image_.width() - 1);
  double around = hovered ? grid_.time_at(mouse_x) : state.t0 + state.span / 2;
  if (hovered && io.MouseWheel != 0) state.zoom(std::pow(0.8, io.MouseWheel), around);
  if (ImGui::IsItemActive() && io.MouseDelta.x != 0) state.pan(-io.MouseDelta.x * grid_.dt);
  if (!io.WantTextInput) {
    // Perfetto's keys, held for continuous motion.
    float rate = std::min(io.DeltaTime, 0.1f);
    if (ImGui::IsKeyDown(GLFW_KEY_W)) state.zoom(std::pow(0.05, rate), around);
    if (ImGui::IsKeyDown(GLFW_KEY_S)) state.zoom(std::pow(20.0, rate), around);
    if (ImGui::IsKeyDown(GLFW_KEY_A)) state.pan(-state.span * 1.5 * rate);
    if (ImGui::IsKeyDown(GLFW_KEY_D)) state.pan(state.span * 1.5 * rate);
    if (ImGui::IsKeyPressed(GLFW_KEY_F)) state.fit_peak(doc);
    if (ImGui::IsKeyPressed(GLFW_KEY_0) || ImGui::IsKeyPressed(GLFW_KEY_HOME)) state.fit_all(doc);
  }
  if (!hovered) return;
  int col = std::clamp(static_cast<int>(io.MousePos.x - grid_.x), 0, image_.width() - 1);
  int row = image_.height() - 1 - std::clamp(static_cast<int>(io.MousePos.y - grid_.y), 0, image_.height() - 1);
  uint32_t step = column_step_[col];
  if (step == kNone) return;
  auto offset = static_cast<uint64_t>((row + 0.5) * bytes_per_row_);
  uint32_t id = doc.timeline->allocation_at(step, offset);
  const Totals& totals = doc.replay->after(step);
  ImGui::BeginTooltip();
  ImGui::Text("%s   allocated %s   reserved %s", format_duration(doc.timeline->time_of(step) - doc.timeline->begin_ns()).c_str(),
              format_bytes(totals.allocated).c_str(), format_bytes(totals.reserved).c_str());
  if (id != kNone) {
    const Allocation& a = doc.replay->allocations()[id];
    ImGui::Text("block %s at 0x%llx", format_bytes(a.size).c_str(), static_cast<unsigned long long>(a.addr));
    ImGui::TextUnformatted(allocation_site(doc.snapshot, a.stack).c_str());
    if (std::string owner = owner_text(doc, id); !owner.empty()) ImGui::Text("owner %s", owner.c_str());
    ImGui::TextDisabled("click: inspect this block and group the memory live here");
  }
  ImGui::EndTooltip();
  if (clicked) {
    state.set_instant(doc, step);
    state.selected_allocation = id;
  }
}

}  // namespace memrec::viewer
