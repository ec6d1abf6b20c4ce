#include "app.h"

#define GLFW_INCLUDE_GLEXT
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <chrono>
#include <ctime>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memrec/stats_output.h"
#include "memrec/viewer.h"
#include "png.h"

namespace memrec::viewer {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// CPU time of this thread: what building a frame costs, whatever else the machine runs.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Framebuffer objects are core since OpenGL 3.0 but not in libGL's 1.x exports: fetch them from the context.
struct FramebufferApi {
  PFNGLGENFRAMEBUFFERSPROC gen = nullptr;
  PFNGLBINDFRAMEBUFFERPROC bind = nullptr;
  PFNGLFRAMEBUFFERTEXTURE2DPROC texture = nullptr;
  PFNGLCHECKFRAMEBUFFERSTATUSPROC status = nullptr;
  PFNGLDELETEFRAMEBUFFERSPROC del = nullptr;

  static FramebufferApi load() {
    FramebufferApi f;
    f.gen = reinterpret_cast<PFNGLGENFRAMEBUFFERSPROC>(glfwGetProcAddress("glGenFramebuffers"));
    f.bind = reinterpret_cast<PFNGLBINDFRAMEBUFFERPROC>(glfwGetProcAddress("glBindFramebuffer"));
    f.texture = reinterpret_cast<PFNGLFRAMEBUFFERTEXTURE2DPROC>(glfwGetProcAddress("glFramebufferTexture2D"));
    f.status = reinterpret_cast<PFNGLCHECKFRAMEBUFFERSTATUSPROC>(glfwGetProcAddress("glCheckFramebufferStatus"));
    f.del = reinterpret_cast<PFNGLDELETEFRAMEBUFFERSPROC>(glfwGetProcAddress("glDeleteFramebuffers"));
    if (!f.gen || !f.bind || !f.texture || !f.status || !f.del) throw Error("OpenGL has no framebuffer objects");
    return f;
  }
};

// The inspector starts on the biggest block live at the instant that has a stack: the usual first question.
uint32_t largest_with_stack(const Document& doc, uint32_t step) {
  std::vector<uint32_t> live;
  doc.timeline->live_at(step, live);
  const Replay& r = *doc.replay;
  uint32_t best = kNone;
  for (uint32_t id : live)
    if (r.stack_of(id) != 0 && (best == kNone || r.size_of(id) > r.size_of(best))) best = id;
  return best;
}

}  // namespace

App::App(const std::string& path, std::optional<uint8_t> device, int width, int height, bool offscreen)
    : App(std::async(std::launch::async, Document::open, path, device, std::nullopt, stderr), width, height,
          offscreen) {}

App::App(std::future<std::unique_ptr<Document>> loading, int width, int height, bool offscreen)
    : width_(width), height_(height), offscreen_(offscreen) {
  open_window();
  show(loading.get());
}

App::App(std::unique_ptr<Follower> follower, int width, int height, bool offscreen)
    : follower_(std::move(follower)), width_(width), height_(height), offscreen_(offscreen) {
  open_window();
  glfwSetWindowTitle(window_, ("memrec - following " + follower_->path()).c_str());
}

