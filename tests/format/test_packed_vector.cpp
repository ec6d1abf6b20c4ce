// PackedVector keeps events, kernels and scopes column-packed: every row must read back exactly, whatever its
// values, and updates, truncation and copies must behave like a std::vector's.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "../../bench/synthetic.h"
#include "memrec/snapshot.h"

namespace memrec {
namespace {

// Rows mixing extreme values (full 64-bit ranges, negative times, -1 ends) with runs of equal and close values,
// so blocks get every column width from 0 to 8 bytes.
std::vector<Event> mixed_events(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Event> out;
  int64_t t = -5'000'000;
  for (size_t i = 0; i < n; ++i) {
    Event e;
    t += static_cast<int64_t>(rng() % 1000);
    e.time_ns = i % 997 == 0 ? std::numeric_limits<int64_t>::min() + static_cast<int64_t>(i) : t;
    e.addr = i % 3000 < 1500 ? 0x7f0000000000ULL + (rng() % 64) * 512 : rng();
    e.size = i % 5000 < 2500 ? 4096 : rng() >> (rng() % 64);
    e.stack = static_cast<uint32_t>(i % 7 ? rng() % 300 : std::numeric_limits<uint32_t>::max());
    e.scope = static_cast<uint32_t>(i / 3);
    e.rounding = 0;
    e.stream = static_cast<uint16_t>(i % 2048 < 1024 ? 0 : rng());
    e.action = static_cast<Action>(rng() % kActionCount);
    e.device = static_cast<uint8_t>(i % 4096 < 2048 ? 0 : 255);
    out.push_back(e);
  }
  return out;
}

void expect_rows(const PackedVector<Event>& packed, const std::vector<Event>& want) {
  ASSERT_EQ(packed.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(packed[i], want[i]) << "row " << i;
  size_t i = 0;
  for (const Event& e : packed) ASSERT_EQ(e, want[i++]);
}

TEST(PackedVector, EveryRowReadsBackExactly) {
  std::vector<Event> rows = mixed_events(10 * PackedVector<Event>::kBlockRows + 123, 1);
  PackedVector<Event> pushed;
  for (const Event& e : rows) pushed.push_back(e);
  expect_rows(pushed, rows);
  PackedVector<Event> appended;
  appended.append(std::span(rows).first(700));  // into the tail, then whole blocks straight from the input
  appended.append(std::span(rows).subspan(700));
  expect_rows(appended, rows);
  EXPECT_EQ(pushed, appended);
}

TEST(PackedVector, ScopesAndKernelsReadBackExactly) {
  std::vector<Scope> scopes{Scope{}};
  std::vector<Kernel> kernels;
  for (uint32_t i = 1; i < 3000; ++i) {
    scopes.push_back(Scope{int64_t{i} * 100, i % 500 ? int64_t{i} * 100 + 50 : -1, i % 9, i / 2,
                           static_cast<ScopeKind>(i % 5), static_cast<uint8_t>(i % 3)});
    kernels.push_back(Kernel{int64_t{i} * 7, int64_t{i} * 7 + 5, uint64_t{i} << 40, i % 4 ? 0 : ~uint64_t{0}, i,
                             static_cast<uint16_t>(i % 3), static_cast<KernelKind>(i % 3), 0});
  }
  PackedVector<Scope> ps;
  ps.assign(scopes);
  PackedVector<Kernel> pk;
  pk.assign(kernels);
  ASSERT_EQ(ps.size(), scopes.size());
  ASSERT_EQ(pk.size(), kernels.size());
  for (size_t i = 0; i < scopes.size(); ++i) ASSERT_EQ(ps[i], scopes[i]) << i;
  for (size_t i = 0; i < kernels.size(); ++i) ASSERT_EQ(pk[i], kernels[i]) << i;
}

TEST(PackedVector, UpdatesTruncationAndCopiesActLikeAVector) {
  std::vector<Event> rows = mixed_events(3 * PackedVector<Event>::kBlockRows + 10, 2);
  PackedVector<Event> packed;
  packed.assign(rows);
  // A value far outside its block's range forces wider columns on repacking.
  for (size_t i : {size_t{5}, size_t{1500}, rows.size() - 1}) {
    packed.update(i, [](Event& e) { e.addr = ~uint64_t{0}, e.time_ns = std::numeric_limits<int64_t>::max(); });
    rows[i].addr = ~uint64_t{0}, rows[i].time_ns = std::numeric_limits<int64_t>::max();
  }
  expect_rows(packed, rows);

  PackedVector<Event> copy = packed;
  copy.set(7, Event{});
  EXPECT_EQ(packed[7], rows[7]) << "a copy shares no storage";
  EXPECT_NE(copy, packed);

  packed.resize(2000);
  rows.resize(2000);
  expect_rows(packed, rows);
  packed.push_back(rows[0]);
  rows.push_back(rows[0]);
  packed.resize(2100);
  rows.resize(2100);
  expect_rows(packed, rows);
  EXPECT_THROW(packed.at(2100), std::out_of_range);
  packed.clear();
  EXPECT_TRUE(packed.empty());
}

// What the packing is for: a recorded-like history takes about half of its 40-byte rows.
TEST(PackedVector, SyntheticHistoryTakesUnderHalfItsRowSize) {
  Snapshot s = make_synthetic(200'000, 3);
  double per_event = static_cast<double>(s.events.memory_bytes()) / static_cast<double>(s.events.size());
  std::cout << "synthetic history: " << per_event << " bytes per event packed\n";
  EXPECT_LT(per_event, sizeof(Event) / 2.0);
}

}  // namespace
}  // namespace memrec
