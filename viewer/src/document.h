// What the views share: the loaded recording with its replay and level-of-detail structures (Document), and what
// the user is looking at (ViewState).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memrec/analysis.h"
#include "memrec/attribution.h"
#include "memrec/range.h"
#include "memrec/ranks.h"
#include "memrec/replay.h"
#include "memrec/scale.h"
#include "memrec/snapshot.h"
#include "memrec/timeline.h"

namespace memrec::viewer {

struct Document {
  // A number no other Document of this process had, and none this one had before extend(): views that cache what
  // they drew compare it, not the address, which a later document may reuse.
  uint64_t id = next_id();
  std::string path;
  Snapshot snapshot;
  uint8_t device = 0;
  std::vector<uint8_t> devices;
  std::unique_ptr<Replay> replay;
  std::unique_ptr<Timeline> timeline;
  std::vector<Lane> kernel_lanes;
  std::vector<Lane> scope_lanes;
  // Opened as one rank of several (memrec view A B ...): all of them, and which one this is.
  std::shared_ptr<const RankSet> ranks;
  size_t rank_index = 0;
  // memrec view --scale-with: the prediction at another size drawn over the timeline (memrec/scale.h).
  std::shared_ptr<const ScaleWhatif> ghost;

  // Loads the file (with `part`, only that part of it) and analyzes `device` (unset: choose_device's default).
  // The file's notes go to `notes` (none when null); the status bar shows them too.
  static std::unique_ptr<Document> open(const std::string& path, std::optional<uint8_t> device,
                                        std::optional<Range> part = {}, std::FILE* notes = stderr);
  // A document of a snapshot already read (following a file: memrec/tail.h), as open() makes it.
  static std::unique_ptr<Document> of(std::string path, Snapshot s, std::optional<uint8_t> device);
  // Builds the replay, timeline and lanes of one device.
  void analyze(uint8_t device);
  // Following a file: after rows were appended to the snapshot, extends the replay, the timeline and the lanes from
  // where they stopped, and takes a new id. False, with the analysis as it was, where the new rows change what came
  // before (Replay::extend) or bring compiled code to map: then the document must be made again.
  bool extend();
  uint64_t device_events() const { return replay->steps(); }
  // Per allocation, made on first use (a pass over every block): grouping by category needs them at each instant.
  const std::vector<Category>& categories() const;

 private:
  static uint64_t next_id();
  void add_devices();
  mutable std::optional<std::vector<Category>> categories_;
  size_t kernels_in_lanes_ = 0, scopes_in_lanes_ = 0;  // the snapshot's rows the lanes were made of
  size_t events_in_devices_ = 0;                        // and those `devices` was made of
  std::array<bool, 256> devices_seen_{};
};

// The view the bottom panel shows (and a screenshot aims at): the attribution table, the flame graph of the same
// memory, the segment history, or the module view.
enum class Focus : uint8_t { timeline, flame, segments, modules, growth, advise };

struct ViewState {
  // Visible time range in nanoseconds after the first event (doubles of absolute clock values would round to
  // 256 ns). The span is kept apart from t0 so panning leaves it bit-identical and cached columns stay valid.
  double t0 = 0, span = 1;
  double t1() const { return t0 + span; }
  // The instant the attribution and segments views describe (a replay step, kNoEvent = before the first event).
  uint32_t instant = kNoEvent;
  uint32_t selected_allocation = kNone;
  Focus focus = Focus::timeline;
  // The tree the attribution panel and the flame graph group by; `flat` set: the panel lists one key per block
  // instead (GroupBy::stack is the site, as `memrec stats --by stack` prints it: the panel opens on it) and the
  // flame graph keeps the tree.
  Grouping grouping = Grouping::stack_top_down;
  Frames frames = Frames::user;  // the stack groupings fold internal frames unless every frame is asked for
  std::optional<GroupBy> flat = GroupBy::stack;
  std::optional<Attribution> attribution;  // of the live blocks at `instant`, once group() made it
  std::vector<Group> flat_groups;          // of the live blocks at `instant`, when `flat` is set
  uint64_t attribution_version = 0;        // changes whenever `attribution` is rebuilt
  // Set: the flame graph shows the bytes allocated in [first, second] (ns after the first event) instead.
  std::optional<std::pair<int64_t, int64_t>> range;
  std::string search;  // the text last searched for: the flame graph highlights the boxes it names
  uint32_t selected_node = 0;              // in attribution; 0 = none
  // Per allocation: drawn bright when set, the rest dimmed. Empty: nothing highlighted.
  std::vector<uint8_t> highlight;
  // Set: a mark k draws its block in highlight_palette[k - 1] instead of the block's own color.
  std::vector<uint32_t> highlight_palette;
  std::string highlight_reason;
  uint64_t highlight_version = 0;  // changes whenever `highlight` does, so cached pixels are redrawn
  // A predicted curve drawn over the timeline as a ghost line in place of --scale-with's: the selected advice's
  // change (on the recording's clock), with its legend.
  std::shared_ptr<const ScaleCurve> ghost;
  std::string ghost_label;

  void fit_all(const Document& doc);
  // What the viewer opens on: everything, except an idle prologue (loading, compiling: a few events, then a pause
  // longer than the rest of the run), which would squash the steps into a sliver.
  void fit_activity(const Document& doc);
  // A window around the peak: the peak's column and the allocations around it fill the view.
  void fit_peak(const Document& doc);
  void zoom(double factor, double around);
  void pan(double ns);
  void set_instant(const Document& doc, uint32_t step);
  // Groups the memory live at the instant unless it is grouped already.
  void group(const Document& doc);
  // Regroups the memory live at the instant after `grouping` or `flat` changed.
  void regroup(const Document& doc);
  void set_highlight(std::vector<uint8_t> marks, std::string reason, std::vector<uint32_t> palette = {});
  void clear_highlight();
};

// The blocks a tab marks on the timeline while it is shown (the growth tab's sites, the selected advice's evidence),
// the rest dimmed: set again whenever another view changed the highlight.
class TabMarks {
 public:
  bool current(const ViewState& state) const { return state.highlight_version == version_; }
  // Group k's blocks (ids into doc.replay->allocations()) are drawn in palette[min(k, palette.size() - 1)].
  void set(const Document& doc, ViewState& state, std::span<const std::span<const uint32_t>> groups,
           std::vector<uint32_t> palette, std::string reason);
  void reset() { version_ = ~0ull; }
  size_t marked() const { return marked_; }  // blocks
  uint64_t marked_bytes() const { return marked_bytes_; }

 private:
  uint64_t version_ = ~0ull;
  size_t marked_ = 0;
  uint64_t marked_bytes_ = 0;
};

// What a tab's result was made of: made again when another file or device is shown.
struct MadeOf {
  uint64_t doc = 0;  // Document::id
  uint8_t device = 0;
  bool same(const Document& d) const { return doc == d.id && device == d.device; }
  static MadeOf of(const Document& d) { return {d.id, d.device}; }
};

}  // namespace memrec::viewer
