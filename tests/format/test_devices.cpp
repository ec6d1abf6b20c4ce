// Which device a command analyzes, what `--at` resolves to, and the one name each stream has everywhere.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "memrec/devices.h"
#include "memrec/perfetto.h"
#include "memrec/stats_output.h"
#include "memrec/timeline.h"

namespace memrec {
namespace {

void add(Snapshot& s, int64_t t, Action a, uint64_t addr, uint64_t size, uint8_t device) {
  s.events.push_back(Event{.time_ns = t, .addr = addr, .size = size, .action = a, .device = device});
}

TEST(ChooseDevice, UnsetIsTheFirstDeviceWithEvents) {
  Snapshot s;
  s.segments_end.push_back(Segment{.addr = 0x1000, .total_size = 4096, .device = 0});  // segments, no events
  add(s, 10, Action::alloc, 0x10, 64, 3);
  add(s, 20, Action::alloc, 0x20, 64, 2);
  EXPECT_EQ(choose_device(s, std::nullopt), 2);
  EXPECT_EQ(choose_device(s, 0), 0);  // its segments are worth a look when asked for
  EXPECT_EQ(choose_device(s, 3), 3);
}

TEST(ChooseDevice, ADeviceWithNothingIsAnError) {
  Snapshot s;
  add(s, 10, Action::alloc, 0x10, 64, 1);
  try {
    choose_device(s, 0);
    FAIL() << "device 0 has nothing";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--device 0: the recording has nothing on device 0 (it has device 1)");
  }
}

TEST(ChooseDevice, AnEmptyRecordingIsDeviceZero) {
  Snapshot s;
  EXPECT_EQ(choose_device(s, std::nullopt), 0);
  EXPECT_EQ(choose_device(s, 0), 0);
  EXPECT_THROW(choose_device(s, 1), Error);
}

TEST(ParseAt, UnitsAndLimits) {
  EXPECT_EQ(parse_at("peak"), std::nullopt);
  EXPECT_EQ(parse_at("1.5s"), 1'500'000'000);
  EXPECT_EQ(parse_at("12ms"), 12'000'000);
  EXPECT_EQ(parse_at("300us"), 300'000);
  EXPECT_EQ(parse_at("250ns"), 250);
  EXPECT_EQ(parse_at("2"), 2'000'000'000);  // a plain number is seconds
  EXPECT_EQ(parse_at("8000000000s"), 8'000'000'000'000'000'000);
  for (const char* bad : {"9223372036854775ms", "9.3e18ns", "1e300s", "-1s", "soon", "12 ms", "5h"})
    EXPECT_THROW(parse_at(bad), Error) << bad;
}

TEST(InstantAt, PastTheEndIsTheLastEventWithANote) {
  Snapshot s;
  add(s, 1'000'000'000, Action::alloc, 0x10, 64, 0);
  add(s, 1'500'000'000, Action::alloc, 0x20, 32, 0);
  add(s, 2'000'000'000, Action::free_requested, 0x10, 64, 0);
  Replay r(s, 0);
  EXPECT_EQ(find_instant(r, 0).step, 0u);
  EXPECT_EQ(find_instant(r, 499'999'999).step, 0u);
  EXPECT_EQ(find_instant(r, 500'000'000).step, 1u);
  InstantShown end = find_instant(r, 1'000'000'000);
  EXPECT_EQ(end.step, 2u);
  EXPECT_EQ(instant_note(end), "");
  for (int64_t past : {int64_t{6'000'000'000}, int64_t{8'000'000'000'000'000'000}}) {
    InstantShown i = find_instant(r, past);
    EXPECT_EQ(i.step, 2u);
    EXPECT_EQ(i.moved, InstantShown::Moved::past_end);
    EXPECT_NE(instant_note(i).find("is past the end of the recording (+1.000 s)"), std::string::npos) << instant_note(i);
  }
  EXPECT_EQ(find_instant(r, std::nullopt).step, r.peak_allocated().step);
}

// Kernels on the default stream and on a side stream whose raw handle is a process address.
Snapshot two_streams() {
  Snapshot s;
  uint16_t side = s.intern_stream(0x7f3a00001230);
  uint32_t name = s.strings.intern("gemm");
  s.kernels.push_back(Kernel{.start_ns = 100, .end_ns = 200, .name = name, .stream = 0});
  s.kernels.push_back(Kernel{.start_ns = 150, .end_ns = 300, .name = name, .stream = side});
  return s;
}

TEST(StreamName, LanesAndPerfettoNameStreamsAlike) {
  Snapshot s = two_streams();
  EXPECT_EQ(stream_name(s, 0), "stream 0 (default)");
  EXPECT_EQ(stream_name(s, 1), "stream 1");
  std::map<int, std::string> lanes;
  for (const Lane& lane : kernel_lanes(s, 0)) lanes[s.kernels[lane.ids[0]].stream] = lane.title;
  std::stringstream out;
  export_perfetto(s, out);
  std::map<int, std::string> threads;
  nlohmann::json trace = nlohmann::json::parse(out.str());
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 0) threads[e["tid"]] = e["args"]["name"];
  std::map<int, std::string> want = {{0, "stream 0 (default)"}, {1, "stream 1"}};
  EXPECT_EQ(lanes, want);
  EXPECT_EQ(threads, want);
}

}  // namespace
}  // namespace memrec
