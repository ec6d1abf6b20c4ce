// The views of the main window, one file each. Each draws into the current ImGui window.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <imgui.h>
#include <nlohmann/json.hpp>

#include "document.h"
#include "memrec/advise.h"
#include "memrec/growth.h"

namespace memrec::viewer {

// An RGBA image drawn as one textured quad: how the timeline and lanes draw a whole frame's worth of
// per-pixel data as a single primitive, which keeps the software rasterizer's cost flat.
class PixelImage {
 public:
  PixelImage() = default;
  PixelImage(const PixelImage&) = delete;
  PixelImage& operator=(const PixelImage&) = delete;
  ~PixelImage();
  // Returns true when the size changed (pixels are then undefined).
  bool resize(int width, int height);
  int width() const { return width_; }
  int height() const { return height_; }
  uint32_t& at(int x, int y) { return pixels_[static_cast<size_t>(y) * width_ + x]; }
  const std::vector<uint32_t>& pixels() const { return pixels_; }
  // Moves every row's pixels `columns` to the left (negative: right); uncovered columns keep stale pixels.
  void shift_left(int columns);
  void draw(ImDrawList* list, ImVec2 top_left);  // uploads when changed

  void mark_changed() { changed_ = true; }

 private:
  int width_ = 0, height_ = 0;
  std::vector<uint32_t> pixels_;
  unsigned texture_ = 0;
  bool changed_ = true;
};

// Pixel columns shared by the timeline and the lanes under it: column i covers [t0 + i*dt, t0 + (i+1)*dt)
// nanoseconds after `origin`, the recording's first event. t0 = first * dt: columns sit on a grid of dt, so
// panning by whole columns keeps every column's range.
struct ColumnGrid {
  float x = 0, y = 0;  // screen position of the plot's top-left pixel
  int width = 0;
  int64_t first = 0;
  double t0 = 0, dt = 1;
  int64_t origin = 0;
  float x_of(int64_t t) const { return x + static_cast<float>(std::floor((static_cast<double>(t - origin) - t0) / dt)); }
  double time_at(float sx) const { return t0 + (sx - x) * dt; }  // after origin
  int64_t absolute(double t) const { return origin + static_cast<int64_t>(std::floor(t)); }
};

// The device memory band under the timeline (device_band.cpp): its height (0 for a recording without NVML
// samples), and the band itself, drawn from `top` on the timeline's columns.
float device_band_height(const Document& doc);
void draw_device_band(const Document& doc, const ColumnGrid& grid, ImDrawList* list, float top);

// What the timeline's ghost line draws: the selected advice's curve, else the prediction of --scale-with.
struct Ghost {
  std::shared_ptr<const ScaleCurve> curve;  // owned: a cache keyed by it never meets a new curve at a freed address
  std::string label;
  std::optional<uint64_t> limit;            // the device's memory, drawn where the curve runs out of it
  const ScalePrediction* scaled = nullptr;  // --scale-with's
};

class TimelineView {
 public:
  void draw(Document& doc, ViewState& state, float height);
  const ColumnGrid& grid() const { return grid_; }
  int plot_height() const { return image_.height(); }
  double bytes_per_row() const { return bytes_per_row_; }
  // Whether every column shows the current view (zooming repaints over a few frames).
  bool complete() const;
  // The ghost (the selected advice's curve, else --scale-with's) as drawn: its size (--scale-with's), its peaks and
  // their place, read back from its curve, and the device's memory where it runs out: {"size", "peak_allocated",
  // "peak_reserved", "peak_ns", "oom_ns", "device_memory", "label"}; null without a ghost.
  nlohmann::json ghost_layout(const Document& doc, const ViewState& state) const;

 private:

  void resample(int64_t first, double dt);
  void scroll(int64_t shift);
  void refine(const Document& doc, const ViewState& state, int64_t first);
  void paint_column(const Document& doc, const ViewState& state, int i, int64_t column);
  void handle_input(Document& doc, ViewState& state, bool hovered, bool clicked);
  void draw_overlay(const Document& doc, const ViewState& state, ImDrawList* list);
  uint64_t plot_max_bytes(const Document& doc, const ViewState& state);
  void find_ghost_columns(const std::shared_ptr<const ScaleCurve>& c);
  void draw_ghost(const Ghost& g, ImDrawList* list);
  int row_of(uint64_t bytes) const;