void App::open_window() {
  if (!glfwInit()) throw Error("cannot open a window: no display (set DISPLAY, or run under xvfb-run -a)");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  if (offscreen_) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  window_ = glfwCreateWindow(offscreen_ ? 64 : width_, offscreen_ ? 64 : height_, "memrec", nullptr, nullptr);
  if (!window_) {
    glfwTerminate();
    throw Error("cannot create an OpenGL 3.0 window");
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(0);  // frame times measure our work, not the display's refresh
  if (offscreen_) {
    FramebufferApi fb = FramebufferApi::load();
    glGenTextures(1, &color_);
    glBindTexture(GL_TEXTURE_2D, color_);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width_, height_, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    fb.gen(1, &framebuffer_);
    fb.bind(GL_FRAMEBUFFER, framebuffer_);
    fb.texture(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, color_, 0);
    if (GLenum status = fb.status(GL_FRAMEBUFFER); status != GL_FRAMEBUFFER_COMPLETE)
      throw Error(fmt::format("cannot render off-screen: a {}x{} framebuffer is incomplete (status 0x{:x}, {})", width_,
                              height_, status, reinterpret_cast<const char*>(glGetString(GL_RENDERER))));
  }
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed; do not litter the working folder
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 130");
}

void App::show(std::unique_ptr<Document> doc) {
  doc_ = std::move(doc);
  glfwSetWindowTitle(window_, ((follower_ ? "memrec - following " : "memrec - ") + doc_->path).c_str());
  state_.fit_activity(*doc_);
  fitted_ = {state_.t0, state_.span};
  state_.set_instant(*doc_, doc_->replay->peak_allocated().step);
}

App::Kept App::kept() const {
  const Document& doc = *doc_;
  double end = static_cast<double>(doc.timeline->end_ns() - doc.timeline->begin_ns());
  return {end, fitted_ && state_.t0 == fitted_->first && state_.span == fitted_->second, state_.t1() >= end,
          state_.instant == doc.replay->peak_allocated().step};
}

void App::keep(const Kept& was) {
  const Document& doc = *doc_;
  double end = static_cast<double>(doc.timeline->end_ns() - doc.timeline->begin_ns());
  if (was.untouched) state_.fit_activity(doc), fitted_ = {state_.t0, state_.span};
  else if (was.at_end) state_.pan(end - was.end);
  uint32_t instant = was.at_peak || (state_.instant != kNoEvent && state_.instant >= doc.replay->steps())
                         ? doc.replay->peak_allocated().step : state_.instant;
  state_.attribution.reset();  // of the blocks before
  state_.set_instant(doc, instant);
  if (state_.selected_allocation != kNone && state_.selected_allocation >= doc.replay->allocations().size())
    state_.selected_allocation = kNone;
  state_.clear_highlight();
}

void App::follow() {
  std::unique_ptr<Document> next = follower_->poll();
  if (doc_ && follower_->grew()) {
    Kept was = kept();
    if (follower_->extend(*doc_)) keep(was);
    return;
  }
  if (!next) return;
  if (doc_) {
    Kept was = kept();
    doc_ = std::move(next);
    return keep(was);
  }
  show(std::move(next));
  state_.selected_allocation = largest_with_stack(*doc_, state_.instant);
}

std::string App::follow_line() const { return follower_ ? follower_->line(doc_.get()) : std::string(); }

App::~App() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  if (framebuffer_) FramebufferApi::load().del(1, &framebuffer_);
  if (color_) glDeleteTextures(1, &color_);
  glfwDestroyWindow(window_);
  glfwTerminate();
}

bool App::should_close() const { return glfwWindowShouldClose(window_); }

double App::frame() { return run_frame(false); }
double App::empty_frame() { return run_frame(true); }

