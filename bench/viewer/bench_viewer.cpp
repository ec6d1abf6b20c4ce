// Viewer benchmark: opens synthetic recordings of N events (bench/synthetic.h, plus op/module/phase scopes and
// kernels like a training loop), and measures load to first frame, resident bytes per event, CPU time to build a
// frame (NewFrame to Render) over a scripted pan/zoom, and full frame time against an empty window in the same run;
// then the flame graph of the peak (tree build, frames while hovering and click-zooming) and the segment history
// (frames while scrubbing the instant through the run).
// Run under Xvfb: xvfb-run -a build/viewer/bench_viewer 1000000 10000000
#include <GL/gl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app.h"
#include "memrec/format.h"
#include "synthetic.h"

namespace {

using namespace memrec;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

void write_recording(size_t events, const std::string& path) {
  Snapshot s = make_synthetic(events, 42);
  add_training_scopes_and_kernels(s);
  write_file(s, path);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// One frame with the GPU work finished, so the time includes the rasterizer.
double full_frame_ms(viewer::App& app, bool empty, double* build_ms) {
  auto t = Clock::now();
  double build = empty ? app.empty_frame() : app.frame();
  glFinish();
  if (build_ms) *build_ms = build;
  return seconds_since(t) * 1e3;
}

// Zoom into the peak, pan across at several zooms, jump around, zoom out: every frame changes the view.
std::vector<double> scripted_pan_zoom(viewer::App& app, std::vector<double>& full) {
  std::vector<double> build;
  viewer::ViewState& st = app.state();
  const viewer::Document& doc = app.doc();
  auto frame = [&] {
    double b = 0;
    full.push_back(full_frame_ms(app, false, &b));
    build.push_back(b);
  };
  double peak = static_cast<double>(doc.replay->peak_allocated().time_ns - doc.timeline->begin_ns());
  st.fit_all(doc);
  for (int i = 0; i < 60; ++i, frame()) st.zoom(0.8, peak);          // wheel zoom to ~1/600000 of the run
  for (int i = 0; i < 60; ++i, frame()) st.pan(st.span * 0.05);       // drag-pan while zoomed in
  for (int i = 0; i < 30; ++i, frame()) st.zoom(1.25, peak);
  for (int i = 0; i < 60; ++i, frame()) st.pan(-st.span * 0.03);      // pan at a middle zoom
  st.fit_all(doc);
  for (int i = 0; i < 60; ++i, frame()) st.pan(st.span * 0.002);      // pan fully zoomed out
  for (int i = 0; i < 30; ++i, frame()) st.zoom(i % 2 ? 3.0 : 1 / 3.0, peak);
  return build;
}

// Runs f in a child process and returns what it returns (a plain struct), so that neither the memory it takes
// nor the memory it frees (which a later allocation would find already faulted in) touches this process.
template <class T, class F>
T in_child(F f, const std::string& what) {
  int fds[2];
  if (pipe(fds) != 0) throw Error("pipe failed");
  pid_t child = fork();
  if (child == 0) {
    T result = f();
    _exit(write(fds[1], &result, sizeof result) == sizeof result ? 0 : 1);
  }
  close(fds[1]);
  T result{};
  bool got = read(fds[0], &result, sizeof result) == sizeof result;
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) throw Error("could not " + what);
  return result;
}

// Frame times of one scripted interaction: full frames (with the rasterizer) and their build CPU time.
struct Frames {
  std::vector<double> full, build;
  void add(viewer::App& app) {
    double b = 0;
    full.push_back(full_frame_ms(app, false, &b));
    build.push_back(b);
  }
  std::string describe() const {
    return fmt::format("build {:.1f} / {:.1f}, frame {:.1f} / {:.1f}", percentile(build, 0.5), percentile(build, 0.99),
                       percentile(full, 0.5), percentile(full, 0.99));
  }
};

struct ViewTimes {
  double categories_ms = 0;  // categorize() once: the attribution panel's category key needs it
  double flame_build_ms = 0;
  Frames flame_hover, flame_zoom, scrub;
};

// Shows `focus` (its tab is selected a frame after the state asks for it).
void show(viewer::App& app, viewer::Focus focus) {
  app.state().focus = focus;
  for (int i = 0; i < 3; ++i) app.frame();
}

// The flame graph of the peak: the tree built from the live set, then the mouse moved across the boxes (a tooltip
// each frame) and clicks that zoom in and out.
void flame_frames(viewer::App& app, ViewTimes& out) {
  viewer::ViewState& st = app.state();
  const viewer::Document& doc = app.doc();
  st.set_instant(doc, doc.replay->peak_allocated().step);
  show(app, viewer::Focus::flame);
  auto t = Clock::now();
  st.regroup(doc);
  out.flame_build_ms = seconds_since(t) * 1e3;
  ImVec2 mouse(-1, -1);
  bool down = false;
  app.input = [&](ImGuiIO& io) {
    io.MousePos = mouse;
    io.MouseDown[0] = down;
  };
  app.frame();  // lays the new tree out
  const viewer::FlameView& f = app.flame();
  ImVec2 o = f.origin();
  for (int i = 0; i < 100; ++i) {
    mouse = ImVec2(o.x + f.width() * static_cast<float>(i % 50) / 50, o.y + viewer::FlameView::row_height() * static_cast<float>(1 + i % 6));
    out.flame_hover.add(app);
  }
  for (int i = 0; i < 20; ++i) {
    // Press and release on the widest box of row 2 (zooming in), then on the zoomed box (zooming out).
    mouse = ImVec2(o.x + 2, o.y + viewer::FlameView::row_height() * 2.5f);
    down = true;
    out.flame_zoom.add(app);
    down = false;
    out.flame_zoom.add(app);
  }
  app.input = nullptr;
}

// Scrubbing: each frame shows the segments at another instant, spread over the whole run. Moving the instant (the
// slider does it inside the frame) counts in both columns.
void scrub_frames(viewer::App& app, ViewTimes& out) {
  show(app, viewer::Focus::segments);
  uint32_t steps = app.doc().replay->steps();
  for (uint32_t i = 0; i < 100; ++i) {
    auto t = Clock::now();
    app.state().set_instant(app.doc(), static_cast<uint32_t>(static_cast<uint64_t>(steps - 1) * (i * 37 % 100) / 99));
    double moved = seconds_since(t) * 1e3;
    out.scrub.add(app);
    out.scrub.full.back() += moved;
    out.scrub.build.back() += moved;
  }
}

struct LoadAlone {
  double seconds = 0;
  uint64_t data_rss = 0;
};

// Returns the line of the flame graph's and segment history's times, printed after the table.
std::string run_size(size_t events, const std::string& dir) {
  std::string path = dir + "/synthetic_" + std::to_string(events) + ".memrec";
  in_child<int>([&] { return write_recording(events, path), 0; }, "write " + path);
  // Loaded alone: the time and memory of the data, before any GL.
  auto alone = in_child<LoadAlone>([&] {
    uint64_t rss0 = rss_bytes();
    auto t = Clock::now();
    auto doc = viewer::Document::open(path, std::nullopt);
    return LoadAlone{seconds_since(t), rss_bytes() - rss0};
  }, "load " + path);
  // Then as `memrec view` opens a file, in a process that has loaded nothing yet: loading on one thread while
  // the window opens on another.
  auto t = Clock::now();
  viewer::App app(path, std::nullopt, 1280, 720, true);
  full_frame_ms(app, false, nullptr);
  double first_frame_s = seconds_since(t);
  uint64_t total_rss = rss_bytes();
  const viewer::Document& d = app.doc();
  size_t n = d.snapshot.events.size();

  std::vector<double> full;
  std::vector<double> build = scripted_pan_zoom(app, full);
  std::vector<double> still, empty;
  for (int i = 0; i < 100; ++i) still.push_back(full_frame_ms(app, false, nullptr));  // the view at rest
  for (int i = 0; i < 100; ++i) empty.push_back(full_frame_ms(app, true, nullptr));

  ViewTimes views;
  auto t_categories = Clock::now();
  categorize(d.snapshot, *d.replay);
  views.categories_ms = seconds_since(t_categories) * 1e3;
  flame_frames(app, views);
  scrub_frames(app, views);
  std::string views_line = fmt::format(
      "{} events: categories (once, when the panel groups by category) {:.0f} ms; flame graph of the peak built in {:.1f} ms; "
      "median / p99 ms: hovering it {}; click-zooming {}; scrubbing the segment history {}\n",
      n, views.categories_ms, views.flame_build_ms, views.flame_hover.describe(), views.flame_zoom.describe(), views.scrub.describe());
  fmt::print("| {:>11} | {:>9} | {:>8} | {:>6.2f} s | {:>6.2f} s | {:>7.1f} | {:>6.0f} MB | {:>6.2f} | {:>6.2f} | {:>6.1f} | {:>6.1f} | {:>6.1f} | {:>6.1f} | {:>5.2f}x |\n",
             n, d.snapshot.kernels.size(), d.snapshot.scopes.size() - 1, alone.seconds, first_frame_s,
             static_cast<double>(alone.data_rss) / n, static_cast<double>(total_rss) / 1e6, percentile(build, 0.5), percentile(build, 0.99), percentile(full, 0.5),
             percentile(full, 0.99), percentile(still, 0.5), percentile(empty, 0.5), percentile(full, 0.5) / percentile(empty, 0.5));
  std::fflush(stdout);
  std::filesystem::remove(path);
  return views_line;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::stoull(argv[i]));
  if (sizes.empty()) sizes = {1'000'000, 10'000'000};
  std::string dir = std::filesystem::temp_directory_path();
  fmt::print("| events | kernels | scopes | load | to first frame | data RSS B/event | process RSS | build median ms | build p99 ms | "
             "frame median ms | frame p99 ms | frame at rest ms | empty frame ms | frame / empty |\n");
  fmt::print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  try {
    std::vector<std::string> views;
    for (size_t n : sizes) views.push_back(run_size(n, dir));
    fmt::print("\n");
    for (const std::string& line : views) fmt::print("{}", line);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_viewer: {}\n", e.what());
    return 1;
  }
  return 0;
}
