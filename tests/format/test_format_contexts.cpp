// The event_contexts chunk (docs/format.md, type 12): written only when a snapshot has contexts, read back equal,
// its ids checked like every other table's.
#include <gtest/gtest.h>

#include <string>

#include "../../bench/synthetic.h"
#include "common/process.h"
#include "memrec/format.h"
#include "memrec/pickle.h"

namespace memrec {
namespace {

using test::TempDir;

Snapshot with_contexts() {
  Snapshot s = make_synthetic(3000, 9);
  uint32_t compiled = s.strings.intern("Torch-Compiled Region: 0/0");
  uint32_t step = s.strings.intern("step=1");
  uint32_t extra = s.strings.intern(R"({"forward_frames":["  File \"m.py\", line 3\n"]})");
  s.event_contexts.push_back({.event = 5, .compile_context = compiled});
  s.event_contexts.push_back({.event = 6, .user_metadata = step, .extra = extra});
  s.event_contexts.push_back({.event = 2999, .compile_context = compiled, .user_metadata = step});
  return s;
}

TEST(FormatContexts, ReadBackEqual) {
  TempDir tmp;
  Snapshot s = with_contexts();
  write_file(s, tmp / "c.memrec");
  EXPECT_TRUE(read_file(tmp / "c.memrec") == s);
}

TEST(FormatContexts, OnlySnapshotsWithContextsGetTheChunk) {
  TempDir tmp;
  Snapshot s = with_contexts();
  Snapshot plain = s;
  plain.event_contexts.clear();
  write_file(plain, tmp / "plain.memrec");
  write_file(s, tmp / "c.memrec");
  // The same tables and events: the difference is the event_contexts chunk (a 12-byte header and its payload).
  auto size = [&](const char* name) { return std::filesystem::file_size(tmp / name); };
  EXPECT_GT(size("c.memrec"), size("plain.memrec") + 12);
  EXPECT_TRUE(read_file(tmp / "plain.memrec").event_contexts.empty());
}

TEST(FormatContexts, IdsPointingNowhereAreRefused) {
  struct Case {
    const char* expect;
    EventContext row;
  };
  const Case cases[] = {
      {"event context's event id 100000 out of range", {.event = 100000}},
      {"compile_context string id 100000 out of range", {.event = 7, .compile_context = 100000}},
      {"user_metadata string id 100000 out of range", {.event = 7, .user_metadata = 100000}},
      {"extra fields string id 100000 out of range", {.event = 7, .extra = 100000}},
      {"event context for event 6 out of order", {.event = 6}},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    Snapshot s = with_contexts();
    s.event_contexts.insert(s.event_contexts.begin() + 2, c.row);
    write_file(s, tmp / "bad.memrec");
    try {
      read_file(tmp / "bad.memrec");
      ADD_FAILURE() << "no error for " << c.expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace memrec
