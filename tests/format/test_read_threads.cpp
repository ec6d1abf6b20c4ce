// Reading on threads gives what the serial reader gives: the same snapshot row for row, the same prefix of a file
// cut short, and the same error for a damaged file, whatever the sizes of the file's chunks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "../../bench/synthetic_training.h"
#include "common/chunks.h"
#include "memrec/format.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;
using test::Chunk;
using test::chunks_of;
using test::with_payload;

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

// `full` written as a recorder writes it: its tables first, then its events and kernels over many flushes of
// uneven sizes (single rows, less than a block, many blocks), so that chunks start anywhere in a block.
void write_streamed(const Snapshot& full, const std::string& path, uint32_t seed) {
  std::mt19937 rng(seed);
  Snapshot s = full.with_tables();
  s.scopes = full.scopes;
  Writer w(path);
  size_t kernels_per_event = full.kernels.size() / std::max<size_t>(1, full.events.size()) + 1;
  for (size_t at = 0; at < full.events.size();) {
    size_t n = std::min<size_t>(full.events.size() - at, rng() % 4 == 0 ? 1 + rng() % 8 : 1 + rng() % 5000);
    for (size_t i = at; i < at + n; ++i) s.events.push_back(full.events[i]);
    for (size_t k = s.kernels.size(); k < std::min(full.kernels.size(), (at + n) * kernels_per_event / 3); ++k)
      s.kernels.push_back(full.kernels[k]);
    at += n;
    w.flush(s);
  }
  for (size_t k = s.kernels.size(); k < full.kernels.size(); ++k) s.kernels.push_back(full.kernels[k]);
  w.close(s);
}

class ReadThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memrec_read_threads_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(ReadThreadsTest, UnevenChunksReadTheSameOnAnyNumberOfThreads) {
  Snapshot full = make_training_history(120'000, 5);
  std::string p = path("streamed.memrec");
  write_streamed(full, p, 1);
  Snapshot serial = read_file(p, {.threads = 1});
  EXPECT_EQ(serial, full);
  for (unsigned threads : {2u, 3u, 8u}) EXPECT_EQ(read_file(p, {.threads = threads}), serial) << threads << " threads";
}

TEST_F(ReadThreadsTest, WholeBlockChunksReadTheSameOnThreads) {
  Snapshot full = make_training_history(300'000, 6);  // the writer's chunks of 65,536 rows: blocks line up
  std::string p = path("whole.memrec");
  write_file(full, p);
  EXPECT_EQ(read_file(p, {.threads = 4}), read_file(p, {.threads = 1}));
}

// A cut file reads up to its last whole chunk, on threads as serially, wherever the cut falls.
TEST_F(ReadThreadsTest, CutFilesReadTheSamePrefixOnThreads) {
  Snapshot full = make_training_history(60'000, 7);
  std::string p = path("streamed.memrec"), cut = path("cut.memrec");
  write_streamed(full, p, 2);
  const std::string bytes = read_bytes(p);
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) {
    size_t n = 16 + rng() % (bytes.size() - 16);
    write_bytes(cut, std::string_view(bytes).substr(0, n));
    Snapshot serial = read_file(cut, {.threads = 1});
    ASSERT_FALSE(serial.complete) << n;
    ASSERT_EQ(read_file(cut, {.threads = 3}), serial) << "cut at " << n;
    EXPECT_TRUE(std::equal(serial.events.begin(), serial.events.end(), full.events.begin())) << n;
  }
}

// Damage in a middle events chunk, before and behind its checksum: the threads' reader gives the serial error.
TEST_F(ReadThreadsTest, DamagedChunksGiveTheSerialError) {
  Snapshot full = make_training_history(60'000, 8);
  std::string p = path("streamed.memrec"), bad = path("bad.memrec");
  write_streamed(full, p, 4);
  const std::string bytes = read_bytes(p);
  std::vector<Chunk> events;
  for (const Chunk& c : chunks_of(bytes))
    if (c.type == 7) events.push_back(c);
  ASSERT_GT(events.size(), 10u);
  const Chunk& c = events[events.size() / 2];
  auto action_column = [](std::string& raw) {  // first, count, 9 column sizes, the time column, then actions
    uint64_t time_bytes;
    std::memcpy(&time_bytes, raw.data() + 16, 8);
    return 16 + 9 * 8 + time_bytes;
  };
  std::vector<std::string> damaged = {
      bytes.substr(0, c.offset + 12 + c.compressed - 1) + char(bytes[c.offset + 12 + c.compressed - 1] ^ 1) +
          bytes.substr(c.offset + 12 + c.compressed),
      with_payload(bytes, c, [](std::string& raw) { raw[0] ^= 1; }),                     // its first row
      with_payload(bytes, c, [&](std::string& raw) { raw[action_column(raw)] = 0x30; }),  // an action out of range
      with_payload(bytes, events[3], [&](std::string& raw) { raw[action_column(raw) + 2] = 0x30; }),
      bytes.substr(0, events[2].offset) + bytes.substr(events[3].offset),                 // a chunk left out
  };
  for (const std::string& b : damaged) {
    write_bytes(bad, b);
    std::string serial = error_of([&] { read_file(bad, {.threads = 1}); });
    EXPECT_NE(serial, "(no error)");
    EXPECT_EQ(error_of([&] { read_file(bad, {.threads = 3}); }), serial);
  }
}

}  // namespace
}  // namespace memrec
