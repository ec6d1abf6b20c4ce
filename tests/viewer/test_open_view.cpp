// What `memrec view` opens on: the whole recording, except an idle prologue (a few events, then a pause longer than
// the rest of the run), which would squash the steps into a sliver.
#include <gtest/gtest.h>

#include "../../bench/synthetic.h"
#include "common/process.h"
#include "memrec/format.h"
#include "viewer/shot.h"

namespace memrec {
namespace {

struct Opened {
  double from_ns, to_ns;  // the plot's time range, after the first event
  int64_t gap_end_ns, end_ns;
};

// A synthetic run whose events after the first `prologue` are moved `pause` times the rest's length later.
Opened open_with_pause(size_t prologue, double pause, const test::TempDir& dir) {
  Snapshot s = make_synthetic(20000, 7);
  std::vector<Event> events(s.events.begin(), s.events.end());
  int64_t begin = events.front().time_ns, rest = events.back().time_ns - events[prologue].time_ns;
  auto shift = static_cast<int64_t>(pause * static_cast<double>(rest));
  for (size_t i = prologue; i < events.size(); ++i) events[i].time_ns += shift;
  s.events.assign(events);
  std::string path = dir / "run.memrec";
  write_file(s, path);
  test::Shot shot = test::screenshot(path, "--size 1024x600", dir);
  const auto& L = shot.layout;
  double t0 = L["t0_ns"].get<double>(), dt = L["dt_ns"].get<double>();
  return {t0, t0 + dt * L["plot"]["w"].get<double>(), events[prologue].time_ns - begin, events.back().time_ns - begin};
}

TEST(OpenView, LeavesOutAnIdlePrologue) {
  test::TempDir dir;
  Opened o = open_with_pause(300, 20, dir);
  double rest = static_cast<double>(o.end_ns - o.gap_end_ns);
  EXPECT_GE(o.from_ns, static_cast<double>(o.gap_end_ns) - 0.05 * rest);
  EXPECT_LE(o.from_ns, static_cast<double>(o.gap_end_ns));
  EXPECT_GE(o.to_ns, static_cast<double>(o.end_ns));
  EXPECT_LE(o.to_ns - o.from_ns, 1.2 * rest);  // the steps fill the plot
}

TEST(OpenView, ShowsEverythingWithoutAPrologue) {
  test::TempDir dir;
  // A short pause, and a long one after most of the events: neither is a prologue.
  for (auto [prologue, pause] : {std::pair<size_t, double>{300, 0.5}, std::pair<size_t, double>{15000, 20}}) {
    Opened o = open_with_pause(prologue, pause, dir);
    EXPECT_LE(o.from_ns, 0) << prologue;
    EXPECT_GE(o.to_ns, static_cast<double>(o.end_ns)) << prologue;
  }
}

}  // namespace
}  // namespace memrec
