// Reading a part of a recording through the file's index gives what the same part of a whole read gives, reads only
// a few chunks for a short part of a long run, and falls back to a whole read, saying so, where the index cannot serve.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "common/fixtures.h"
#include "common/chunks.h"
#include "common/recorded_writes.h"
#include "memrec/format.h"
#include "memrec/range.h"
#include "memrec/replay.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;
using test::Chunk;
using test::chunks_of;
using test::with_payload;
using test::differences;
using test::long_run;
using test::write_as_recorded;

std::string read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& p, std::string_view bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class Fn> std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class RangeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("memrec_range_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    run_ = new Snapshot(long_run(3'500'000, 21));
    write_as_recorded(*run_, path("run.memrec"), 300);
    whole_ = new Snapshot(read_file(path("run.memrec")));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete whole_;
    delete run_;
    delete dir_;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }

  static fs::path* dir_;
  static Snapshot* run_;
  static Snapshot* whole_;
};
fs::path* RangeTest::dir_ = nullptr;
Snapshot* RangeTest::run_ = nullptr;
Snapshot* RangeTest::whole_ = nullptr;

TEST_F(RangeTest, TheRecordingReadsBackWhole) { EXPECT_EQ(differences(*whole_, *run_), ""); }

// Random time ranges and step ranges through the index equal the same ranges cut from the whole read.
TEST_F(RangeTest, RangesThroughTheIndexEqualRangesOfAWholeRead) {
  int64_t duration = whole_->events.back().time_ns - whole_->events[0].time_ns;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 12; ++i) {
    int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(duration));
    int64_t b = a + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(duration / 8));
    Range range{.kind = Range::Kind::time, .first = a, .last = b, .flag = fmt::format("--range {}ns..{}ns", a, b)};
    RangeRead part = read_range(path("run.memrec"), range);
    ASSERT_EQ(differences(part.snapshot, cut_range(*whole_, range, path("run.memrec"))), "") << range.flag;
    EXPECT_LT(part.chunks_read, part.chunks_total) << range.flag;
  }
  for (auto [a, b] : {std::pair{0, 0}, std::pair{3, 40}, std::pair{500, 502}, std::pair{900, 950}}) {
    Range range{.kind = Range::Kind::steps, .first = a, .last = b, .flag = fmt::format("--steps {}..{}", a, b)};
    Snapshot part = read_range(path("run.memrec"), range).snapshot;
    ASSERT_EQ(differences(part, cut_range(*whole_, range, path("run.memrec"))), "") << range.flag;
  }
}

// A range of a real recording holds the events in it, starts from what was live before them (the replay's totals
// then), and says what it is.
TEST(RangeOfRealRecordings, ARangeStartsFromWhatWasLive) {
  fs::path dir = fs::temp_directory_path() / ("memrec_range_live_" + std::to_string(getpid()));
  fs::create_directories(dir);
  Snapshot whole = read_file(test::data("alloc_default.memrec"));
  std::string p = (dir / "run.memrec").string();
  write_file(whole, p);
  Snapshot part = read_range(p, *parse_range("", "4..5")).snapshot;
  ASSERT_FALSE(part.events.empty());
  size_t first = 0;
  while (whole.events[first].time_ns < part.events[0].time_ns) ++first;
  for (size_t k = 0; k < part.events.size(); ++k) {
    Event want = whole.events[first + k], got = part.events[k];
    want.scope = got.scope = 0;  // renumbered: the part keeps only its scopes
    ASSERT_EQ(got, want) << k;
  }
  Replay from_start(whole, 0), from_part(part, 0);
  EXPECT_EQ(from_part.initial(), from_start.after(static_cast<uint32_t>(first - 1)));
  EXPECT_EQ(from_part.unmatched_frees(), 0u);
  EXPECT_EQ(from_part.peak_allocated().bytes, [&] {
    uint64_t peak = 0;
    from_start.for_each_after(static_cast<uint32_t>(first - 1), static_cast<uint32_t>(first + part.events.size()),
                              [&](uint32_t, const Totals& t) { peak = std::max(peak, t.allocated); });
    return peak;
  }());
  ASSERT_FALSE(part.warnings.empty());
  EXPECT_NE(part.warnings.back().find("only --steps 4..5 was read"), std::string::npos) << part.warnings.back();
  fs::remove_all(dir);
}

// One step in the middle of a 3.5M-event run reads a handful of chunks: tables, one live state, the events from it.
TEST_F(RangeTest, OneStepOfALongRunReadsFewChunks) {
  RangeRead part = read_range(path("run.memrec"), *parse_range("", "600..600"));
  EXPECT_GT(part.snapshot.events.size(), 1000u);
  EXPECT_LT(part.chunks_read * 10, part.chunks_total) << part.chunks_read << " of " << part.chunks_total;
  RecordProperty("chunks_read", std::to_string(part.chunks_read) + " of " + std::to_string(part.chunks_total));
}

TEST_F(RangeTest, AFileCutShortIsReadWholeWithANote) {
  std::string bytes = read_bytes(path("run.memrec"));
  write_bytes(path("cut.memrec"), std::string_view(bytes).substr(0, bytes.size() * 2 / 3));
  Range range = *parse_range("", "10..12");
  Snapshot part = read_range(path("cut.memrec"), range).snapshot;
  Snapshot cut = read_file(path("cut.memrec"));
  Snapshot want = cut_range(cut, range, path("cut.memrec"));
  ASSERT_EQ(part.warnings.size(), want.warnings.size() + 1);
  EXPECT_NE(part.warnings.back().find("was read whole for --steps 10..12: it has no index"), std::string::npos);
  part.warnings.pop_back();
  EXPECT_EQ(differences(part, want), "");
}

