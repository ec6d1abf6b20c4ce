// `memrec view --follow`: a real window (off-screen, under Xvfb) follows a recording that the format's Writer writes
// in steps, as the recorder's drain thread does, while frames are drawn.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "../../bench/synthetic_training.h"
#include "../../viewer/src/app.h"
#include "common/process.h"
#include "common/xvfb.h"
#include "memrec/format.h"

namespace memrec {
namespace {

using viewer::App;

// A recording written as it grows: its tables and scopes first, then events flush by flush.
class GrowingFile {
 public:
  GrowingFile(const std::string& path, size_t events) : full_(make_training_history(events, 5)) {
    s_ = full_.with_tables();
    s_.scopes = full_.scopes;
    writer_.emplace(path);
  }
  void grow_to(size_t events) {
    for (size_t i = s_.events.size(); i < events; ++i) s_.events.push_back(full_.events[i]);
    writer_->flush(s_);
  }
  void close() {
    grow_to(full_.events.size());
    writer_->close(s_);
  }

 private:
  Snapshot full_, s_;
  std::optional<Writer> writer_;
};

// Draws frames until `done` holds (a reload runs on its own thread, started at most 250 ms after a change).
template <class Fn> bool frames_until(App& app, Fn done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    app.frame();
    if (done()) return true;
  }
  return false;
}

size_t events_shown(App& app) { return app.loaded() ? app.doc().snapshot.events.size() : 0; }

TEST(Follow, PicksUpTheEventsWrittenKeepingTheView) {
  if (test::rerun_under_xvfb()) return;
  test::TempDir dir;
  std::string path = dir / "run.memrec";
  App app(std::make_unique<viewer::Follower>(path, std::nullopt), 1280, 720, true);
  ASSERT_TRUE(frames_until(app, [&] { return app.follow_line().find("it does not exist yet") != std::string::npos; }));
  EXPECT_EQ(app.follow_line(), "waiting for run.memrec: it does not exist yet");
  EXPECT_FALSE(app.loaded());

  GrowingFile file(path, 60000);
  file.grow_to(20000);
  ASSERT_TRUE(frames_until(app, [&] { return events_shown(app) == 20000; })) << app.follow_line();
  EXPECT_EQ(app.follow_line(), "following run.memrec: 20000 events, still being written");
  EXPECT_FALSE(app.doc().snapshot.complete);

  // The user zooms into the first half, picks an instant and opens the segments tab.
  viewer::ViewState& st = app.state();
  st.zoom(0.25, st.t0 + st.span * 0.2);
  st.set_instant(app.doc(), 5000);
  st.focus = viewer::Focus::segments;
  app.frame();
  double t0 = st.t0, span = st.span;

  file.grow_to(40000);
  ASSERT_TRUE(frames_until(app, [&] { return events_shown(app) == 40000; })) << app.follow_line();
  EXPECT_EQ(st.t0, t0);
  EXPECT_EQ(st.span, span);
  EXPECT_EQ(st.instant, 5000u);
  EXPECT_EQ(st.focus, viewer::Focus::segments);
  EXPECT_GT(app.doc().replay->steps(), 5000u);
  EXPECT_FALSE(app.segments().segments().empty());  // drawn from the new document

  file.close();
  ASSERT_TRUE(frames_until(app, [&] { return events_shown(app) == 60000; })) << app.follow_line();
  EXPECT_TRUE(app.doc().snapshot.complete);
  EXPECT_EQ(app.follow_line(), "following run.memrec: 60000 events, complete (its writer closed it)");
}

TEST(Follow, AViewFittedToTheRunGrowsWithIt) {
  if (test::rerun_under_xvfb()) return;
  test::TempDir dir;
  std::string path = dir / "run.memrec";
  GrowingFile file(path, 40000);
  file.grow_to(10000);
  App app(std::make_unique<viewer::Follower>(path, std::nullopt), 1280, 720, true);
  ASSERT_TRUE(frames_until(app, [&] { return events_shown(app) == 10000; })) << app.follow_line();
  const viewer::ViewState& st = app.state();
  double first_span = st.span;
  uint32_t first_peak = st.instant;
  EXPECT_EQ(first_peak, app.doc().replay->peak_allocated().step);

  file.close();
  ASSERT_TRUE(frames_until(app, [&] { return events_shown(app) == 40000; })) << app.follow_line();
  const Timeline& tl = *app.doc().timeline;
  EXPECT_GT(st.span, 3 * first_span);  // the whole run, four times longer
  EXPECT_GE(st.t1(), static_cast<double>(tl.end_ns() - tl.begin_ns()));
  EXPECT_EQ(st.instant, app.doc().replay->peak_allocated().step);  // the peak so far moves with the peak
}

TEST(Follow, AFailedReadKeepsThePictureAndSaysWhy) {
  if (test::rerun_under_xvfb()) return;
  test::TempDir dir;
  std::string path = dir / "run.memrec";
  {
    GrowingFile file(path, 20000);
    file.close();
  }
  App app(std::make_unique<viewer::Follower>(path, std::nullopt), 1280, 720, true);
  ASSERT_TRUE(frames_until(app, [&] { return events_shown(app) == 20000; })) << app.follow_line();
  std::ofstream(path) << "not a recording";  // another program wrote over it
  ASSERT_TRUE(frames_until(app, [&] { return app.follow_line().find("failed") != std::string::npos; }));
  EXPECT_TRUE(app.follow_line().starts_with(
      "following run.memrec: 20000 events, complete (its writer closed it) | the last read failed, this is the one "
      "before: "))
      << app.follow_line();
  EXPECT_EQ(events_shown(app), 20000u);
  for (int i = 0; i < 3; ++i) app.frame();  // the views still draw the document kept
  GrowingFile again(path, 30000);
  again.close();
  ASSERT_TRUE(frames_until(app, [&] { return events_shown(app) == 30000; })) << app.follow_line();
  EXPECT_EQ(app.follow_line().find("failed"), std::string::npos);
}

TEST(Follow, RefusesAScreenshotAndKeepsCheckingFilesWithout) {
  test::TempDir dir;
  auto r = test::run_command(std::string(MEMREC_BINARY) + " view --follow " + dir / "run.memrec" +
                             " --screenshot " + dir / "out.png");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--follow shows a recording in a window while it is written and --screenshot draws one "
                          "picture: drop one of them"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out.png"));
  // Without --follow a missing file is refused before anything opens, as before.
  r = test::run_command(std::string(MEMREC_BINARY) + " view " + dir / "none.memrec");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("file: File does not exist: " + dir / "none.memrec"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace memrec