  PixelImage image_;
  ColumnGrid grid_;
  double bytes_per_row_ = 1;
  std::vector<uint32_t> column_step_;  // representative step per column (the column's allocated peak)
  std::vector<uint8_t> stale_;         // columns still showing another view
  std::vector<uint32_t> rows_, scratch_;
  // What the cached pixels were painted for.
  int64_t cached_first_ = 0;
  double cached_dt_ = -1;
  uint64_t cached_highlight_ = ~0ull;
  uint64_t cached_doc_ = 0;  // Document::id
  uint8_t cached_device_ = 0;
  std::vector<ScaleSpan> ghost_columns_;  // the ghost's highest predicted bytes in each pixel column
  std::pair<int64_t, double> ghost_grid_{0, -1};  // the first column and dt they were found for
  std::shared_ptr<const ScaleCurve> ghost_curve_;  // the curve they were found for
  std::pair<std::shared_ptr<const ScaleCurve>, uint64_t> ghost_top_{nullptr, 0};  // a curve and its highest bytes
};

class LanesView {
 public:
  void draw(const Document& doc, ViewState& state, const ColumnGrid& grid);
  static float height_for(const Document& doc);
  const PixelImage& image() const { return image_; }
  const std::vector<uint32_t>& items() const { return items_; }

 private:
  struct Label {
    int x0, x1, top;
    uint32_t name;
  };
  void scroll(const Document& doc, int64_t shift);
  void paint(const Document& doc, const ColumnGrid& grid, int from, int to);
  void find_labels(const Document& doc);

  PixelImage image_;
  std::vector<uint32_t> items_;  // per lane, the item under each column (lane l: [l * width, (l + 1) * width))
  std::vector<Label> labels_;
  ColumnGrid painted_;
  uint64_t painted_doc_ = 0;  // Document::id
  uint8_t painted_device_ = 0;
};

void draw_attribution(const Document& doc, ViewState& state);
// Per allocation, whether it falls under `node` of the tree: the marks a click on a group highlights.
std::vector<uint8_t> blocks_under(const Document& doc, const Attribution& at, uint32_t node);
// "live at 12.3 ms (peak)"
std::string describe_instant(const Document& doc, const ViewState& state);

// Mode::grouping shows the tree of the attribution panel's grouping; Mode::modules is the module view: the module
// tree (owners' modules included), each box split by category.
class FlameView {
 public:
  enum class Mode : uint8_t { grouping, modules };
  explicit FlameView(Mode mode = Mode::grouping) : mode_(mode) {}
  // One box as laid out for the last frame, in pixels from the graph's top-left (tests read them back).
  struct Box {
    uint32_t node;  // in tree()
    uint32_t depth;
    float x0, x1;
  };
  void draw(const Document& doc, ViewState& state);
  const Attribution* tree() const { return tree_; }
  // Modules: per node of tree(), its bytes by category.
  const std::vector<std::array<uint64_t, kCategoryCount>>& category_bytes() const { return category_bytes_; }
  const std::vector<Box>& boxes() const { return boxes_; }
  ImVec2 origin() const { return origin_; }
  float width() const { return laid_width_; }
  static float row_height();

 private:
  void update_tree(const Document& doc, const ViewState& state);
  void count_categories(const Document& doc, std::span<const uint32_t> ids);
  void draw_box(const Document& doc, uint32_t node, ImVec2 a, ImVec2 z, bool dim);
  void highlight_blocks(const Document& doc, ViewState& state, uint32_t node);
  void update_search(const std::string& text);
  void draw_header(const Document& doc, ViewState& state);
  void draw_grouping_choice(const Document& doc, ViewState& state);
  void lay_out(float width);
  void place(uint32_t node, uint32_t depth, float x0, double scale);
  void zoom_to(uint32_t node);
  const std::string& label(uint32_t node);