// A damaged index or live state (behind valid checksums, so only the range read looks at them) is refused with one
// sentence, and the range is read whole; a whole read does not need them.
TEST_F(RangeTest, ADamagedIndexIsReadWholeWithOneSentence) {
  std::string bytes = read_bytes(path("run.memrec"));
  std::vector<Chunk> chunks = chunks_of(bytes);
  // The last index chunk: a damaged one is recompressed, and may change size (it does under clang's zstd build
  // flags), which would move any chunk after it and fail the read before the index is checked.
  auto last = [&](uint32_t type) {
    std::vector<Chunk> of;
    for (const Chunk& c : chunks)
      if (c.type == type) of.push_back(c);
    return of.at(of.size() - 1);
  };
  // Every live state damaged alike, so that the range's is.
  auto every_state = [&](const std::function<void(std::string&)>& edit) {
    std::string b = bytes;
    for (size_t k = chunks.size(); k-- > 0;)
      if (chunks[k].type == 17) b = with_payload(b, chunks[k], edit);
    return b;
  };
  const Chunk index = last(16);
  struct Case {
    std::string file, says;
  };
  for (const Case& c : {
           Case{with_payload(bytes, index, [](std::string& raw) { raw[8 + 8 + 3] ^= 0x40; }), "out of place"},
           Case{with_payload(bytes, index, [](std::string& raw) { raw.resize(raw.size() - 3); }), ""},
           Case{every_state([](std::string& raw) { raw[0] ^= 1; }), ""},
           Case{every_state([](std::string& raw) { std::memset(raw.data() + 16, 0xff, 8); }), ""},
       }) {
    write_bytes(path("bad.memrec"), c.file);
    Range range = *parse_range("", "400..700");
    Snapshot whole = read_file(path("bad.memrec"));
    EXPECT_EQ(differences(whole, *whole_), "");
    Snapshot part = read_range(path("bad.memrec"), range).snapshot;
    ASSERT_FALSE(part.warnings.empty());
    const std::string& note = part.warnings.back();
    EXPECT_NE(note.find("was read whole for --steps 400..700: its index could not be used ("), std::string::npos)
        << note;
    EXPECT_NE(note.find(c.says), std::string::npos) << note;
    part.warnings.pop_back();
    EXPECT_EQ(differences(part, cut_range(whole, range, path("bad.memrec"))), "");
  }
}

// Files written before the index read whole for a range; rewritten, a real recording's parts read through the index
// and equal the parts of its whole read.
TEST(RangeOfRealRecordings, OldFilesReadWholeAndNewOnesThroughTheIndex) {
  fs::path dir = fs::temp_directory_path() / ("memrec_range_real_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (auto [name, steps] : {std::pair{"alloc_default.memrec", "2..3"}, {"transformer_2layer_cpu.memrec", "0..1"}}) {
    std::string old = test::data(name), now = (dir / name).string();
    Range range = *parse_range("", steps);
    Snapshot part = read_range(old, range).snapshot;
    EXPECT_NE(part.warnings.back().find("it has no index"), std::string::npos) << name;
    Snapshot whole = read_file(old);
    write_file(whole, now);
    RangeRead indexed = read_range(now, range);
    EXPECT_EQ(differences(indexed.snapshot, cut_range(whole, range, now)), "") << name;
    EXPECT_GT(indexed.snapshot.events.size(), 100u) << name;
  }
  fs::remove_all(dir);
}

TEST(ParseRange, OneSentenceForAnythingElse) {
  EXPECT_EQ(parse_range("", ""), std::nullopt);
  Range r = *parse_range("1.5s..2s", "");
  EXPECT_EQ(r.kind, Range::Kind::time);
  EXPECT_EQ(r.first, 1'500'000'000);
  EXPECT_EQ(r.last, 2'000'000'000);
  EXPECT_EQ(r.flag, "--range 1.5s..2s");
  Range s = *parse_range("", "3..5");
  EXPECT_EQ(s.kind, Range::Kind::steps);
  EXPECT_EQ(s.first, 3);
  EXPECT_EQ(s.last, 5);
  for (const char* bad : {"10ms", "20ms..10ms", "soon..later", "1s..", "..2s", "5h..6h", "-1s..2s"})
    EXPECT_EQ(error_of([&] { parse_range(bad, ""); }),
              fmt::format("--range wants T1..T2, two times after the start with T1 before T2 (e.g. 10ms..25ms), "
                          "got '{}'", bad));
  for (const char* bad : {"3", "5..3", "a..b", "-1..2", "1.5..2"})
    EXPECT_EQ(error_of([&] { parse_range("", bad); }),
              fmt::format("--steps wants A..B, two step numbers with A at most B (e.g. 3..5), got '{}'", bad));
  EXPECT_EQ(error_of([] { parse_range("1s..2s", "1..2"); }),
            "--range and --steps both choose the part to read: give one of them");
}

}  // namespace
}  // namespace memrec
