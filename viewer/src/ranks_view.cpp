// The ranks of one run on one time axis (memrec/ranks.h): a lane per rank with its allocated (white) and reserved
// (orange) curves on one scale, or the envelope of allocated over the ranks (max and min as a band, the median as a
// grey line) with the current rank in white over it. The curves are the summaries' (kSummaryCurve buckets a rank);
// clicking a lane, a curve or a table row reads that rank's file whole and opens it in the views below.
#include <algorithm>
#include <filesystem>
#include <future>

#include <fmt/format.h>

#include "memrec/ranks_output.h"
#include "memrec/units.h"
#include "memrec/viewer.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr uint32_t kFillColor = 0xFF6A4A2Au;      // area under a rank's allocated curve
constexpr uint32_t kBandColor = 0xFF5A5A5Au;      // envelope: between the lowest and the highest rank
constexpr uint32_t kMedianColor = 0xFFB0B0B0u;    // envelope: the median rank
constexpr float kTableRows = 4.5f;
constexpr size_t kMostLanes = 16;                 // more ranks open as the envelope: lanes would be a few pixels

// The top of the plot: one scale for every rank, so lanes compare by eye. The envelope draws allocated bytes only.
uint64_t scale_of(const RankSet& set, bool envelope) {
  uint64_t top = 1;
  for (const RankRecording& r : set.ranks)
    top = std::max({top, r.peak_allocated.bytes, envelope ? 0 : r.peak_reserved.bytes});
  return top;
}

}  // namespace

std::unique_ptr<Document> open_ranks(const std::vector<std::string>& paths, std::optional<uint8_t> device) {
  auto set = std::make_shared<const RankSet>(load_ranks(paths, {.device = device, .curve = true}));
  size_t pick = set->furthest.value_or(0);
  auto doc = Document::open(set->ranks[pick].path, set->ranks[pick].device);
  doc->ranks = set;
  doc->rank_index = pick;
  return doc;
}

std::optional<std::pair<uint64_t, uint64_t>> RanksView::column_value(const RankSet& set, size_t rank, int column) const {
  int64_t t0 = set.origin_ns + static_cast<int64_t>(column * dt_) - set.ranks[rank].offset_ns;
  int64_t t1 = set.origin_ns + static_cast<int64_t>((column + 1) * dt_) - set.ranks[rank].offset_ns;
  return set.ranks[rank].highest_in(t0, std::max(t1, t0 + 1));
}

int RanksView::row_of(uint64_t bytes, int bottom, int height) const {
  return bottom - static_cast<int>(static_cast<double>(bytes) / static_cast<double>(scale_) * (height - 1) + 0.5);
}

void RanksView::paint_lanes(const RankSet& set) {
  int n = static_cast<int>(set.ranks.size()), lane = image_.height() / n;
  for (int i = 0; i < n; ++i) {
    int bottom = (i + 1) * lane - 2, height = lane - 3;
    for (int x = 0; x < image_.width(); ++x) {
      auto value = column_value(set, i, x);
      if (!value) continue;  // the rank recorded nothing then
      auto [allocated, reserved] = *value;
      int top = row_of(allocated, bottom, height);
      for (int y = bottom; y > top; --y) image_.at(x, y) = kFillColor;
      if (reserved) image_.at(x, row_of(reserved, bottom, height)) = kReservedColor;
      image_.at(x, top) = kAllocatedColor;
    }
    lanes_.push_back({i * lane, bottom, height});
  }
}

void RanksView::paint_envelope(const RankSet& set, size_t current) {
  int bottom = image_.height() - 2, height = image_.height() - 3;
  std::vector<uint64_t> values;  // of the ranks that recorded something in the column
  for (int x = 0; x < image_.width(); ++x) {
    values.clear();
    for (size_t r = 0; r < set.ranks.size(); ++r)
      if (auto v = column_value(set, r, x)) values.push_back(v->first);
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    int high = row_of(values.back(), bottom, height), low = row_of(values.front(), bottom, height);
    for (int y = low; y >= high; --y) image_.at(x, y) = kBandColor;
    image_.at(x, row_of(values[(values.size() - 1) / 2], bottom, height)) = kMedianColor;
    if (auto mine = column_value(set, current, x)) image_.at(x, row_of(mine->first, bottom, height)) = kAllocatedColor;
  }
  lanes_.push_back({0, bottom, height});
}

void RanksView::paint(const RankSet& set, size_t current) {
  for (int y = 0; y < image_.height(); ++y)
    for (int x = 0; x < image_.width(); ++x) image_.at(x, y) = kPlotBackground;
  scale_ = scale_of(set, envelope);
  dt_ = std::max(1.0, static_cast<double>(set.duration_ns + 1) / image_.width());
  lanes_.clear();
  if (envelope) paint_envelope(set, current);
  else paint_lanes(set);
  image_.mark_changed();
}

