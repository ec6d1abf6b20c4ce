#include "document.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <future>

#include "memrec/devices.h"
#include "memrec/load.h"

namespace memrec::viewer {

uint64_t Document::next_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

std::unique_ptr<Document> Document::open(const std::string& path, std::optional<uint8_t> device,
                                         std::optional<Range> part, std::FILE* notes) {
  auto doc = std::make_unique<Document>();
  doc->path = path;
  doc->snapshot = load_snapshot(path, notes, part);
  doc->devices = devices_of(doc->snapshot);
  if (doc->devices.empty()) doc->devices.push_back(0);
  doc->analyze(choose_device(doc->snapshot, device));
  return doc;
}

const std::vector<Category>& Document::categories() const {
  if (!categories_) categories_ = categorize(snapshot, *replay);
  return *categories_;
}

void Document::analyze(uint8_t d) {
  device = d;
  categories_.reset();
  timeline.reset();  // holds a reference into the old replay
  // The lanes read only the snapshot: they are built beside the replay.
  auto lanes = std::async(std::launch::async, [this] {
    kernel_lanes = memrec::kernel_lanes(snapshot, device);
    scope_lanes = memrec::scope_lanes(snapshot, device, last_event_time(snapshot, device));
  });
  replay = std::make_unique<Replay>(snapshot, device);
  timeline = std::make_unique<Timeline>(*replay);
  lanes.get();
  kernels_in_lanes_ = snapshot.kernels.size(), scopes_in_lanes_ = snapshot.scopes.size();
}

std::unique_ptr<Document> Document::of(std::string path, Snapshot s, std::optional<uint8_t> device) {
  auto doc = std::make_unique<Document>();
  doc->path = std::move(path);
  doc->snapshot = std::move(s);
  doc->add_devices();
  doc->analyze(choose_device(doc->snapshot, device));
  return doc;
}

// The devices with events or segments, from the events not looked at yet; none at all shows device 0.
void Document::add_devices() {
  auto see = [&](size_t, const Event& e) __attribute__((always_inline)) { devices_seen_[e.device] = true; };
  snapshot.events.for_each(events_in_devices_, snapshot.events.size(), see);
  events_in_devices_ = snapshot.events.size();
  for (const std::vector<Segment>* segments : {&snapshot.segments_start, &snapshot.segments_end})
    for (const Segment& seg : *segments) devices_seen_[seg.device] = true;
  devices.clear();
  for (int d = 0; d < 256; ++d)
    if (devices_seen_[d]) devices.push_back(static_cast<uint8_t>(d));
  if (devices.empty()) devices.push_back(0);
}

bool Document::extend() {
  if (snapshot.metadata.contains("compiled_code") || !replay->extend()) return false;
  timeline->extend();
  extend_kernel_lanes(kernel_lanes, snapshot, device, static_cast<uint32_t>(kernels_in_lanes_));
  extend_scope_lanes(scope_lanes, snapshot, device, timeline->end_ns(), static_cast<uint32_t>(scopes_in_lanes_));
  kernels_in_lanes_ = snapshot.kernels.size(), scopes_in_lanes_ = snapshot.scopes.size();
  categories_.reset();
  add_devices();
  id = next_id();
  return true;
}

void ViewState::fit_all(const Document& doc) {
  const Timeline& tl = *doc.timeline;
  double span = std::max<double>(static_cast<double>(tl.end_ns() - tl.begin_ns()), 1000.0);
  t0 = -span * 0.01;
  this->span = span * 1.02;
}

void ViewState::fit_activity(const Document& doc) {
  fit_all(doc);
  const Timeline& tl = *doc.timeline;
  const Replay& r = *doc.replay;
  int64_t prev = tl.begin_ns(), gap = 0, gap_end = prev;
  uint32_t after = 0;  // the first step after the longest gap
  r.for_each_step(0, r.steps(), [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    if (e.time_ns - prev > gap) gap = e.time_ns - prev, gap_end = e.time_ns, after = step;
    prev = e.time_ns;
  });
  int64_t rest = tl.end_ns() - gap_end;
  // A prologue: fewer events than what follows, then a pause longer than all that follows.
  if (gap <= rest || after > r.steps() / 2) return;
  double margin = std::max<double>(static_cast<double>(rest) * 0.02, 1000.0);
  t0 = static_cast<double>(gap_end - tl.begin_ns()) - margin;
  span = static_cast<double>(rest) + 2 * margin;
}

void ViewState::fit_peak(const Document& doc) {
  const Timeline& tl = *doc.timeline;
  const Peak& peak = doc.replay->peak_allocated();
  // The blocks live at the peak that were allocated last decide its shape; show from the oldest of the newest
  // tenth of them to their frees, at least 2% of the run.
  std::vector<uint32_t> live;
  tl.live_at(peak.step, live);
  double center = static_cast<double>(tl.time_of(peak.step) - tl.begin_ns());
  double half = std::max<double>(static_cast<double>(tl.end_ns() - tl.begin_ns()) * 0.01, 500.0);
  if (!live.empty()) {
    const Allocation& a = doc.replay->allocations()[live[live.size() - 1 - live.size() / 10]];
    if (a.alloc_step != kNoEvent)
      half = std::max(half, center - static_cast<double>(tl.time_of(a.alloc_step) - tl.begin_ns()));
  }
  t0 = center - half * 1.2;
  span = half * 2.4;
  set_instant(doc, peak.step);
}

void ViewState::zoom(double factor, double around) {
  double next = std::clamp(span * factor, 100.0, 1e15);
  t0 = around - (around - t0) / span * next;
  span = next;
}

void ViewState::pan(double ns) { t0 += ns; }

void ViewState::set_instant(const Document&, uint32_t step) {
  if (attribution && step == instant) return;
  instant = step;
  // Grouped when a view shows the groups: scrubbing the segment history regroups nothing.
  attribution.reset();
  flat_groups.clear();
  ++attribution_version;
}

void ViewState::group(const Document& doc) {
  if (!attribution) regroup(doc);
}

void ViewState::regroup(const Document& doc) {
  std::vector<uint32_t> live;
  doc.timeline->live_at(instant, live);
  attribution.emplace(doc.snapshot, *doc.replay, live, grouping, frames);
  // Only the category key needs the categories (a pass over every block, made once); the panel shows no split by them.
  std::span<const Category> categories;
  if (flat == GroupBy::category) categories = doc.categories();
  flat_groups = flat ? group_allocations(doc.snapshot, *doc.replay, live, *flat, categories) : std::vector<Group>{};
  selected_node = 0;
  ++attribution_version;
}

void ViewState::set_highlight(std::vector<uint8_t> marks, std::string reason, std::vector<uint32_t> palette) {
  highlight = std::move(marks);
  highlight_palette = std::move(palette);
  highlight_reason = std::move(reason);
  ++highlight_version;
}

void ViewState::clear_highlight() { set_highlight({}, ""); }

void TabMarks::set(const Document& doc, ViewState& state, std::span<const std::span<const uint32_t>> groups,
                   std::vector<uint32_t> palette, std::string reason) {
  std::vector<uint8_t> marks(doc.replay->allocations().size(), 0);
  marked_ = 0;
  marked_bytes_ = 0;
  for (size_t k = 0; k < groups.size() && !palette.empty(); ++k)
    for (uint32_t id : groups[k]) {
      if (id >= marks.size()) continue;
      marks[id] = static_cast<uint8_t>(std::min(k, palette.size() - 1) + 1);
      ++marked_;
      marked_bytes_ += doc.replay->size_of(id);
    }
  state.set_highlight(std::move(marks), std::move(reason), std::move(palette));
  version_ = state.highlight_version;
}

}  // namespace memrec::viewer
