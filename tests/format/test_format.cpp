// The .memrec format: round trips, streaming, killed writers, truncation, corruption, full disks, size.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <random>

#include "../../bench/synthetic_training.h"
#include "memrec/format.h"
#include "common/chunks.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;
using test::Chunk;
using test::chunks_of;
using test::payload_of;
using test::with_payload;

class FormatTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    fs::path dir = fs::temp_directory_path() / ("memrec_format_test_" + std::to_string(getpid()));
    fs::create_directories(dir);
    dirs_.push_back(dir);
    return (dir / name).string();
  }
  void TearDown() override {
    for (const auto& d : dirs_) fs::remove_all(d);
  }

 private:
  std::vector<fs::path> dirs_;
};

std::string read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Every table, enum value and edge value the format must carry.
Snapshot rich_snapshot() {
  Snapshot s;
  s.metadata = {{"command", "train --steps 3"}, {"allocator_settings", "{\"expandable_segments\": true}"},
                {"device.1.name", "GPU \xce\xbb"}};
  uint32_t lib = s.strings.intern("libtorch_cuda.so");
  std::vector<uint32_t> fr;
  for (uint32_t i = 0; i < 6; ++i)
    fr.push_back(s.frames.intern(
        Frame{0x7f00'0000'1000ULL + i, s.strings.intern("fn" + std::to_string(i)), s.strings.intern("a.cpp"), lib, i}));
  fr.push_back(s.frames.intern(Frame{}));  // unknown frame: all ids 0
  uint32_t st_a = s.stacks.intern(std::vector<uint32_t>{fr[0], fr[1], fr[2], fr[6]});
  uint32_t st_b = s.stacks.intern(std::vector<uint32_t>{fr[3], fr[4], fr[5]});
  uint16_t str_a = s.intern_stream(0xabcdef);
  uint16_t str_b = s.intern_stream(std::numeric_limits<uint64_t>::max());
  s.scopes.push_back(Scope{100, 10'000, s.strings.intern("forward"), 0, ScopeKind::phase, 0});
  s.scopes.push_back(Scope{200, 900, s.strings.intern("Linear"), 1, ScopeKind::module, 0});
  s.scopes.push_back(Scope{300, -1, s.strings.intern("aten::mm"), 2, ScopeKind::op, 1});  // still open
  s.scopes.push_back(Scope{-50, 60, s.strings.intern("step 0"), 0, ScopeKind::step, 1});
  s.scopes.push_back(Scope{400, 500, s.strings.intern("note"), 3, ScopeKind::annotation, 0});
  int64_t t = 1'000;
  for (int a = 0; a < kActionCount; ++a) {
    t += (a % 3 == 0) ? -700 : 12'345;  // devices interleave, so time may go backwards
    s.events.push_back(Event{t, 0x7f12'0000'0000ULL + a * 4096ULL, 512ULL << a, a % 2 ? st_a : st_b,
                             static_cast<uint32_t>(a % 6), static_cast<uint32_t>(a * 3),
                             static_cast<uint16_t>(a % 3 == 0 ? 0 : a % 3 == 1 ? str_a : str_b), static_cast<Action>(a),
                             static_cast<uint8_t>(a % 2)});
  }
  s.events.push_back(Event{std::numeric_limits<int64_t>::min(), std::numeric_limits<uint64_t>::max(),
                           std::numeric_limits<uint64_t>::max(), st_a, 5, std::numeric_limits<uint32_t>::max(), str_b,
                           Action::oom, 255});
  s.events.push_back(Event{std::numeric_limits<int64_t>::max(), 0, 0, 0, 0, 0, 0, Action::alloc, 0});
  s.kernels.push_back(Kernel{1000, 2000, 7, 0, s.strings.intern("gemm"), str_a, KernelKind::kernel, 0});
  s.kernels.push_back(Kernel{1500, 1400, 3, 1 << 20, s.strings.intern("memcpy HtoD"), 0, KernelKind::memcpy, 1});
  s.kernels.push_back(Kernel{900, 950, 8, 4096, s.strings.intern("memset"), str_b, KernelKind::memset, 0});
  Segment seg{0x7f12'0000'0000ULL, 1 << 21, 1 << 20, 1 << 20, 1000, {1, -2}, st_a, str_a, 1, false, true, {}};
  seg.blocks = {{0x7f12'0000'0000ULL, 1 << 20, 1000, st_b, BlockState::active_allocated},
                {0x7f12'0010'0000ULL, 1 << 19, 0, 0, BlockState::active_pending_free},
                {0x7f12'0018'0000ULL, 1 << 19, 0, 0, BlockState::inactive}};
  s.segments_start = {seg};
  seg.is_large = true;
  seg.blocks.pop_back();
  s.segments_end = {seg, Segment{}};
  s.has_segments_start = true;
  s.dropped_events = 12'345;
  return s;
}

// Step i of a run in which every table grows: new strings, frames and stacks now and then, a scope opened
// each step and closed two steps later, 500 events, a few kernels, and metadata that changes.
void grow(Snapshot& s, int i) {
  std::mt19937 rng(i);
  int64_t t = int64_t{i} * 1'000'000;
  uint32_t name = s.strings.intern("op" + std::to_string(i % 37));
  uint32_t f0 = s.frames.intern(Frame{0x4000ULL + i % 53, name, s.strings.intern("f.cpp"), 0, uint32_t(i % 53)});
  uint32_t f1 = s.frames.intern(Frame{0x10, s.strings.intern("main"), 0, 0, 1});
  uint32_t stack = s.stacks.intern(std::vector<uint32_t>{f0, f1});
  uint16_t stream = s.intern_stream(i % 5 == 0 ? 0x99 : 0);
  if (i >= 2) s.scopes.update(static_cast<size_t>(i - 1), [&](auto& r) { r.end_ns = t; });  // the scope of step i-2
  auto scope = static_cast<uint32_t>(s.scopes.size());
  s.scopes.push_back(Scope{t, -1, name, i > 0 ? scope - 1 : 0, ScopeKind::op, 0});
  for (int k = 0; k < 500; ++k)
    s.events.push_back(Event{t + k * 100 + static_cast<int64_t>(rng() % 50), 0x7f00'0000'0000ULL + (rng() % 64) * 512,
                             512ULL * (1 + rng() % 8), rng() % 2 ? stack : 0, rng() % 2 ? scope : 0, static_cast<uint32_t>(rng() % 512),
                             stream, static_cast<Action>(rng() % 3), 0});
  s.kernels.push_back(Kernel{t, t + 5000, static_cast<uint64_t>(i), 0, name, stream, KernelKind::kernel, 0});
  s.metadata["steps"] = std::to_string(i + 1);
}

Snapshot grown(int steps) {
  Snapshot s;
  for (int i = 0; i < steps; ++i) grow(s, i);
  return s;
}

// What any reader of the file relies on: every id refers to an existing entry.
void expect_ids_valid(const Snapshot& s) {
  for (const Event& e : s.events) {
    ASSERT_LT(e.stack, s.stacks.size());
    ASSERT_LT(e.scope, s.scopes.size());
    ASSERT_LT(e.stream, s.streams.size());
  }
  for (const Kernel& k : s.kernels) {
    ASSERT_LT(k.name, s.strings.size());
    ASSERT_LT(k.stream, s.streams.size());
  }
  for (const Scope& sc : s.scopes) {
    ASSERT_LT(sc.name, s.strings.size());
    ASSERT_LT(sc.parent, s.scopes.size());
  }
  for (const Frame& f : s.frames.all()) ASSERT_LT(std::max({f.function, f.file, f.library}), s.strings.size());
  for (uint32_t id : s.stacks.frame_ids()) ASSERT_LT(id, s.frames.size());
}

// r holds a prefix of full's events and kernels, with valid ids.
void expect_prefix(const Snapshot& r, const Snapshot& full) {
  ASSERT_LE(r.events.size(), full.events.size());
  EXPECT_TRUE(std::equal(r.events.begin(), r.events.end(), full.events.begin()));
  ASSERT_LE(r.kernels.size(), full.kernels.size());
  EXPECT_TRUE(std::equal(r.kernels.begin(), r.kernels.end(), full.kernels.begin()));
  expect_ids_valid(r);
}

template <class Fn> std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---------------------------------------------------------------- round trips

TEST_F(FormatTest, RichSnapshotRoundTrips) {
  Snapshot s = rich_snapshot();
  std::string p = path("rich.memrec");
  write_file(s, p);
  Snapshot r = read_file(p);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r, s);
  EXPECT_TRUE(is_memrec_file(p));
}

TEST_F(FormatTest, EmptySnapshotRoundTrips) {
  std::string p = path("empty.memrec");
  write_file(Snapshot{}, p);
  EXPECT_EQ(read_file(p), Snapshot{});
}

TEST_F(FormatTest, SyntheticHistoryRoundTrips) {
  Snapshot s = make_training_history(300'000, 3);  // several event chunks
  std::string p = path("synthetic.memrec");
  write_file(s, p);
  EXPECT_EQ(read_file(p), s);
}

TEST_F(FormatTest, ManyFlushesEqualOneWrite) {
  std::string streamed = path("streamed.memrec"), whole = path("whole.memrec");
  Snapshot s;
  {
    Writer w(streamed);
    for (int i = 0; i < 40; ++i) {
      grow(s, i);
      if (i % 3 != 2) w.flush(s);  // some steps are flushed together
    }
    s.segments_end = rich_snapshot().segments_end;  // its stack and stream ids exist here too
    s.dropped_events = 3;
    w.close(s);
    EXPECT_EQ(w.bytes_written(), fs::file_size(streamed));
  }
  write_file(s, whole);
  Snapshot a = read_file(streamed);
  EXPECT_TRUE(a.complete);
  EXPECT_EQ(a, s);
  EXPECT_EQ(read_file(whole), s);
}

TEST_F(FormatTest, UnclosedWriterLeavesIncompleteFileWithMetadata) {
  std::string p = path("unclosed.memrec");
  Snapshot s = grown(5);
  {
    Writer w(p);
    w.flush(s);
  }
  Snapshot r = read_file(p);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.events, s.events);
  EXPECT_EQ(r.metadata, s.metadata);
  EXPECT_EQ(r.scopes, s.scopes);  // closed and open ones as they were at the flush
}

TEST_F(FormatTest, IsMemrecFile) {
  EXPECT_FALSE(is_memrec_file(test::data("torch_2layer_all.pickle")));
  EXPECT_FALSE(is_memrec_file(path("missing.memrec")));
}

TEST_F(FormatTest, RealisticHistoryTakesAtMost12BytesPerEvent) {
  Snapshot s = make_training_history(500'000, 11);
  std::string p = path("size.memrec");
  write_file(s, p);
  double per_event = static_cast<double>(fs::file_size(p)) / static_cast<double>(s.events.size());
  EXPECT_LE(per_event, 12.0);
  RecordProperty("bytes_per_event", std::to_string(per_event));
}

// ---------------------------------------------------------------- killed writers and truncation

TEST_F(FormatTest, WriterKilledMidStreamLeavesValidPrefix) {
  std::string p = path("killed.memrec");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // writes and flushes until killed, reporting each flushed event count
    close(fds[0]);
    Snapshot s;
    Writer w(p);
    for (int i = 0;; ++i) {
      grow(s, i);
      w.flush(s);
      uint64_t n = s.events.size();
      if (write(fds[1], &n, sizeof n) != sizeof n) _exit(1);
    }
  }
  close(fds[1]);
  uint64_t flushed = 0;
  while (flushed < 30'000 && read(fds[0], &flushed, sizeof flushed) == sizeof flushed) {
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_GE(flushed, 30'000u);

  Snapshot r = read_file(p);
  EXPECT_FALSE(r.complete);
  EXPECT_GE(r.events.size(), flushed);
  expect_prefix(r, grown(static_cast<int>(r.events.size() / 500) + 1));
}

TEST_F(FormatTest, TruncatedFileReadsAsPrefixAtManyOffsets) {
  Snapshot s;
  std::string p = path("full.memrec"), cut = path("cut.memrec");
  {
    Writer w(p);
    for (int i = 0; i < 12; ++i) {
      grow(s, i);
      w.flush(s);
    }
    w.close(s);
  }
  fs::copy_file(p, cut);
  std::vector<size_t> cuts;  // every offset through the first chunks (headers, tables), then every 5th
  for (size_t n = 0; n < fs::file_size(p); n += n < 2000 ? 1 : 5) cuts.push_back(n);
  size_t prefixes = 0;
  for (auto n = cuts.rbegin(); n != cuts.rend(); ++n) {  // cutting ever shorter
    fs::resize_file(cut, *n);
    if (*n < 16) {  // not even a whole file header
      EXPECT_NE(error_of([&] { read_file(cut); }).find("not a .memrec file"), std::string::npos) << *n;
      continue;
    }
    Snapshot r = read_file(cut);
    ASSERT_FALSE(r.complete) << *n;
    expect_prefix(r, s);
    ++prefixes;
  }
  EXPECT_GT(prefixes, 1000u);
}

// ---------------------------------------------------------------- corrupt files

class CorruptTest : public FormatTest {
 protected:
  void SetUp() override {
    good_ = path("good.memrec");
    write_file(grown(300), good_);  // 150k events: three event chunks
    bytes_ = read_bytes(good_);
    chunks_ = chunks_of(bytes_);
  }
  // The read error of the good file with `edit` applied.
  template <class Edit> std::string error_after(Edit&& edit) {
    std::string b = bytes_;
    edit(b);
    std::string p = path("bad.memrec");
    write_bytes(p, b);
    return error_of([&] { read_file(p); });
  }
  const Chunk& first(uint32_t type) const {
    return *std::find_if(chunks_.begin(), chunks_.end(), [&](const Chunk& c) { return c.type == type; });
  }
  template <class T> static void put(std::string& b, size_t off, T v) { std::memcpy(b.data() + off, &v, sizeof v); }

  std::string good_, bytes_;
  std::vector<Chunk> chunks_;
};

constexpr uint32_t kEventsChunk = 7;

TEST_F(CorruptTest, BadMagic) {
  EXPECT_NE(error_after([](std::string& b) { b[1] = 'X'; }).find("not a .memrec file (bad magic)"), std::string::npos);
}

TEST_F(CorruptTest, UnsupportedVersion) {
  EXPECT_NE(error_after([](std::string& b) { put<uint32_t>(b, 8, 2); })
                .find("unsupported .memrec version 2 (this memrec reads 1)"),
            std::string::npos);
}

TEST_F(CorruptTest, BadChecksumIsReportedAsSuch) {
  const Chunk& c = first(kEventsChunk);
  std::string e = error_after([&](std::string& b) { b[c.offset + 12 + c.compressed - 1] ^= 0x01; });
  EXPECT_NE(e.find("bad checksum"), std::string::npos) << e;
  EXPECT_NE(e.find(fmt::format("at offset {}", c.offset)), std::string::npos) << e;
}

TEST_F(CorruptTest, EveryFlippedPayloadByteIsCaughtOrHarmless) {
  const Chunk& c = chunks_[1];  // frames: small enough to flip every byte
  Snapshot good = read_file(good_);
  for (size_t i = c.offset + 12; i < c.offset + 12 + c.compressed; ++i) {
    std::string b = bytes_;
    b[i] ^= 0x20;
    std::string p = path("flipped.memrec");
    write_bytes(p, b);
    try {
      EXPECT_EQ(read_file(p), good) << "flip at " << i << " changed the data unnoticed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("chunk 1 (frames)"), std::string::npos) << e.what();
    }
  }
}

TEST_F(CorruptTest, ChunkLargerThanFileIsRefused) {
  const Chunk& c = first(kEventsChunk);
  std::string e = error_after([&](std::string& b) { put<uint32_t>(b, c.offset + 8, 0xfffffff0u); });
  EXPECT_NE(e.find("compressed size 4294967280 is impossible"), std::string::npos) << e;
}

TEST_F(CorruptTest, HugeRawSizeIsRefusedBeforeAllocating) {
  const Chunk& c = first(kEventsChunk);
  std::string e = error_after([&](std::string& b) { put<uint32_t>(b, c.offset + 4, 0xffffffffu); });
  EXPECT_NE(e.find("raw size 4294967295 exceeds the limit"), std::string::npos) << e;
}

TEST_F(CorruptTest, UnknownChunkType) {
  std::string e = error_after([&](std::string& b) { put<uint32_t>(b, chunks_[2].offset, 77); });
  EXPECT_NE(e.find("chunk 2 (?) at offset"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown chunk type 77"), std::string::npos) << e;
}

TEST_F(CorruptTest, MissingChunkBreaksRowContinuity) {
  std::vector<Chunk> events;
  for (const Chunk& c : chunks_)
    if (c.type == kEventsChunk) events.push_back(c);
  ASSERT_GE(events.size(), 2u);
  std::string e = error_after([&](std::string& b) { b.erase(events[0].offset, 12 + events[0].compressed); });
  EXPECT_NE(e.find("events chunk starts at row 65536, expected 0"), std::string::npos) << e;
}

TEST_F(CorruptTest, BytesAfterFooter) {
  EXPECT_NE(error_after([](std::string& b) { b += "junk"; }).find("4 bytes after the footer"), std::string::npos);
}

// Damage behind a valid checksum reaches the decoders: each chunk's raw payload of a rich file is mutated and
// recompressed. Every read must end in an Error or in a snapshot whose ids all hold.
TEST_F(FormatTest, DamagedPayloadsWithValidChecksumsAreRefusedOrHarmless) {
  std::string good = path("rich.memrec"), bad = path("bad.memrec");
  write_file(rich_snapshot(), good);
  const std::string bytes = read_bytes(good);
  std::mt19937 rng(7);
  size_t refused = 0, reads = 0;
  for (const Chunk& c : chunks_of(bytes)) {
    std::string raw = payload_of(bytes, c);
    ASSERT_EQ(raw.size(), c.raw);
    for (int i = 0; i < 150 && !raw.empty(); ++i) {
      std::string damaged = raw;
      for (int k = 0; k < 1 + i % 3; ++k) damaged[rng() % damaged.size()] = static_cast<char>(i % 2 ? 0xff : rng());
      write_bytes(bad, with_payload(bytes, c, damaged));
      ++reads;
      try {
        expect_ids_valid(read_file(bad));
      } catch (const Error&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, reads / 2);  // most damage must be noticed, not just survived
}

// A writer stores whatever ids it is given; the reader must refuse the ones that point nowhere.
TEST_F(FormatTest, OutOfRangeIdsAreRefused) {
  struct Case {
    const char* expect;
    std::function<void(Snapshot&)> spoil;
  };
  const std::vector<Case> cases = {
      {"event 3 stack id 99 out of range", [](Snapshot& s) { s.events.update(3, [&](auto& r) { r.stack = 99; }); }},
      {"event 4 scope id 50 out of range", [](Snapshot& s) { s.events.update(4, [&](auto& r) { r.scope = 50; }); }},
      {"event 5 stream id 9 out of range", [](Snapshot& s) { s.events.update(5, [&](auto& r) { r.stream = 9; }); }},
      {"enum value 11 out of range", [](Snapshot& s) { s.events.update(1, [&](auto& r) { r.action = static_cast<Action>(11); }); }},
      {"enum value 7 out of range", [](Snapshot& s) { s.scopes.update(2, [&](auto& r) { r.kind = static_cast<ScopeKind>(7); }); }},
      {"kernel name string id 1000 out of range", [](Snapshot& s) { s.kernels.update(0, [&](auto& r) { r.name = 1000; }); }},
      {"scope 2 has parent 4", [](Snapshot& s) { s.scopes.update(2, [&](auto& r) { r.parent = 4; }); }},
      {"scope name string id 777 out of range", [](Snapshot& s) { s.scopes.update(1, [&](auto& r) { r.name = 777; }); }},
      {"segment stack id 8 out of range", [](Snapshot& s) { s.segments_end[0].stack = 8; }},
      {"block stack id 8 out of range", [](Snapshot& s) { s.segments_start[0].blocks[1].stack = 8; }},
      {"stack frame id 123 out of range",
       [](Snapshot& s) { s.stacks.intern(std::vector<uint32_t>{0, 123}); }},
      {"frame function string id 555 out of range",
       [](Snapshot& s) { s.frames.intern(Frame{1, 555, 0, 0, 0}); }},
  };
  std::string p = path("ids.memrec");
  for (const Case& c : cases) {
    Snapshot s = rich_snapshot();
    c.spoil(s);
    write_file(s, p);
    std::string e = error_of([&] { read_file(p); });
    EXPECT_NE(e.find(c.expect), std::string::npos) << "want \"" << c.expect << "\", got: " << e;
  }
}

// ---------------------------------------------------------------- write errors

TEST_F(FormatTest, FullDiskIsAClearError) {
  Snapshot s = make_training_history(200'000, 5);
  std::string p = path("full_disk.memrec");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a file size limit stands in for a full disk: writes fail with EFBIG
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &lim);
    Writer w(p);
    std::string first = error_of([&] { w.flush(s); });
    if (first.find(p) == std::string::npos || first.find(std::strerror(EFBIG)) == std::string::npos) _exit(2);
    // After a torn chunk, appending more would make the file unreadable past it.
    _exit(error_of([&] { w.close(s); }).find("an earlier write failed") != std::string::npos ? 0 : 3);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the error named neither the path nor the cause, 3: writing went on";
  Snapshot r = read_file(p);  // what made it to disk is still readable
  EXPECT_FALSE(r.complete);
  expect_prefix(r, s);
}

TEST_F(FormatTest, UncreatableFileIsAClearError) {
  std::string p = path("no_such_dir") + "/x.memrec";
  std::string e = error_of([&] { Writer w(p); });
  EXPECT_NE(e.find(p + ": cannot create: No such file or directory"), std::string::npos) << e;
}

}  // namespace
}  // namespace memrec
