// The Perfetto export parsed back and checked against the Chrome trace event format, event by event.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "memrec/perfetto.h"

namespace memrec {
namespace {

Snapshot history_with_everything() {
  Snapshot s;
  uint16_t side = s.intern_stream(0x55);
  auto ev = [&](int64_t t, Action a, uint64_t addr, uint64_t size, uint8_t device = 0) {
    s.events.push_back(Event{.time_ns = t, .addr = addr, .size = size, .action = a, .device = device});
  };
  ev(1000, Action::segment_alloc, 0x0, 1 << 21);
  ev(2000, Action::alloc, 0x0, 4096);
  ev(2500, Action::alloc, 0x100, 77, 1);
  ev(3000, Action::oom, 1 << 20, 1 << 30);
  ev(4000, Action::free_requested, 0x0, 4096);
  ev(4001, Action::free_completed, 0x0, 4096);
  s.kernels.push_back(Kernel{.start_ns = 1500, .end_ns = 3500, .correlation = 7, .name = s.strings.intern("gemm\"quoted\""), .stream = side});
  s.kernels.push_back(Kernel{.start_ns = 3600, .end_ns = 3700, .bytes = 4096, .name = s.strings.intern("memcpy HtoD"), .kind = KernelKind::memcpy});
  s.scopes.push_back(Scope{1000, 3000, s.strings.intern("forward"), 0, ScopeKind::phase, 0});
  s.scopes.push_back(Scope{1200, -1, s.strings.intern("never closed"), 1, ScopeKind::op, 0});
  return s;
}

TEST(Perfetto, EveryEventIsWellFormed) {
  Snapshot s = history_with_everything();
  std::stringstream out;
  export_perfetto(s, out);
  nlohmann::json trace = nlohmann::json::parse(out.str());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::map<std::string, int> phases;
  double last_counter_ts = -1;
  for (const auto& e : trace["traceEvents"]) {
    std::string ph = e.at("ph");
    ++phases[ph];
    EXPECT_TRUE(e.at("name").is_string());
    EXPECT_TRUE(e.at("pid").is_number_integer());
    if (ph == "M") continue;
    EXPECT_TRUE(e.at("ts").is_number());
    EXPECT_GE(e.at("ts").get<double>(), 0.0);
    if (ph == "X") {
      EXPECT_TRUE(e.at("tid").is_number_integer());
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
    }
    if (ph == "C" && e["pid"] == 0) {
      EXPECT_GE(e["ts"].get<double>(), last_counter_ts);
      last_counter_ts = e["ts"];
      EXPECT_TRUE(e.at("args").at("allocated").is_number_unsigned());
      EXPECT_TRUE(e.at("args").at("reserved").is_number_unsigned());
    }
    if (ph == "i") {
      EXPECT_EQ(e["name"], "OOM");
      EXPECT_EQ(e["args"]["requested"], 1u << 30);
    }
  }
  EXPECT_EQ(phases["C"], 6);  // one sample per allocator event
  EXPECT_EQ(phases["X"], 3);  // two kernels and the closed scope
  EXPECT_EQ(phases["i"], 1);
  EXPECT_EQ(trace["traceEvents"][1]["ts"], 0.0);  // times start at the first event
}

TEST(Perfetto, CountersFollowTheReplay) {
  Snapshot s = history_with_everything();
  std::stringstream out;
  export_perfetto(s, out);
  std::vector<uint64_t> allocated;
  nlohmann::json trace = nlohmann::json::parse(out.str());
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && e["pid"] == 0) allocated.push_back(e["args"]["allocated"]);
  EXPECT_EQ(allocated, (std::vector<uint64_t>{0, 4096, 4096, 0, 0}));
}

}  // namespace
}  // namespace memrec
