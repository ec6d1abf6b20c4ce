// `memrec view --follow`'s refresh: a window follows a recording of N events (bench/synthetic_training.h) and the
// file changes; measured is the time from the change to the new document drawn (the follower's check, the reload
// on its thread, the swap), and the frames drawn meanwhile. The reload reads the whole file, so this time bounds how
// often the window refreshes at that size.
// Run under Xvfb: xvfb-run -a build/viewer/bench_follow 1000000 10000000
#include <GL/gl.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app.h"
#include "memrec/format.h"
#include "synthetic_training.h"

namespace {

using namespace memrec;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Refresh {
  double seconds = 0;
  int frames = 0;
  double slowest_frame_ms = 0;
};

// Draws frames until the app shows a document other than `shown` (0: any).
Refresh frames_until_swapped(viewer::App& app, uint64_t shown) {
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

void run_size(size_t events, const std::string& path) {
  write_file(make_training_history(events, 11), path);
  viewer::App app(std::make_unique<viewer::Follower>(path, std::nullopt), 1280, 720, true);
  Refresh first = frames_until_swapped(app, 0);
  std::vector<Refresh> refreshes;
  for (int i = 0; i < 3; ++i) {
    for (int f = 0; f < 10; ++f) app.frame();
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now());  // as a flush does
    refreshes.push_back(frames_until_swapped(app, app.doc().id));
  }
  std::sort(refreshes.begin(), refreshes.end(), [](auto& a, auto& b) { return a.seconds < b.seconds; });
  const Refresh& median = refreshes[1];
  fmt::print("| {} | {:.2f} s | {:.2f} s ({:.2f}–{:.2f}) | {} | {:.0f} ms |\n", events, first.seconds, median.seconds,
             refreshes.front().seconds, refreshes.back().seconds, median.frames, median.slowest_frame_ms);
  std::fflush(stdout);
  std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::stoull(argv[i]));
  if (sizes.empty()) sizes = {1'000'000, 10'000'000};
  std::string path = std::filesystem::temp_directory_path() / "memrec_bench_follow.memrec";
  fmt::print("| events | first document | change to new document drawn, median of 3 (range) | frames drawn meanwhile | "
             "slowest of them |\n|---:|---:|---:|---:|---:|\n");
  try {
    for (size_t n : sizes) run_size(n, path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_follow: {}\n", e.what());
    return 1;
  }
  return 0;
}
