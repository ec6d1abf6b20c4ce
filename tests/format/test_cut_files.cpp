// A real CUDA recording (tests/data/torch_2layer_all.pickle as .memrec) cut at many offsets after its header:
// it reads as the prefix of its whole chunks with one note, and its analysis stays exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "memrec/analysis.h"
#include "memrec/format.h"
#include "memrec/pickle.h"
#include "memrec/replay.h"
#include "memrec/stats_output.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;

class CutFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memrec_cut_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    whole_ = import_pickle_file(test::data("torch_2layer_all.pickle"));
    write_file(whole_, path("whole.memrec"));
    std::ifstream in(path("whole.memrec"), std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The file cut to its first n bytes, read back.
  Snapshot cut(size_t n) {
    std::ofstream(path("cut.memrec"), std::ios::binary | std::ios::trunc).write(bytes_.data(), static_cast<std::streamsize>(n));
    return read_file(path("cut.memrec"));
  }

  // An offset inside the first events chunk (docs/format.md: type 7; a chunk header is type, raw and compressed size).
  size_t events_chunk_middle() const {
    auto u32 = [&](size_t at) { uint32_t v; std::memcpy(&v, bytes_.data() + at, 4); return v; };
    size_t at = 16;
    while (u32(at) != 7) at += 12 + u32(at + 8);
    return at + 12 + u32(at + 8) / 2;
  }

  fs::path dir_;
  Snapshot whole_;
  std::string bytes_;
};

uint64_t bucket_sum(const Fragmentation& f) {
  return f.rounding + f.pending_free + f.split_free + f.other_stream + f.cached_free;
}

TEST_F(CutFileTest, EveryCutReadsAsAPrefixWithOneNote) {
  for (size_t n = 16; n < bytes_.size(); n += 5) {
    Snapshot s = cut(n);
    ASSERT_FALSE(s.complete) << n;
    ASSERT_LE(s.events.size(), whole_.events.size()) << n;
    EXPECT_TRUE(std::equal(s.events.begin(), s.events.end(), whole_.events.begin())) << n;
    ASSERT_EQ(s.warnings.size(), 1u);
    EXPECT_EQ(s.warnings[0], path("cut.memrec") + " was cut short (no footer): " + std::to_string(s.events.size()) +
                                    " events read; the rest is lost")
        << n;
  }
  EXPECT_TRUE(read_file(path("whole.memrec")).warnings.empty());
}

// Cut before the end state, the segments that held the blocks live before recording are unknown: those blocks
// are counted apart, so the buckets still split reserved - allocated of the known segments exactly.
TEST_F(CutFileTest, FragmentationBucketsAddUpOnEveryCut) {
  size_t unplaced_cuts = 0;
  for (size_t n = 16; n < bytes_.size(); n += 7) {
    Snapshot s = cut(n);
    Replay r(s, 0);
    for (uint32_t step : {r.peak_allocated().step, r.steps() ? r.steps() - 1 : kNoEvent}) {
      Fragmentation f = fragmentation_after(s, r, step);
      ASSERT_GE(f.reserved, f.allocated) << n;
      EXPECT_EQ(bucket_sum(f), f.reserved - f.allocated) << "cut at " << n << ", step " << step;
      EXPECT_EQ(f.allocated + f.unplaced, r.after(step).allocated) << n;
      unplaced_cuts += f.unplaced > 0;
    }
  }
  EXPECT_GT(unplaced_cuts, 0u);  // the cuts this test is about did happen
  Replay r(whole_, 0);
  Fragmentation f = fragmentation_after(whole_, r, r.peak_allocated().step);
  EXPECT_EQ(f.unplaced, 0u);
  EXPECT_EQ(f.allocated, r.peak_allocated().bytes);
}

// A GPU recording cut before its first segment is not explained as a CPU run; a CPU recording is.
TEST_F(CutFileTest, NoSegmentsIsExplainedByTheDeviceType) {
  Snapshot gpu = cut(events_chunk_middle());
  ASSERT_EQ(gpu.events.size(), 0u);
  std::string text = stats_text(stats(gpu, {}));
  EXPECT_EQ(text.find("CPU"), std::string::npos) << text;
  EXPECT_NE(text.find("no reserved segments recorded (the recording holds no segment events or end state)"),
            std::string::npos)
      << text;

  Snapshot cpu;
  cpu.metadata["device.0.type"] = "cpu";
  cpu.events.push_back(Event{.time_ns = 1, .addr = 4096, .size = 64, .action = Action::alloc});
  text = stats_text(stats(cpu, {}));
  EXPECT_NE(text.find("no reserved segments recorded (the CPU allocator keeps no cache)"), std::string::npos) << text;
}

}  // namespace
}  // namespace memrec
