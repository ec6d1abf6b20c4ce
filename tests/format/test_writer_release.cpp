// Writer::flush_and_release, as memrec::Recorder writes a file: the file is byte for byte the one plain flushes write
// from the whole recording, while the snapshot and the writer hold only a few rows between flushes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/chunks.h"
#include "common/recorded_writes.h"
#include "memrec/format.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;
using test::Flush;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A run whose flushes end where owner rows fall: those are placed by the index with the next flush's first event,
// after the writer let go of the rest.
Snapshot run_with_owners_at_flush_ends(size_t events, size_t flushes) {
  Snapshot s = test::long_run(events, 9);
  PackedVector<Owner> owners;
  uint32_t name = s.strings.intern("net.1.bias");
  size_t next_end = 1;
  auto end_of = [&](size_t f) { return s.events.size() * f / flushes; };
  for (const Owner& o : s.owners) {
    for (; next_end < flushes && end_of(next_end) <= o.event; ++next_end) {
      Event e = s.events[end_of(next_end) - 1];
      owners.push_back(Owner{e.time_ns, end_of(next_end), e.addr, e.size, name, 0, OwnerKind::buffer, 0});
    }
    owners.push_back(o);
  }
  s.owners = std::move(owners);
  return s;
}

TEST(WriterRelease, WritesTheFilePlainFlushesWrite) {
  fs::path dir = fs::temp_directory_path() / ("memrec_release_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const size_t flushes = 150;
  Snapshot run = run_with_owners_at_flush_ends(450'000, flushes);
  WriterOptions often{.events_per_live_state = 20'000};  // many live states and index chunks, open scopes in each
  uint64_t kept = test::write_as_recorded(run, (dir / "kept.memrec").string(), flushes, Flush::keep, often);
  uint64_t held = test::write_as_recorded(run, (dir / "released.memrec").string(), flushes, Flush::release, often);

  std::string a = read_bytes(dir / "kept.memrec"), b = read_bytes(dir / "released.memrec");
  EXPECT_TRUE(a == b) << "files differ: " << a.size() << " and " << b.size() << " bytes";
  size_t live_states = 0;
  for (const test::Chunk& c : test::chunks_of(b)) live_states += c.type == 17;
  EXPECT_GE(live_states, 20u);
  EXPECT_EQ(test::differences(read_file((dir / "released.memrec").string()), run), "");

  EXPECT_GE(kept, run.events.size() + run.owners.size());  // by the last flush, plain flushes hold every row
  // Left between flushes: the step and op scopes open or named by the next index chunk, the unplaced owner rows.
  EXPECT_LT(held, 100u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace memrec