// The rank under the mouse: its lane, or in the envelope the rank whose curve is nearest the mouse in that column.
std::optional<size_t> RanksView::rank_at(const RankSet& set, int x, int y) const {
  if (!envelope) {
    int lane = y / std::max(1, image_.height() / static_cast<int>(set.ranks.size()));
    return lane < static_cast<int>(set.ranks.size()) ? std::optional<size_t>(lane) : std::nullopt;
  }
  size_t best = 0;
  int distance = INT32_MAX;
  for (size_t r = 0; r < set.ranks.size(); ++r) {
    auto value = column_value(set, r, x);
    int d = value ? std::abs(row_of(value->first, lanes_[0].bottom, lanes_[0].height) - y) : INT32_MAX;
    if (d < distance) best = r, distance = d;
  }
  return best;
}

std::optional<size_t> RanksView::draw_plot(const RankSet& set, size_t current, float height) {
  int width = std::max(64, static_cast<int>(ImGui::GetContentRegionAvail().x));
  int rows = std::max(envelope ? 32 : static_cast<int>(set.ranks.size()) * 8, static_cast<int>(height));
  bool resized = image_.resize(width, rows);
  if (resized || painted_current_ != current || painted_envelope_ != envelope || painted_set_ != &set) {
    paint(set, current);
    painted_current_ = current, painted_envelope_ = envelope, painted_set_ = &set;
  }
  ImVec2 origin = ImGui::GetCursorScreenPos();
  plot_x_ = origin.x, plot_y_ = origin.y;
  ImDrawList* list = ImGui::GetWindowDrawList();
  image_.draw(list, origin);
  ImGui::InvisibleButton("##ranks", ImVec2(static_cast<float>(width), static_cast<float>(rows)));
  ImVec2 mouse = ImGui::GetMousePos();
  int mx = static_cast<int>(mouse.x - origin.x), my = static_cast<int>(mouse.y - origin.y);
  std::optional<size_t> hovered = ImGui::IsItemHovered() ? rank_at(set, mx, my) : std::nullopt;
  if (!envelope)
    for (size_t i = 0; i < lanes_.size(); ++i) {
      uint32_t color = i == current ? 0xFF40FFFFu : 0xFFC0C0C0u;
      list->AddText(ImVec2(origin.x + 4, origin.y + lanes_[i].top + 1), color, fmt::format("rank {}", set.ranks[i].rank).c_str());
    }
  if (hovered) ImGui::SetTooltip("rank %d: peak %s", set.ranks[*hovered].rank, format_bytes(set.ranks[*hovered].peak_allocated.bytes).c_str());
  return ImGui::IsItemClicked() ? hovered : std::nullopt;
}

std::optional<size_t> RanksView::draw_table(const RankSet& set, size_t current) {
  std::optional<size_t> picked;
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV;
  if (!ImGui::BeginTable("ranks", 6, flags, ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * kTableRows))) return picked;
  for (const char* name : {"rank", "peak allocated", "at", "peak reserved", "step / phase", "file"})
    ImGui::TableSetupColumn(name);
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < set.ranks.size(); ++i) {
    const RankRecording& r = set.ranks[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    std::string label = fmt::format("{}{}", r.rank, set.furthest == i ? " (furthest)" : set.median == i ? " (median)" : "");
    if (ImGui::Selectable(label.c_str(), i == current, ImGuiSelectableFlags_SpanAllColumns)) picked = i;
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(r.peak_allocated.bytes).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(("+" + format_duration(set.on_axis(i, r.peak_allocated.time_ns))).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(r.peak_reserved.bytes ? format_bytes(r.peak_reserved.bytes).c_str() : "none");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(peak_step_and_phase(r).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(std::filesystem::path(r.path).filename().c_str());
  }
  ImGui::EndTable();
  return picked;
}

std::optional<size_t> RanksView::draw(const RankSet& set, size_t current, float height) {
  ImGui::Text("%zu ranks on one time axis (%s): %s", set.ranks.size(), format_duration(set.duration_ns).c_str(),
              clock_note(set).c_str());
  if (painted_set_ != &set) envelope = set.ranks.size() > kMostLanes;  // a new set of ranks
  ImGui::SameLine();
  ImGui::Checkbox("envelope", &envelope);
  float notes = 0;  // lines under the header
  if (set.read_whole) {
    ImGui::Text("%zu of them read whole: their files hold no summary with a memory curve (older, or cut short)",
                set.read_whole);
    ++notes;
  }
  if (!open_error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", open_error.c_str());
    ++notes;
  }
  float table = ImGui::GetTextLineHeightWithSpacing() * (kTableRows + notes) + ImGui::GetStyle().ItemSpacing.y;
  float plot = height - ImGui::GetFrameHeightWithSpacing() - table;
  std::optional<size_t> picked = draw_plot(set, current, plot);
  if (auto row = draw_table(set, current)) picked = row;
  return picked;
}

nlohmann::json RanksView::layout(const RankSet& set) const {
  nlohmann::json lanes = nlohmann::json::array();
  for (size_t i = 0; i < lanes_.size(); ++i)
    lanes.push_back({{"rank", envelope ? -1 : set.ranks[i].rank}, {"x", plot_x_}, {"y", plot_y_ + lanes_[i].bottom},
                     {"w", image_.width()}, {"h", lanes_[i].height}});
  return {{"envelope", envelope}, {"scale_bytes", scale_}, {"dt_ns", dt_}, {"lanes", lanes},
          {"read_whole", set.read_whole}, {"open_error", open_error}};
}

}  // namespace memrec::viewer
