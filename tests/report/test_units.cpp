// The one unit formatter: the commands' sizes and durations, and the compact form of the viewer's axis labels.
#include <gtest/gtest.h>

#include "memrec/units.h"

namespace memrec {
namespace {

TEST(Units, FullAsTheCommandsPrintThem) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(100272128), "95.63 MiB");
  EXPECT_EQ(format_bytes(312164352), "297.70 MiB");
  EXPECT_EQ(format_duration(999), "999 ns");
  EXPECT_EQ(format_duration(1500), "1.5 us");
  EXPECT_EQ(format_duration(-1500), "-1.5 us");
  EXPECT_EQ(format_duration(8'700'000), "8.7 ms");
  EXPECT_EQ(format_duration(2'500'000'000), "2.500 s");
}

TEST(Units, CompactKeepsThreeSignificantDigits) {
  EXPECT_EQ(format_bytes(512, Digits::compact), "512 B");
  EXPECT_EQ(format_bytes(1536, Digits::compact), "1.50 KiB");
  EXPECT_EQ(format_bytes(100272128, Digits::compact), "95.6 MiB");
  EXPECT_EQ(format_bytes(312164352, Digits::compact), "298 MiB");
  EXPECT_EQ(format_duration(999, Digits::compact), "999 ns");
  EXPECT_EQ(format_duration(-1500, Digits::compact), "-1.50 us");
  EXPECT_EQ(format_duration(12'345'678, Digits::compact), "12.3 ms");
  EXPECT_EQ(format_duration(2'500'000'000, Digits::compact), "2.50 s");
  EXPECT_EQ(format_duration(250'000'000'000, Digits::compact), "250 s");
}

}  // namespace
}  // namespace memrec
