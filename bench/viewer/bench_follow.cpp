// `memrec view --follow`'s refresh: a window follows a recording of N events (bench/synthetic_training.h) written
// the way the recorder writes it (flushes, no footer). Measured, at each size: the first document; the time from a
// flush of 100,000 more events (a quarter of a second of the recorder's sustained rate) to the grown document drawn
// (the follower's check, the read of the new chunks on its thread, the extension between two frames); and, with a
// writer thread appending 400,000 events/s in flushes every 50 ms for 10 s, how far the picture lags behind the file.
// Run under Xvfb: xvfb-run -a build/viewer/bench_follow 1000000 10000000
#include <GL/gl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "app.h"
#include "memrec/format.h"
#include "synthetic_training.h"

namespace {

using namespace memrec;
using Clock = std::chrono::steady_clock;

constexpr size_t kFlushEvents = 100'000;
constexpr double kRate = 400'000;  // events/s, the recorder's sustained rate (benchmarks.md, Long runs)
constexpr double kFollowSeconds = 10;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A recording written flush by flush: the scopes first, then events and the kernels started by the last of them.
class Recording {
 public:
  Recording(const std::string& path, size_t events) : full_(make_training_history(events, 11)) {
    give_distinct_addresses(full_);  // else frees of blocks the part read never allocated make the file read whole
    s_ = full_.with_tables();
    s_.scopes = full_.scopes;
    writer_.emplace(path);
  }
  size_t events() const { return s_.events.size(); }
  void grow_to(size_t events) {
    for (size_t i = s_.events.size(); i < std::min(events, full_.events.size()); ++i)
      s_.events.push_back(full_.events[i]);
    int64_t t = s_.events.back().time_ns;
    for (size_t k = s_.kernels.size(); k < full_.kernels.size() && full_.kernels[k].start_ns <= t; ++k)
      s_.kernels.push_back(full_.kernels[k]);
    writer_->flush(s_);
  }

 private:
  Snapshot full_, s_;
  std::optional<Writer> writer_;
};

struct Refresh {
  double seconds = 0;
  int frames = 0;
  double slowest_frame_ms = 0;
};

// Draws frames until the app shows a document other than `shown` (0: any).
Refresh frames_until_changed(viewer::App& app, uint64_t shown) {
  Refresh r;
  auto start = Clock::now();
  while (!app.loaded() || app.doc().id == shown) {
    auto t = Clock::now();
    app.frame();
    glFinish();
    r.slowest_frame_ms = std::max(r.slowest_frame_ms, seconds_since(t) * 1e3);
    ++r.frames;
  }
  r.seconds = seconds_since(start);
  return r;
}

// A thread appends at kRate while the window follows; the lag of a frame is how long ago the writer flushed the
// newest event it shows. Returns the median and the largest lag, and the events shown per second of the run.
struct Lag {
  double median = 0, max = 0, shown_rate = 0;
};
Lag follow_writer(viewer::App& app, Recording& run) {
  std::mutex m;
  std::vector<std::pair<size_t, Clock::time_point>> flushed{{run.events(), Clock::now()}};
  std::atomic<bool> done{false};
  size_t from = run.events();
  auto start = Clock::now();
  std::thread writer([&] {
    while (seconds_since(start) < kFollowSeconds) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      run.grow_to(from + static_cast<size_t>(seconds_since(start) * kRate));
      std::lock_guard lock(m);
      flushed.emplace_back(run.events(), Clock::now());
    }
    done = true;
  });
  std::vector<double> lags;
  size_t first_shown = app.doc().snapshot.events.size();
  while (!done) {
    app.frame();
    glFinish();
    size_t shown = app.doc().snapshot.events.size();
    std::lock_guard lock(m);
    auto it = std::lower_bound(flushed.begin(), flushed.end(), shown, [](auto& f, size_t n) { return f.first < n; });
    // Not yet flushed when shown: the picture is current. Else the flush after the newest shown event.
    auto newer = it == flushed.end() || it->first > shown ? it : it + 1;
    lags.push_back(newer == flushed.end() ? 0 : seconds_since(newer->second));
  }
  writer.join();
  Lag lag;
  lag.shown_rate = static_cast<double>(app.doc().snapshot.events.size() - first_shown) / seconds_since(start);
  std::sort(lags.begin(), lags.end());
  lag.median = lags[lags.size() / 2], lag.max = lags.back();
  return lag;
}

void run_size(size_t events, const std::string& path) {
  size_t extra = 3 * kFlushEvents + static_cast<size_t>(kRate * (kFollowSeconds + 1));
  Recording run(path, events + extra);
  run.grow_to(events);
  viewer::App app(std::make_unique<viewer::Follower>(path, std::nullopt), 1280, 720, true);
  Refresh first = frames_until_changed(app, 0);
  std::vector<Refresh> refreshes;
  for (int i = 0; i < 3; ++i) {
    for (int f = 0; f < 10; ++f) app.frame();
    run.grow_to(run.events() + kFlushEvents);
    refreshes.push_back(frames_until_changed(app, app.doc().id));
  }
  std::sort(refreshes.begin(), refreshes.end(), [](auto& a, auto& b) { return a.seconds < b.seconds; });
  const Refresh& median = refreshes[1];
  Lag lag = follow_writer(app, run);
  fmt::print("| {} | {:.2f} s | {:.3f} s ({:.3f}–{:.3f}) | {} | {:.0f} ms | {:.2f} s | {:.2f} s | {:.0f} |\n", events,
             first.seconds, median.seconds, refreshes.front().seconds, refreshes.back().seconds, median.frames,
             median.slowest_frame_ms, lag.median, lag.max, lag.shown_rate);
  std::fflush(stdout);
  std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::stoull(argv[i]));
  if (sizes.empty()) sizes = {1'000'000, 10'000'000};
  std::string path = std::filesystem::temp_directory_path() / "memrec_bench_follow.memrec";
  fmt::print("| events | first document | flush of 100,000 events to it drawn, median of 3 (range) | "
             "frames meanwhile | slowest of them | lag at 400,000 events/s, median | largest | events shown/s |\n"
             "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  try {
    for (size_t n : sizes) run_size(n, path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_follow: {}\n", e.what());
    return 1;
  }
  return 0;
}
