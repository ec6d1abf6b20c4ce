// The window, the frame loop and the layout of the views. Used by `memrec view` and by the viewer benchmark.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <string>

#include "document.h"
#include "follow.h"
#include "views.h"

struct GLFWwindow;

namespace memrec::viewer {

class App {
 public:
  // Opens a window (throws memrec::Error without a display) while `loading` finishes on its own thread, then
  // takes the document (rethrowing its load error). Off-screen renders into a width x height framebuffer of its
  // own behind a hidden window, so the screen's size does not matter.
  App(std::future<std::unique_ptr<Document>> loading, int width, int height, bool offscreen);
  // Starts loading `path` on another thread and opens the window meanwhile.
  App(const std::string& path, std::optional<uint8_t> device, int width, int height, bool offscreen);
  // Follows a recording while it is written (memrec view --follow): a line says what it waits for until the file
  // reads, then the document grows with the file (Follower), keeping what the user looks at.
  App(std::unique_ptr<Follower> follower, int width, int height, bool offscreen);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  bool should_close() const;
  // Polls input, builds the UI (NewFrame to Render), draws and presents. Returns the build's CPU time in ms.
  double frame();
  // The same frame with an empty window: the baseline the benchmark compares against.
  double empty_frame();
  // Saves the last frame drawn (off-screen only).
  void save_png(const std::string& path) const;

  // Called each frame after the window system filled ImGuiIO, before the UI is built: lets tests drive the mouse
  // and keys like a user would.
  std::function<void(ImGuiIO&)> input;

  Document& doc() { return *doc_; }
  bool loaded() const { return doc_ != nullptr; }  // false while following a file not readable yet
  // Following: the line the window shows about the file (Follower::line); empty otherwise.
  std::string follow_line() const;
  ViewState& state() { return state_; }
  const TimelineView& timeline() const { return timeline_; }
  const LanesView& lanes() const { return lanes_; }
  const FlameView& flame() const { return flame_; }
  const FlameView& modules() const { return modules_; }
  const SegmentsView& segments() const { return segments_; }
  const GrowthView& growth() const { return growth_; }
  const AdviseView& advise() const { return advise_; }
  const RanksView& ranks() const { return ranks_; }
  RanksView& ranks() { return ranks_; }
  // Screenshots for pictures leave out the search box and the key hints.
  bool chrome = true;
  float status_y() const { return status_y_; }  // top of the status bar in the last frame

 private:
  void open_window();
  // Shows the first document: the run's activity, at the peak.
  void show(std::unique_ptr<Document> doc);
  // Following a file, a document read again or extended keeps the view: its zoom and pan (a view fitted to the run,
  // or showing its end, follows the run's growth), its instant (the peak moves with the peak), its tab and the
  // selected block. kept() notes how the view stands before, keep() applies it after.
  struct Kept {
    double end;  // of the run, ns after its first event
    bool untouched, at_end, at_peak;
  };
  Kept kept() const;
  void keep(const Kept& was);
  void follow();
  void build_ui();
  void draw_panels(float height);
  // Opens rank `index` of the document's ranks in the views, keeping the ranks view as it is.
  void open_rank(size_t index);
  double run_frame(bool empty);

  std::unique_ptr<Document> doc_;
  ViewState state_;
  std::unique_ptr<Follower> follower_;
  std::optional<std::pair<double, double>> fitted_;  // t0 and span as fitted last, to tell whether the user moved
  GLFWwindow* window_ = nullptr;
  int width_, height_;
  bool offscreen_;
  unsigned framebuffer_ = 0, color_ = 0;
  float frame_ms_ = 0;
  float status_y_ = 0;
  TimelineView timeline_;
  LanesView lanes_;
  SegmentsView segments_;
  FlameView flame_;
  FlameView modules_{FlameView::Mode::modules};
  SearchView search_;
  GrowthView growth_;
  AdviseView advise_;
  Focus shown_focus_ = Focus::timeline;  // the tab last selected, so a change of state.focus selects its tab
  RanksView ranks_;
};

}  // namespace memrec::viewer