double App::run_frame(bool empty) {
  glfwPollEvents();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (offscreen_) {
    io.DisplaySize = ImVec2(static_cast<float>(width_), static_cast<float>(height_));
    io.DisplayFramebufferScale = ImVec2(1, 1);
  }
  if (input) input(io);
  auto start = Clock::now();
  double cpu_start = thread_cpu_ms();
  ImGui::NewFrame();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                           ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollWithMouse;
  // The viewer clears to the window color instead of filling the screen a second time with the window's
  // background (the software rasterizer pays per pixel); the empty baseline keeps ImGui's default window.
  if (!empty) flags |= ImGuiWindowFlags_NoBackground;
  ImGui::Begin("memrec", nullptr, flags);
  if (!empty) build_ui();
  ImGui::End();
  ImGui::Render();
  double build_ms = thread_cpu_ms() - cpu_start;
  int w = width_, h = height_;
  if (!offscreen_) glfwGetFramebufferSize(window_, &w, &h);
  glViewport(0, 0, w, h);
  ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
  glClearColor(bg.x, bg.y, bg.z, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  glfwSwapBuffers(window_);
  frame_ms_ = static_cast<float>(ms_since(start));
  return build_ms;
}

void App::save_png(const std::string& path) const {
  glFinish();
  save_framebuffer_png(path, width_, height_);
}

void App::open_rank(size_t index) {
  std::shared_ptr<const RankSet> ranks = doc_->ranks;
  const RankRecording& r = ranks->ranks[index];
  std::unique_ptr<Document> doc;
  try {
    doc = Document::open(r.path, r.device);
  } catch (const Error& e) {  // a file damaged after its summary was written: the views keep the rank they show
    ranks_.open_error = fmt::format("rank {} cannot be opened: {}", r.rank, e.what());
    return;
  }
  ranks_.open_error.clear();
  doc_ = std::move(doc);
  doc_->ranks = ranks;
  doc_->rank_index = index;
  glfwSetWindowTitle(window_, ("memrec - " + doc_->path).c_str());
  state_.attribution.reset();  // of the other rank's blocks
  state_.selected_allocation = kNone;
  state_.clear_highlight();
  state_.fit_all(*doc_);
  state_.set_instant(*doc_, doc_->replay->peak_allocated().step);
}

void App::build_ui() {
  if (follower_) {
    follow();
    std::string line = follow_line();
    ImGui::TextUnformatted(line.c_str());
    if (!doc_) return;
  }
  if (doc_->ranks)
    if (auto picked = ranks_.draw(*doc_->ranks, doc_->rank_index, ImGui::GetContentRegionAvail().y * 0.4f))
      if (*picked != doc_->rank_index) open_rank(*picked);
  Document& doc = *doc_;
  if (chrome) search_.draw(doc, state_);
  // The status bar's line is kept free at the bottom of the window, whatever the views above ask for.
  float status = ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().ItemSpacing.y + 2;
  float total = ImGui::GetContentRegionAvail().y - status;
  float lanes = LanesView::height_for(doc);
  // The flame graph and the segments want rows of their own: the timeline gives them room when they are shown.
  float share = state_.focus == Focus::timeline ? 0.55f : 0.35f;
  float timeline = std::max(120.0f, (total - lanes) * share);
  timeline_.draw(doc, state_, timeline);
  lanes_.draw(doc, state_, timeline_.grid());
  draw_panels(std::max(80.0f, ImGui::GetContentRegionAvail().y - status));
  ImVec2 window_bottom(ImGui::GetWindowPos().x, ImGui::GetWindowPos().y + ImGui::GetWindowHeight());
  ImGui::SetCursorScreenPos(ImVec2(ImGui::GetCursorScreenPos().x, window_bottom.y - status));
  status_y_ = ImGui::GetCursorScreenPos().y;
  draw_status_bar(doc, state_, frame_ms_);
}

void App::draw_panels(float height) {
  Document& doc = *doc_;
  float bottom = ImGui::GetCursorScreenPos().y + height;
  // Each tab's content ends at the panel's bottom, so a long list scrolls instead of running under the status bar.
  auto content = [&](const char* name) { return ImGui::BeginChild(name, ImVec2(0, bottom - ImGui::GetCursorScreenPos().y - 4)); };
  if (!ImGui::BeginTable("panels", 2, ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV, ImVec2(0, height)))
    return;
  ImGui::TableSetupColumn("views", ImGuiTableColumnFlags_WidthStretch, 0.65f);
  ImGui::TableSetupColumn("inspector", ImGuiTableColumnFlags_WidthStretch, 0.35f);
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  bool refocus = shown_focus_ != state_.focus;
  // A tab whose content (a child window of that id) `draw` fills while it is selected.
  auto tab = [&](const char* name, Focus focus, const char* child, auto draw) {
    ImGuiTabItemFlags flags = refocus && state_.focus == focus ? ImGuiTabItemFlags_SetSelected : 0;
    if (!ImGui::BeginTabItem(name, nullptr, flags)) return;
    if (!refocus) state_.focus = focus;
    shown_focus_ = state_.focus;
    if (content(child)) draw();
    ImGui::EndChild();
    ImGui::EndTabItem();
  };
  if (ImGui::BeginTabBar("views")) {
    tab("attribution", Focus::timeline, "attribution", [&] { draw_attribution(doc, state_); });
    tab("flame graph", Focus::flame, "flame", [&] { flame_.draw(doc, state_); });
    tab("segments", Focus::segments, "segments", [&] { segments_.draw(doc, state_); });
    tab("modules", Focus::modules, "modules", [&] { modules_.draw(doc, state_); });
    tab("growth", Focus::growth, "growth", [&] { growth_.draw(doc, state_); });
    tab("advice", Focus::advise, "advice", [&] { advise_.draw(doc, state_); });
    ImGui::EndTabBar();
  }
  if (state_.focus != Focus::advise) state_.ghost.reset();  // the advice's curve is drawn while its tab is shown
  ImGui::TableNextColumn();
  ImGui::TextUnformatted("inspector");
  ImGui::Separator();
  if (content("inspector")) draw_inspector(doc, state_);
  ImGui::EndChild();
  ImGui::EndTable();
}

namespace {

nlohmann::json flame_layout(const FlameView& f) {
  nlohmann::json boxes = nlohmann::json::array();
  const Attribution* tree = f.tree();
  if (!tree) return nullptr;
  // The top rows: enough for tests to check the graph against a replay, few enough to print.
  for (const FlameView::Box& b : f.boxes()) {
    if (b.depth > 3 || boxes.size() >= 400) continue;
    const GroupNode& n = tree->nodes()[b.node];
    boxes.push_back({{"depth", b.depth}, {"x0", b.x0}, {"x1", b.x1}, {"bytes", n.bytes}, {"blocks", n.blocks},
                     {"key", n.key == kMissing ? -1 : static_cast<int64_t>(n.key)}, {"label", tree->label(b.node)}});
    if (!f.category_bytes().empty()) {
      nlohmann::json& by = boxes.back()["by_category"];
      for (int c = 0; c < kCategoryCount; ++c)
        if (uint64_t bytes = f.category_bytes()[b.node][c]) by[std::string(to_string(static_cast<Category>(c)))] = bytes;
    }
  }
  return {{"x", f.origin().x}, {"y", f.origin().y}, {"w", f.width()}, {"row_h", FlameView::row_height()},
          {"grouping", std::string(to_string(tree->grouping()))}, {"boxes", boxes}};
}

nlohmann::json segments_layout(App& app) {
  const SegmentsView& v = app.segments();
  nlohmann::json bars = nlohmann::json::array();
  for (const SegmentsView::Bar& b : v.bars()) {
    const SegmentAt& s = v.segments()[b.segment];
    nlohmann::json pending = nlohmann::json::array();
    for (uint32_t id : v.pending()[b.segment]) pending.push_back(id);
    bars.push_back({{"addr", s.addr}, {"size", s.size}, {"x", b.x}, {"y", b.y}, {"w", b.width},
                    {"blocks", s.blocks}, {"pending", pending}});
  }
  return {{"bar_h", SegmentsView::bar_height()}, {"count", v.segments().size()}, {"bars", bars}};
}

// The attribution panel's rows: the flat groups, or the tree's top level.
nlohmann::json attribution_layout(const Document& doc, ViewState& st) {
  st.group(doc);
  nlohmann::json rows = nlohmann::json::array();
  if (st.flat) {
    for (const Group& g : st.flat_groups) rows.push_back({{"key", g.key}, {"bytes", g.bytes}, {"blocks", g.count}});
  } else {
    const Attribution& at = *st.attribution;
    for (uint32_t c : at.root().children)
      rows.push_back({{"key", at.label(c)}, {"bytes", at.nodes()[c].bytes}, {"blocks", at.nodes()[c].blocks}});
  }
  return {{"grouping", st.flat ? std::string(st.flat == GroupBy::stack ? "site" : to_string(*st.flat))
                               : std::string(to_string(st.grouping))},
          {"rows", rows}};
}

// One JSON line on stdout: where the plot (and the flame graph or segment bars) are and what they show, for tests
// and scripts.
void print_layout(App& app, const std::string& png, int height) {
  const ColumnGrid& g = app.timeline().grid();
  ViewState& st = app.state();
  static constexpr const char* kFocus[] = {"timeline", "flame", "segments", "modules", "growth", "advise"};
  nlohmann::json out = {
      {"png", png},
      {"view", kFocus[static_cast<int>(st.focus)]},
      {"plot", {{"x", g.x}, {"y", g.y}, {"w", g.width}, {"h", app.timeline().plot_height()}}},
      {"t0_ns", g.t0},  // after begin_ns
      {"dt_ns", g.dt},
      {"bytes_per_row", app.timeline().bytes_per_row()},
      {"begin_ns", app.doc().timeline->begin_ns()},
      {"device", app.doc().device},
      {"instant_step", st.instant == kNoEvent ? -1 : static_cast<int64_t>(st.instant)},
      {"selected", st.selected_allocation == kNone ? -1 : static_cast<int64_t>(st.selected_allocation)},
      {"status_y", app.status_y()},
      {"height", height},
  };
  if (st.focus == Focus::timeline) out["attribution"] = attribution_layout(app.doc(), app.state());
  if (st.focus == Focus::flame) out["flame"] = flame_layout(app.flame());
  if (st.focus == Focus::modules) out["modules"] = flame_layout(app.modules());
  if (st.focus == Focus::segments) out["segments"] = segments_layout(app);
  if (st.focus == Focus::growth) out["growth"] = app.growth().layout();
  if (st.focus == Focus::advise) out["advise"] = app.advise().layout();
  if (app.doc().ranks) out["ranks"] = app.ranks().layout(*app.doc().ranks);
  if (nlohmann::json ghost = app.timeline().ghost_layout(app.doc(), st); !ghost.is_null()) out["ghost"] = ghost;
  fmt::print("{}\n", out.dump());
  std::fflush(stdout);
}

// The flags that aim a screenshot, checked before any window opens.
struct Aim {
  Focus focus = Focus::timeline;
  Grouping grouping = Grouping::stack_top_down;
  std::optional<GroupBy> flat = GroupBy::stack;  // the panel opens on the sites; the flame graph on the stack tree
  std::optional<Range> part;  // read only this part of the file
  std::optional<std::pair<int64_t, int64_t>> range;  // what the flame graph or module view shows
  std::optional<std::pair<int64_t, int64_t>> zoom;   // the timeline's visible span
};

Aim parse_aim(const Options& o) {
  Aim aim;
  if (o.view == "flame") aim.focus = Focus::flame;
  else if (o.view == "segments") aim.focus = Focus::segments;
  else if (o.view == "modules") aim.focus = Focus::modules;
  else if (o.view == "growth") aim.focus = Focus::growth;
  else if (o.view == "advise") aim.focus = Focus::advise;
  else if (!o.view.empty() && o.view != "timeline")
    throw Error("--view wants timeline, flame, segments, modules, growth or advise, got '" + o.view + "'");
  static const std::pair<const char*, Grouping> kTrees[] = {
      {"stack", Grouping::stack_top_down}, {"stack-bottom-up", Grouping::stack_bottom_up},
      {"op", Grouping::op}, {"module", Grouping::module}, {"phase", Grouping::phase}};
  static const std::pair<const char*, GroupBy> kFlat[] = {
      {"site", GroupBy::stack}, {"category", GroupBy::category}, {"layer", GroupBy::layer}, {"pool", GroupBy::pool}};
  bool known = o.group_by.empty();
  for (auto [name, g] : kTrees)
    if (o.group_by == name) aim.grouping = g, aim.flat.reset(), known = true;
  for (auto [name, by] : kFlat)
    if (o.group_by == name) aim.flat = by, known = true;
  if (!known)
    throw Error("--group-by wants stack, stack-bottom-up, op, module, phase, site, category, layer or pool, got '" +
                o.group_by + "'");
  // --range T1..T2 is drawn as on the whole recording: the timeline zoomed to it (the whole file read, so it pans
  // out of the range), or the flame graph or module view of the bytes allocated in it; those read only the range
  // where that shows the same, one file with no --at (which, like the range, counts from the recording's start).
  // --steps A..B reads only those steps of one file, for every view.
  std::optional<Range> part = parse_range(o.range, o.steps);
  if (part && o.view.empty()) aim.focus = Focus::flame;  // a range alone asks for the bytes allocated in it
  if (part && part->kind == Range::Kind::time) {
    if (aim.focus == Focus::segments) throw Error("--range is drawn by --view timeline, flame or modules");
    std::pair span{part->first, part->last};
    if (aim.focus == Focus::timeline) aim.zoom = span;
    else if (o.ranks.size() > 1 || !o.at.empty()) aim.range = span;
    else aim.part = part;
  } else if (part) {
    if (o.ranks.size() > 1) throw Error(part->flag + " reads a part of one file, not of several ranks");
    aim.part = part;
  }
  if (aim.focus == Focus::flame && aim.flat && !o.group_by.empty())
    throw Error("--view flame draws a tree: --group-by stack, stack-bottom-up, op, module or phase");
  return aim;
}

// Checks --follow's company before any window opens.
void check_follow(const Options& o) {
  if (!o.screenshot.empty())
    throw Error("--follow shows a recording in a window while it is written and --screenshot draws one picture: "
                "drop one of them");
  if (!o.ranks.empty()) throw Error("--follow follows one file, not several ranks");
  if (!o.at.empty()) throw Error("--follow opens on the peak so far and keeps it as the file grows: drop --at");
  if (!o.range.empty() || !o.steps.empty())
    throw Error("--follow shows the whole file as it grows: drop --range and --steps");
}

// Applies the flags that aim the views (the tab, the grouping, the frames, a range).
void aim_views(ViewState& st, const Aim& aim, const Options& options) {
  st.focus = aim.focus;
  st.grouping = aim.grouping;
  st.frames = options.every_frame ? Frames::all : Frames::user;
  st.flat = aim.flat;
  st.range = aim.range;
}

int follow(const Options& options, const Aim& aim) {
  App app(std::make_unique<Follower>(options.path, options.device), options.width, options.height, false);
  aim_views(app.state(), aim, options);
  while (!app.should_close()) app.frame();
  return 0;
}

}  // namespace

std::optional<std::pair<int, int>> parse_size(std::string_view text) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(std::string(text).c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || x != 'x') return std::nullopt;
  if (w < 320 || h < 240 || w > 8192 || h > 8192) return std::nullopt;
  return std::pair{w, h};
}