  Mode mode_;
  std::optional<Attribution> own_tree_;  // a range's tree, or the module tree
  std::vector<std::array<uint64_t, kCategoryCount>> category_bytes_;
  const Attribution* tree_ = nullptr;
  uint32_t zoom_ = 0;                // the node drawn full width
  std::vector<uint32_t> zoom_path_;  // its keys, to find it again in the next tree
  std::vector<Box> boxes_;
  uint32_t rows_ = 0;
  float laid_width_ = -1;
  ImVec2 origin_;
  std::vector<std::string> labels_;  // per node, filled when first drawn
  std::vector<uint8_t> hits_;        // per node: its label holds the search text
  std::string searched_;
  // What the tree was built for.
  uint64_t built_doc_ = 0;  // Document::id
  uint8_t built_device_ = 0;
  bool built_ranged_ = false;
  std::pair<int64_t, int64_t> built_range_;
  Grouping built_grouping_ = Grouping::stack_top_down;
  Frames built_frames_ = Frames::user;
  uint64_t built_version_ = 0;
};
void draw_inspector(const Document& doc, ViewState& state);
// "0.weight.exp_avg (optimizer_state)" for an owned block, "" otherwise: the inspector's and the hover's owner line.
std::string owner_text(const Document& doc, uint32_t id);

class SegmentsView {
 public:
  void draw(const Document& doc, ViewState& state);
  // Where each segment's bar was drawn in the last frame (tests read the pixels back).
  struct Bar {
    size_t segment;  // in segments()
    float x, y, width;
  };
  const std::vector<SegmentAt>& segments() const { return segments_; }
  const std::vector<std::vector<uint32_t>>& pending() const { return pending_; }
  const std::vector<Bar>& bars() const { return bars_; }
  static float bar_height();

 private:
  void update(const Document& doc, const ViewState& state);
  void draw_scrubber(const Document& doc, ViewState& state);
  void draw_bar(const Document& doc, ViewState& state, size_t index, float width);

  std::optional<SegmentHistory> history_;
  std::vector<SegmentAt> segments_;
  std::vector<std::vector<uint32_t>> pending_;  // per segment: blocks freed but not yet released
  struct Delayed {
    Delayed() = default;
    explicit Delayed(const Replay& r);
    std::vector<uint32_t> pending_after(const Replay& r, uint32_t step) const;
    std::vector<uint32_t> ids;  // blocks whose release comes after their free, by free step
    uint32_t longest = 0;       // the most steps between a free and its release
  } delayed_;
  std::vector<Bar> bars_;
  struct {
    uint64_t reserved = 0, allocated = 0, pending = 0, inactive_split = 0, free = 0;
  } totals_;
  uint32_t step_ = kNoEvent;
  uint64_t doc_id_ = 0;  // what the history was made of: Document::id and device
  uint8_t device_ = 0;
};

class SearchView {
 public:
  void draw(const Document& doc, ViewState& state);

 private:
  char text_[256] = {};
};

// The ranks of one run side by side (ranks_view.cpp): drawn above the views of the rank they show.
class RanksView {
 public:
  // Draws the plot and the table of ranks in `height` pixels; returns the rank (index into set.ranks) picked.
  std::optional<size_t> draw(const RankSet& set, size_t current, float height);
  // Where each lane's curve is on screen, for tests: {"lanes": [{"rank", "x", "y" (the bottom row), "w", "h"}],
  // "scale_bytes" (bytes at the top row, h - 1 rows above the bottom), "dt_ns" (per column), "envelope",
  // "read_whole" (ranks read whole: no summary with a curve), "open_error"}.
  nlohmann::json layout(const RankSet& set) const;

  // One plot of max / median / min over the ranks instead of a lane each (the checkbox); set when a set of more than
  // 16 ranks opens.
  bool envelope = false;
  // Why the rank picked last could not be opened (its file read whole); empty when it opened. The views below keep
  // the rank they showed.
  std::string open_error;

 private:
  struct LaneRows {
    int top, bottom, height;
  };
  std::optional<size_t> draw_plot(const RankSet& set, size_t current, float height);
  std::optional<size_t> draw_table(const RankSet& set, size_t current);
  void paint(const RankSet& set, size_t current);
  void paint_lanes(const RankSet& set);
  void paint_envelope(const RankSet& set, size_t current);
  std::optional<std::pair<uint64_t, uint64_t>> column_value(const RankSet& set, size_t rank, int column) const;
  int row_of(uint64_t bytes, int bottom, int height) const;
  std::optional<size_t> rank_at(const RankSet& set, int x, int y) const;

