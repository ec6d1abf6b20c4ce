// The owners chunk (docs/format.md, type 15): rows written after the events they follow, flush by flush, read back
// equal; only files that have owners hold the chunk, so older files read with none; bad rows are refused. Exported
// pickles name each owned block's owner in its alloc entry's user_metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "../../bench/synthetic.h"
#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/pickle.h"
#include "memrec/replay.h"

namespace memrec {
namespace {

using test::TempDir;

Owner row(Snapshot& s, uint64_t event, uint64_t addr, const std::string& name, const std::string& module,
          OwnerKind kind, uint8_t device = 0) {
  return Owner{.time_ns = static_cast<int64_t>(event) * 10, .event = event, .addr = addr, .size = 2048,
               .name = s.strings.intern(name), .module = module.empty() ? 0 : s.strings.intern(module), .kind = kind,
               .device = device};
}

Snapshot with_owners() {
  Snapshot s = make_synthetic(3000, 9);
  s.owners.push_back(row(s, 0, 0x1000, "net.0.weight", "net.0", OwnerKind::parameter));
  s.owners.push_back(row(s, 5, 0x2000, "layers.0.1.running_mean", "layers.0.1", OwnerKind::buffer));
  s.owners.push_back(row(s, 5, 0x3000, "net.0.weight.grad", "net.0", OwnerKind::gradient, 1));
  s.owners.push_back(row(s, s.events.size(), 0x4000, "Adam.param_groups.0.0.exp_avg", "", OwnerKind::optimizer_state));
  return s;
}

TEST(FormatOwners, ReadBackEqual) {
  TempDir tmp;
  Snapshot s = with_owners();
  write_file(s, tmp / "o.memrec");
  EXPECT_TRUE(read_file(tmp / "o.memrec") == s);
}

TEST(FormatOwners, RowsWrittenAcrossFlushesReadBackEqual) {
  TempDir tmp;
  Snapshot all = with_owners(), s = make_synthetic(3000, 9);
  PackedVector<Event> events = s.events;
  s.events = {};
  {
    Writer w(tmp / "f.memrec");
    size_t next_owner = 0;
    for (uint32_t i = 0; i < events.size(); ++i) {
      while (next_owner < all.owners.size() && all.owners[next_owner].event == i)
        s.owners.push_back(all.owners[next_owner++]);
      s.events.push_back(events[i]);
      if (i % 700 == 0) s.strings = all.strings, w.flush(s);
    }
    while (next_owner < all.owners.size()) s.owners.push_back(all.owners[next_owner++]);
    s.strings = all.strings;
    w.close(s);
  }
  Snapshot back = read_file(tmp / "f.memrec");
  EXPECT_EQ(back.owners, all.owners);
  EXPECT_EQ(back, s);
}

TEST(FormatOwners, OnlySnapshotsWithOwnersGetTheChunkAndOlderFilesHaveNone) {
  TempDir tmp;
  Snapshot s = with_owners();
  Snapshot plain = s;
  plain.owners = {};
  write_file(plain, tmp / "plain.memrec");
  write_file(s, tmp / "o.memrec");
  auto size = [&](const char* name) { return std::filesystem::file_size(tmp / name); };
  EXPECT_GT(size("o.memrec"), size("plain.memrec") + 12);
  EXPECT_TRUE(read_file(tmp / "plain.memrec").owners.empty());
  for (const char* old : {"alloc_default.memrec", "alloc_run12.memrec", "transformer_2layer_cpu.memrec"})
    EXPECT_TRUE(read_file(test::data(old)).owners.empty()) << old;
}

TEST(FormatOwners, BadRowsAreRefused) {
  struct Case {
    const char* expect;
    void (*change)(Owner&);
  };
  const Case cases[] = {
      {"owner name string id 100000 out of range", [](Owner& o) { o.name = 100000; }},
      {"owner module string id 100000 out of range", [](Owner& o) { o.module = 100000; }},
      {"enum value 7 out of range", [](Owner& o) { o.kind = static_cast<OwnerKind>(7); }},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    Snapshot s = with_owners();
    Owner o = s.owners[3];
    c.change(o);
    s.owners.update(3, [&](Owner& r) { r = o; });
    write_file(s, tmp / "bad.memrec");
    try {
      read_file(tmp / "bad.memrec");
      ADD_FAILURE() << "no error for " << c.expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
  Snapshot past = with_owners();
  Owner late = past.owners[3];
  late.event = past.events.size() + 1;
  past.owners.update(3, [&](Owner& r) { r = late; });
  write_file(past, tmp / "late.memrec");
  try {
    read_file(tmp / "late.memrec");
    ADD_FAILURE() << "no error for a row after the last event";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("owner row 3 comes after event {} of {}", late.event,
                                                     past.events.size())), std::string::npos) << e.what();
  }
  Snapshot s = with_owners();
  Owner o = s.owners[2];
  o.event = 1;  // before the row ahead of it
  s.owners.update(2, [&](Owner& r) { r = o; });
  write_file(s, tmp / "order.memrec");
  EXPECT_THROW(read_file(tmp / "order.memrec"), Error);
}


// tests/data/mlp_sequential_cpu.memrec: `memrec record` of an nn.Sequential trained with Adam on the CPU, with its
// parameters, gradients and Adam state owned. In the pickle, the alloc entries of exactly those blocks carry
// "name (kind)" as user_metadata, in the same order as the recording's allocations.
TEST(FormatOwners, ThePickleNamesEachOwnedBlockInItsUserMetadata) {
  Snapshot s = load_snapshot(test::data("mlp_sequential_cpu.memrec"));
  Replay r(s, 0);
  ASSERT_TRUE(r.has_owners());
  std::vector<std::string> want;  // per alloc event, in order: the owner's label or ""
  std::unordered_map<uint32_t, std::string> by_event;
  for (uint32_t id = 0; id < r.allocations().size(); ++id)
    if (uint32_t row = r.owner_of(id); row != kNoOwner && r.allocation(id).event != kNoEvent)
      by_event[r.allocation(id).event] = s.strings[s.owners[row].name] + " (" + std::string(to_string(s.owners[row].kind)) + ")";
  for (size_t i = 0; i < s.events.size(); ++i)
    if (s.events[i].action == Action::alloc) want.push_back(by_event.count(i) ? by_event[i] : "");
  ASSERT_GE(by_event.size(), 10u) << "parameters, gradients and Adam state of five layers";

  auto bytes = export_pickle(s);
  Snapshot back = import_pickle(bytes);
  std::unordered_map<uint64_t, std::string> metadata;
  for (const EventContext& c : back.event_contexts)
    if (c.user_metadata) metadata[c.event] = back.strings[c.user_metadata];
  std::vector<std::string> got;
  for (size_t i = 0; i < back.events.size(); ++i)
    if (back.events[i].action == Action::alloc) got.push_back(metadata.count(i) ? metadata[i] : "");
  EXPECT_EQ(got, want);
  EXPECT_NE(std::find(got.begin(), got.end(), "0.weight (parameter)"), got.end());
  EXPECT_NE(std::find(got.begin(), got.end(), "0.weight.exp_avg (optimizer_state)"), got.end());
}

}  // namespace
}  // namespace memrec
