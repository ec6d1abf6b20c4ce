// The windows a recording did not trace CUPTI's records in (recorder.cupti_gaps, raw times from the recorder) are
// read as notes timed from the first event, which every command prints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "memrec/format.h"
#include "memrec/load.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> notes_of(const std::string& gaps) {
  Snapshot s;
  Event e;
  e.time_ns = 1'000'000'000;
  e.size = 512;
  e.action = Action::alloc;
  s.events.push_back(e);
  s.metadata["recorder.cupti_gaps"] = gaps;
  fs::path p = fs::temp_directory_path() / ("memrec_cupti_gaps_" + std::to_string(getpid()) + ".memrec");
  write_file(s, p.string());
  std::vector<std::string> out = load_snapshot(p.string()).warnings;
  fs::remove(p);
  return out;
}

TEST(CuptiGaps, EachWindowIsANoteFromTheFirstEvent) {
  auto notes = notes_of(R"([{"what":"kernels","from_ns":3100000000,"to_ns":4400000000,)"
                        R"("why":"the program's profiler held CUPTI"},)"
                        R"({"what":"device memory calls","from_ns":3100000000,"to_ns":null,)"
                        R"("why":"the program's profiler held CUPTI"}])");
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "kernels not traced from +2.1 s to +3.4 s: the program's profiler held CUPTI");
  EXPECT_EQ(notes[1], "device memory calls not traced from +2.1 s to the end: the program's profiler held CUPTI");
}

TEST(CuptiGaps, AWindowOpenedBeforeTheFirstEventIsFromTheStart) {
  auto notes = notes_of(R"([{"what":"kernels","from_ns":900000000,"to_ns":1200000000,"why":"held"}])");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "kernels not traced from the start to +0.2 s: held");
}

TEST(CuptiGaps, AMalformedListIsSaidNotThrown) {
  auto notes = notes_of("{not json");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "recorder.cupti_gaps is not a list: {not json");
  EXPECT_TRUE(notes_of(R"([{"what":3}, 7])").empty());  // entries of another shape are passed over
}

}  // namespace
}  // namespace memrec
