// The drain's stack lookup: a stack met again is the stack it was the first time, without symbolizing it again,
// and a stack of other words, even one word apart, is the stack that symbolizing its own words gives.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../../recorder/src/symbolize.h"
#include "memrec/recorder.h"
#include "memrec/snapshot.h"

namespace memrec {
namespace {

__attribute__((noinline)) std::vector<uint64_t> stack_here() {
  std::vector<uint64_t> pcs(64);
  pcs.resize(capture_stack(StackCapture::unwind_backtrace, pcs.data(), 64));
  return pcs;
}

__attribute__((noinline)) std::vector<uint64_t> stack_one_call_deeper() {
  std::vector<uint64_t> pcs = stack_here();
  asm volatile("" ::: "memory");  // no tail call: this frame stays on the stack
  return pcs;
}

// Each lookup, first or again, gives the stack that symbolizing the words gives.
TEST(Symbolizer, AStackMetAgainIsTheStackItWasAndAnyOtherIsItsOwn) {
  Snapshot s;
  detail::Symbolizer symbolizer;
  symbolizer.start(nullptr);
  std::vector<uint64_t> a = stack_here(), b = stack_one_call_deeper();
  ASSERT_GT(a.size(), 3u);
  std::vector<uint64_t> shorter(a.begin(), a.end() - 1), moved = a;
  moved.front() = b.front() == a.front() ? b[1] : b.front();  // the same depth, another innermost address
  auto symbolized = [&](const std::vector<uint64_t>& pcs) {
    std::vector<uint32_t> frames;
    symbolizer.frames_of(pcs, s, frames);
    return s.stacks.intern(frames);
  };

  uint32_t first = symbolizer.stack_of(a, s);
  ASSERT_NE(first, 0u);
  size_t unique = symbolizer.unique_pcs(), stacks = s.stacks.size();
  EXPECT_EQ(symbolizer.stack_of(a, s), first);
  EXPECT_EQ(symbolizer.unique_pcs(), unique);
  EXPECT_EQ(s.stacks.size(), stacks);
  EXPECT_EQ(first, symbolized(a));
  for (int again = 0; again < 2; ++again)
    for (const auto* pcs : {&b, &shorter, &moved, &a}) EXPECT_EQ(symbolizer.stack_of(*pcs, s), symbolized(*pcs));
  EXPECT_NE(symbolizer.stack_of(b, s), first);
  EXPECT_NE(symbolizer.stack_of(shorter, s), first);
}

}  // namespace
}  // namespace memrec