int run(const Options& options) {
  if (options.follow) check_follow(options);
  std::optional<int64_t> at = options.at.empty() ? std::nullopt : parse_at(options.at);  // checked before anything opens
  Aim aim = parse_aim(options);
  if (options.ghost && aim.part)
    throw Error("--scale-with draws over the whole recording: --range only with --view timeline, and no --steps");
  if (options.follow) return follow(options, aim);
  bool offscreen = !options.screenshot.empty();
  auto loading = options.ranks.size() > 1
                     ? std::async(std::launch::async, open_ranks, options.ranks, options.device)
                     : std::async(std::launch::async, Document::open, options.path, options.device, aim.part,
                                  stderr);
  App app(std::move(loading), options.width, options.height, offscreen);
  app.chrome = !offscreen;  // pictures show the views, not the search box and key hints
  app.doc().ghost = options.ghost;
  ViewState& st = app.state();
  aim_views(st, aim, options);
  if (aim.part && (aim.focus == Focus::flame || aim.focus == Focus::modules))  // the bytes its events allocated
    st.range = {0, app.doc().timeline->end_ns() - app.doc().timeline->begin_ns()};
  if (aim.zoom) st.t0 = static_cast<double>(aim.zoom->first), st.span = static_cast<double>(aim.zoom->second - aim.zoom->first);
  InstantShown found = find_instant(*app.doc().replay, at);
  if (std::string note = instant_note(found); !note.empty()) fmt::print(stderr, "memrec view: note: {}\n", note);
  uint32_t instant = found.step;
  st.set_instant(app.doc(), instant);
  st.selected_allocation = largest_with_stack(app.doc(), instant);
  if (offscreen) {
    // ImGui sizes tables and trees over the first frames; the timeline may need a few more to paint every column.
    for (int i = 0; i < 4 || (!app.timeline().complete() && i < 1000); ++i) app.frame();
    app.save_png(options.screenshot);
    print_layout(app, options.screenshot, options.height);
    return 0;
  }
  while (!app.should_close()) app.frame();
  return 0;
}

}  // namespace memrec::viewer
