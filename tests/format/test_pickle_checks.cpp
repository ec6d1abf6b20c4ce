// Pickles whose contents contradict each other import with a warning naming the first contradiction.
#include <gtest/gtest.h>

#include "memrec/pickle.h"
#include "test_pickle_util.h"

namespace memrec {
namespace {

using test::TempDir;

Snapshot import_python(const std::string& expression) {
  TempDir tmp;
  std::string p = tmp / "bad.pickle";
  test::python_pickle(expression, p);
  return import_pickle_file(p);
}

std::string only_warning(const Snapshot& s) {
  EXPECT_EQ(s.warnings.size(), 1u);
  return s.warnings.empty() ? "" : s.warnings[0];
}

// A segment at 1 MiB of total_size bytes holding one live 1 MiB block.
std::string segment(const std::string& total_size) {
  return "{'device': 0, 'address': 1048576, 'total_size': " + total_size +
         ", 'stream': 0, 'segment_type': 'large', 'blocks': [{'address': 1048576, 'size': 1048576,"
         " 'requested_size': 1048576, 'state': 'active_allocated'}]}";
}

TEST(PickleChecks, RealSnapshotsHaveNoWarnings) {
  for (const char* name : {"torch_2layer_python.pickle", "torch_2layer_all.pickle", "torch_compile_graph.pickle"})
    EXPECT_TRUE(import_pickle_file(test::data(name)).warnings.empty()) << name;
}

TEST(PickleChecks, ZeroSizeSegmentIsNamed) {
  std::string seg = "{'device': 0, 'address': 1048576, 'total_size': 0, 'stream': 0, 'segment_type': 'large', 'blocks': []}";
  Snapshot s = import_python("{'segments': [" + seg + "], 'device_traces': [[]]}");
  EXPECT_EQ(only_warning(s), "inconsistent pickle: segments[0] at 0x100000 has size 0");
}

TEST(PickleChecks, ZeroSizeSegmentEventIsNamed) {
  Snapshot s = import_python(
      "{'segments': [], 'device_traces': [["
      "{'action': 'segment_alloc', 'addr': 4096, 'size': 0, 'stream': 0, 'time_us': 1},"
      "{'action': 'segment_free', 'addr': 4096, 'size': 0, 'stream': 0, 'time_us': 2}]]}");
  EXPECT_EQ(only_warning(s),
            "inconsistent pickle: device_traces[0][0] segment_alloc at 0x1000 has size 0 (1 more like it)");
}

TEST(PickleChecks, TimeGoingBackIsNamed) {
  Snapshot s = import_python(
      "{'segments': [], 'device_traces': [["
      "{'action': 'segment_alloc', 'addr': 4096, 'size': 8192, 'stream': 0, 'time_us': 100},"
      "{'action': 'alloc', 'addr': 4096, 'size': 16, 'stream': 0, 'time_us': 90},"
      "{'action': 'free_requested', 'addr': 4096, 'size': 16, 'stream': 0, 'time_us': 95},"
      "{'action': 'free_completed', 'addr': 4096, 'size': 16, 'stream': 0, 'time_us': 96},"
      "{'action': 'segment_free', 'addr': 4096, 'size': 8192, 'stream': 0, 'time_us': 97}]]}");
  EXPECT_EQ(only_warning(s), "inconsistent pickle: time goes back at device_traces[0][1] (90 us < 100 us)");
}

TEST(PickleChecks, NegativeTimeIsNamed) {
  Snapshot s = import_python(
      "{'segments': [], 'device_traces': [[{'action': 'snapshot', 'addr': 0, 'size': 0, 'stream': 0,"
      " 'time_us': -5}]]}");
  EXPECT_EQ(only_warning(s), "inconsistent pickle: device_traces[0][0].time_us is negative (-5)");
}

// The end state has one 2 MiB segment with a live 1 MiB block; the trace frees a 3 MiB block it never allocated,
// so before it 4 MiB were allocated in 2 MiB of segments.
TEST(PickleChecks, MoreAllocatedThanReservedAtTheStartIsNamed) {
  Snapshot s = import_python(
      "{'segments': [" + segment("2097152") +
      "], 'device_traces': [["
      "{'action': 'free_requested', 'addr': 8388608, 'size': 3145728, 'stream': 0, 'time_us': 1},"
      "{'action': 'free_completed', 'addr': 8388608, 'size': 3145728, 'stream': 0, 'time_us': 2}]]}");
  EXPECT_EQ(only_warning(s),
            "inconsistent pickle: on device 0 allocated 4.0 MiB (4194304 bytes) exceeds reserved 2.0 MiB (2097152 "
            "bytes) at the start of the trace");
}

TEST(PickleChecks, ConsistentSmallPickleHasNoWarning) {
  Snapshot s = import_python("{'segments': [" + segment("2097152") +
                             "], 'device_traces': [["
                             "{'action': 'alloc', 'addr': 1048576, 'size': 1048576, 'stream': 0, 'time_us': 1}]]}");
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
}

}  // namespace
}  // namespace memrec
