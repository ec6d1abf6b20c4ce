// Replay of real PyTorch snapshots against an independent python3 computation (tests/scripts/replay_reference.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/pickle.h"
#include "memrec/replay.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;

nlohmann::json reference(const std::string& pickle) {
  auto r = run_command("python3 " + quote(test::source("tests/scripts/replay_reference.py")) +
                       " " + quote(pickle));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

uint32_t step_of(int64_t python_index) {
  return python_index < 0 ? kNoEvent : static_cast<uint32_t>(python_index);
}

class ReplayFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ReplayFixture, MatchesPythonReference) {
  std::string path = test::data(GetParam());
  auto expected = reference(path);
  Snapshot s = import_pickle_file(path);
  ASSERT_EQ(devices_of(s).size(), expected.size());
  for (uint8_t d = 0; d < expected.size(); ++d) {
    const auto& want = expected[d];
    Replay r(s, d);
    EXPECT_EQ(r.unmatched_frees(), 0u);
    EXPECT_EQ(r.initial().allocated, want["initial_allocated"].get<uint64_t>());
    EXPECT_EQ(r.initial().reserved, want["initial_reserved"].get<uint64_t>());
    EXPECT_EQ(r.peak_allocated().bytes, want["allocated"].get<uint64_t>());
    EXPECT_EQ(r.peak_allocated().step, step_of(want["allocated_index"].get<int64_t>()));
    EXPECT_EQ(r.peak_reserved().bytes, want["reserved"].get<uint64_t>());
    EXPECT_EQ(r.peak_reserved().step, step_of(want["reserved_index"].get<int64_t>()));
    auto last = static_cast<uint32_t>(r.steps() - 1);
    EXPECT_EQ(r.after(last).allocated, want["final_allocated"].get<uint64_t>());
    EXPECT_EQ(r.after(last).reserved, want["final_reserved"].get<uint64_t>());
    size_t before = std::count_if(r.allocations().begin(), r.allocations().end(),
                                  [](const Allocation& a) { return a.alloc_step == kNoEvent; });
    EXPECT_EQ(before, want["pre_existing"].get<size_t>());
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, ReplayFixture,
                         ::testing::Values("torch_2layer_python.pickle", "torch_2layer_all.pickle"));

}  // namespace
}  // namespace memrec
