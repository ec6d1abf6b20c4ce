// A long recording to a file through the recorder's CPU hook: the recorder holds at most about one drain's rows at a
// time, however long the run, and the file reads back whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "../../bench/recorder/cpu_training_loop.h"
#include "checks.h"
#include "memrec/format.h"
#include "memrec/recorder.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;

// Each owner row names a block live where its `event` (the events before it in the whole recording) places it.
void expect_owners_name_live_blocks(const Snapshot& s) {
  std::map<uint64_t, uint64_t> live;
  size_t next = 0;
  for (size_t i = 0; i <= s.events.size(); ++i) {
    for (; next < s.owners.size() && s.owners[next].event == i; ++next) {
      auto it = live.find(s.owners[next].addr);
      ASSERT_TRUE(it != live.end() && it->second == s.owners[next].size) << "owner row " << next << " at event " << i;
    }
    if (i == s.events.size()) break;
    Event e = s.events[i];
    if (e.action == Action::alloc) live[e.addr] = e.size;
    if (e.action == Action::free_completed) live.erase(e.addr);
  }
  EXPECT_EQ(next, s.owners.size());
}

TEST(RecorderToFile, HoldsAboutOneDrainOfRowsAndTheFileReadsBackWhole) {
  fs::path out = fs::temp_directory_path() / ("memrec_bounded_test_" + std::to_string(getpid()) + ".memrec");
  RecorderOptions o;
  o.output = out.string();
  o.cuda = false;
  o.stacks = false;  // the hook, not the unwinder, is under test
  o.ops = false;     // the loop opens its own op scopes
  o.quiet = true;
  o.flush_ms = 20;                // many drains, each handing its rows to the file
  o.buffer_events = size_t{1} << 18;  // room for a drain thread that a loaded machine leaves waiting
  bench::CpuTrainingLoop loop(3);
  const uint64_t steps = 400;  // 1.44M events
  Recorder rec(o);
  rec.start();
  at::Tensor weights;
  for (uint64_t step = 0; step < steps; ++step) {
    weights = at::empty({4096}, at::kByte);  // the previous step's are freed
    record_owner(0, reinterpret_cast<uint64_t>(weights.data_ptr()), weights.nbytes(), "weights." + std::to_string(step),
                 "", OwnerKind::parameter);
    loop.step(step);
  }
  EXPECT_THROW(rec.snapshot(), Error);  // the file is the record, read back after stop()
  rec.stop();
  RecorderStats st = rec.stats();
  // Every event made while recording was kept, dropped and counted, or (a free whose alloc was dropped: a drain
  // thread that a loaded machine starves drops events) a free that matched no block, counted too.
  const uint64_t made = steps * loop.kEventsPerStep + steps + 2 * (steps - 1);  // the loop's, then the weights'
  ASSERT_EQ(st.events + st.dropped + st.cpu_unmatched_frees, made);
  if (st.dropped == 0) EXPECT_EQ(st.cpu_unmatched_frees, 0u);
  EXPECT_EQ(st.owners + st.owners_dropped, steps);

  // A drain holds at most the batch it took, plus the open scopes and the owner rows not yet placed; a small share of
  // the run where the drain kept up (a starved one takes a full buffer while the events it dropped shrink the run).
  EXPECT_LE(st.rows_held_peak, o.buffer_events + 64);
  if (st.dropped == 0) EXPECT_LT(st.rows_held_peak * 5, st.events);

  Snapshot s = read_file(out.string());
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.events.size(), st.events);
  EXPECT_EQ(s.owners.size(), st.owners);
  EXPECT_EQ(s.dropped_events, st.dropped);
  EXPECT_EQ(s.metadata.at("recorder.cpu_unmatched_frees"), std::to_string(st.cpu_unmatched_frees));
  uint64_t allocs = 0;
  for (const Event& e : s.events) allocs += e.action == Action::alloc;
  EXPECT_EQ(allocs + st.dropped_by_action[static_cast<size_t>(Action::alloc)], st.cpu_allocs);
  std::set<std::string> step_scopes;  // a drain thread that a loaded machine starves drops scopes too, counted
  for (const Scope& sc : s.scopes)
    if (sc.kind == ScopeKind::step) step_scopes.insert(std::string(s.strings[sc.name]));
  EXPECT_GE(step_scopes.size() + st.scopes_dropped, steps) << st.scopes_dropped << " scopes dropped";
  for (uint64_t step : {uint64_t{0}, steps / 2, steps - 1})
    EXPECT_TRUE(st.scopes_dropped > 0 || step_scopes.count("step " + std::to_string(step))) << step;
  for (uint32_t id = 1; id < s.scopes.size() && st.scopes_dropped == 0; ++id)  // a dropped close leaves one open
    EXPECT_GE(s.scopes[id].end_ns, s.scopes[id].start_ns) << "scope " << id << " left open";
  if (st.dropped == 0) {  // a dropped alloc leaves its block unknown: the owner rows that name it cannot be checked
    test::check_frees_match(s, 0);
    expect_owners_name_live_blocks(s);
  }
  EXPECT_TRUE(rec.snapshot() == s);
  fs::remove(out);
}

}  // namespace
}  // namespace memrec