  PixelImage image_;
  uint64_t scale_ = 1;
  double dt_ = 1;
  float plot_x_ = 0, plot_y_ = 0;
  std::vector<LaneRows> lanes_;
  size_t painted_current_ = SIZE_MAX;
  bool painted_envelope_ = false;
  const RankSet* painted_set_ = nullptr;
};

// Loads the ranks (memrec/ranks.h) from their summaries where they hold a memory curve, and reads whole only the
// one furthest from the median, opened as the document.
std::unique_ptr<Document> open_ranks(const std::vector<std::string>& paths, std::optional<uint8_t> device);

// A list row's color swatch, kSwatch pixels square, at the cursor and centred on the text line, the cursor left
// after it on the same line: the growth tab's legend and the advice tab's rows. Returns its top-left (for layout()).
inline constexpr float kSwatch = 12;
inline ImVec2 draw_swatch(uint32_t color) {
  ImVec2 at = ImGui::GetCursorScreenPos();
  at.y += std::floor((ImGui::GetTextLineHeight() - kSwatch) / 2);
  ImGui::GetWindowDrawList()->AddRectFilled(at, ImVec2(at.x + kSwatch, at.y + kSwatch), color);
  ImGui::Dummy(ImVec2(kSwatch, kSwatch));
  ImGui::SameLine();
  return at;
}

// The growth tab (growth_view.cpp): `memrec growth`'s baseline at each step's start, its slope and its growing
// sites; while it is shown, each growing site's blocks that outlived their step are drawn on the timeline in the
// site's color, the rest dimmed.
class GrowthView {
 public:
  void draw(const Document& doc, ViewState& state);
  // {"verdict", "steps", "marked" (blocks), "chart": {"x", "y", "w", "h"}, "legend": [{"site", "bytes_per_step",
  // "blocks", "color" (ABGR), "x", "y", "size" (the swatch)}]}; null before the tab was drawn.
  nlohmann::json layout() const;

 private:
  void update(const Document& doc);
  void mark(const Document& doc, ViewState& state);
  void draw_chart(const GrowthResult& g);
  void draw_legend(const GrowthResult& g);

  std::optional<GrowthResult> result_;
  MadeOf made_of_;
  TabMarks marks_;
  ImVec4 chart_{};  // x, y, w, h
  std::vector<ImVec2> swatches_;  // per legend row
};

// The advice tab (advise_view.cpp): `memrec advise`'s changes, largest saving first. The selected one (the first when
// the tab opens) marks the blocks its evidence names on the timeline, the rest dimmed, and draws the curve its
// replay (or fit across sizes) gives as a ghost line; a counted change has no curve, and the tab says so.
class AdviseView {
 public:
  void draw(const Document& doc, ViewState& state);
  // {"rows": [{"kind", "method", "saves_allocated", "saves_reserved", "change", "blocks", "curve" (bool), "x", "y",
  // "size" (the swatch)}], "selected", "marked" (blocks), "marked_bytes", "color" (ABGR, the marks'),
  // "not_assessed"}; null before the advice was made.
  nlohmann::json layout() const;

 private:
  void update(const Document& doc);
  void show(const Document& doc, ViewState& state);
  void draw_row(size_t index);
  void draw_selected(const Advice& a) const;

  std::shared_ptr<const Advise> result_;
  MadeOf made_of_;
  bool asked_ = false;  // the tab said it is computing: the next frame computes
  size_t selected_ = 0;
  TabMarks marks_;
  std::vector<ImVec2> swatches_;  // per row
};

void draw_status_bar(const Document& doc, const ViewState& state, float frame_ms);

// Hash-based color for names (kernels, scopes) so one name keeps one color.
uint32_t name_color(uint32_t string_id);
// One color per category (the module view's boxes and legend).
uint32_t category_color(Category c);
// One color per growing site, in the growth tab's order; they repeat after kGrowthColors sites.
inline constexpr size_t kGrowthColors = 6;
uint32_t growth_color(size_t site);

}  // namespace memrec::viewer
