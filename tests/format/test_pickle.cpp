// Pickle import/export against real PyTorch 2.11 snapshots, checked with Python's own pickle module.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "../../bench/synthetic.h"
#include "memrec/pickle.h"
#include "test_pickle_util.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::facts_script;
using test::TempDir;

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

json python_facts(const std::string& pickle, const TempDir& tmp) {
  std::string out = tmp / "facts.json";
  EXPECT_EQ(facts_script("facts", pickle, out), 0);
  return read_json(out);
}

// The frames of `stack` as [name, filename, line], compared with facts' frame indices.
void expect_stack(const Snapshot& s, uint32_t stack, const json& ids, const json& table, const std::string& where) {
  auto frames = s.stacks[stack];
  ASSERT_EQ(frames.size(), ids.size()) << where;
  for (size_t k = 0; k < frames.size(); ++k) {
    const Frame& f = s.frames[frames[k]];
    const json& want = table.at(ids[k].get<size_t>());
    EXPECT_EQ(f.pc, 0u) << where;
    EXPECT_EQ(s.strings[f.function], want[0].get<std::string>()) << where << " frame " << k;
    EXPECT_EQ(s.strings[f.file], want[1].get<std::string>()) << where << " frame " << k;
    EXPECT_EQ(f.line, want[2].get<uint32_t>()) << where << " frame " << k;
  }
}

class PickleFixture : public ::testing::TestWithParam<std::string> {
 protected:
  std::string path() const { return test::data(GetParam()); }
  TempDir tmp;
};

TEST_P(PickleFixture, ActionCountsMatchPython) {
  Snapshot s = import_pickle_file(path());
  json facts = python_facts(path(), tmp);
  std::map<std::string, int> counts;
  for (const Event& e : s.events) ++counts[std::string(to_string(e.action))];
  EXPECT_EQ(json(counts), facts["action_counts"]);
}

TEST_P(PickleFixture, EveryEntryMatchesPython) {
  Snapshot s = import_pickle_file(path());
  json facts = python_facts(path(), tmp);
  const json& events = facts["events"];
  ASSERT_EQ(s.events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = s.events[i];
    const json& want = events[i];
    std::string where = fmt::format("entry {}", i);
    EXPECT_EQ(e.device, want["device"].get<int>()) << where;
    EXPECT_EQ(to_string(e.action), want["action"].get<std::string>()) << where;
    EXPECT_EQ(e.addr, want["addr"].get<uint64_t>()) << where;
    EXPECT_EQ(e.size, want["size"].get<uint64_t>()) << where;
    EXPECT_EQ(s.streams.at(e.stream), want["stream"].get<uint64_t>()) << where;
    EXPECT_EQ(e.time_ns, want["time_us"].get<int64_t>() * 1000) << where;
    expect_stack(s, e.stack, want["frames"], facts["frames"], where);
  }
}

TEST_P(PickleFixture, SegmentsAndBlocksMatchPython) {
  Snapshot s = import_pickle_file(path());
  json facts = python_facts(path(), tmp);
  EXPECT_FALSE(s.has_segments_start);
  const json& segments = facts["segments"];
  ASSERT_EQ(s.segments_end.size(), segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& seg = s.segments_end[i];
    const json& want = segments[i];
    std::string where = fmt::format("segment {}", i);
    EXPECT_EQ(seg.device, want["device"].get<int>()) << where;
    EXPECT_EQ(seg.addr, want["address"].get<uint64_t>()) << where;
    EXPECT_EQ(seg.total_size, want["total_size"].get<uint64_t>()) << where;
    EXPECT_EQ(seg.allocated_size, want["allocated_size"].get<uint64_t>()) << where;
    EXPECT_EQ(seg.active_size, want["active_size"].get<uint64_t>()) << where;
    EXPECT_EQ(seg.requested_size, want["requested_size"].get<uint64_t>()) << where;
    EXPECT_EQ(s.streams.at(seg.stream), want["stream"].get<uint64_t>()) << where;
    EXPECT_EQ(seg.is_large, want["segment_type"] == "large") << where;
    EXPECT_EQ(seg.is_expandable, want["is_expandable"].get<bool>()) << where;
    EXPECT_EQ(seg.pool_id[0], want["segment_pool_id"][0].get<int64_t>()) << where;
    EXPECT_EQ(seg.pool_id[1], want["segment_pool_id"][1].get<int64_t>()) << where;
    expect_stack(s, seg.stack, want["frames"], facts["frames"], where);
    ASSERT_EQ(seg.blocks.size(), want["blocks"].size()) << where;
    for (size_t k = 0; k < seg.blocks.size(); ++k) {
      const Block& b = seg.blocks[k];
      const json& wb = want["blocks"][k];
      std::string bwhere = fmt::format("{} block {}", where, k);
      EXPECT_EQ(b.addr, wb["address"].get<uint64_t>()) << bwhere;
      EXPECT_EQ(b.size, wb["size"].get<uint64_t>()) << bwhere;
      EXPECT_EQ(b.requested_size, wb["requested_size"].get<uint64_t>()) << bwhere;
      EXPECT_EQ(to_string(b.state), wb["state"].get<std::string>()) << bwhere;
      expect_stack(s, b.stack, wb["frames"], facts["frames"], bwhere);
    }
  }
}

TEST_P(PickleFixture, AnnotationsBecomeScopes) {
  Snapshot s = import_pickle_file(path());
  json facts = python_facts(path(), tmp);
  // START opens a scope, END closes the latest open one of that name on its device.
  std::vector<Scope> want{Scope{}};
  std::map<std::pair<int, std::string>, std::vector<size_t>> open;
  for (const json& a : facts["annotations"]) {
    auto key = std::make_pair(a["device"].get<int>(), a["name"].get<std::string>());
    int64_t t = a["time_us"].get<int64_t>() * 1000;
    if (a["stage"] == "START") {
      open[key].push_back(want.size());
      want.push_back(Scope{t, -1, s.strings.intern(key.second), 0, ScopeKind::annotation,
                           static_cast<uint8_t>(key.first)});
    } else if (!open[key].empty()) {
      want[open[key].back()].end_ns = t;
      open[key].pop_back();
    }
  }
  ASSERT_GT(want.size(), 1u);
  ASSERT_EQ(s.scopes.size(), want.size());
  for (size_t i = 1; i < want.size(); ++i) {
    Scope got = s.scopes[i];
    got.parent = 0;  // nesting is checked below
    EXPECT_EQ(got, want[i]) << "scope " << i;
  }
  // Each event is tagged with an annotation open at its time, and untagged only when none is.
  for (const Event& e : s.events) {
    bool inside = false;
    for (size_t i = 1; i < s.scopes.size(); ++i)
      inside |= s.scopes[i].start_ns <= e.time_ns && (s.scopes[i].end_ns == -1 || e.time_ns <= s.scopes[i].end_ns);
    if (e.scope == 0) {
      EXPECT_FALSE(inside) << e.time_ns;
    } else {
      Scope sc = s.scopes.at(e.scope);
      EXPECT_LE(sc.start_ns, e.time_ns);
      EXPECT_TRUE(sc.end_ns == -1 || e.time_ns <= sc.end_ns);
    }
  }
}

TEST_P(PickleFixture, AllocatorSettingsKeptAsJson) {
  Snapshot s = import_pickle_file(path());
  json facts = python_facts(path(), tmp);
  ASSERT_FALSE(facts["allocator_settings"].is_null());
  EXPECT_EQ(json::parse(s.metadata.at("allocator_settings")), facts["allocator_settings"]);
}

TEST_P(PickleFixture, ExportLoadsInPythonEqualToTheOriginal) {
  std::string out = tmp / "export.pickle";
  export_pickle_file(import_pickle_file(path()), out);
  EXPECT_EQ(facts_script("diff", path(), out), 0);
}

TEST_P(PickleFixture, ImportOfExportIsIdentity) {
  Snapshot s = import_pickle_file(path());
  EXPECT_TRUE(import_pickle(export_pickle(s)) == s);
}

TEST_P(PickleFixture, ExportIsSmallerThanPytorchPickle) {
  size_t original = test::file_bytes(path()).size();
  size_t exported = export_pickle(import_pickle_file(path())).size();
  std::cout << GetParam() << ": " << exported << " bytes vs PyTorch's " << original << " ("
            << fmt::format("{:.2f}", double(exported) / double(original)) << ")\n";
  RecordProperty("export_bytes", std::to_string(exported));
  RecordProperty("pytorch_bytes", std::to_string(original));
  EXPECT_LT(exported, original);
}

// The opcode set of pytorch.org/memory_viz's unpickler (torch/utils/viz/MemoryViz.js).
const std::set<std::string> kMemoryVizOpcodes = {
    "PROTO",      "APPEND",       "APPENDS",     "LIST",       "TUPLE",      "NEWFALSE",         "NEWTRUE",
    "NONE",       "BINGET",       "BININT",      "BININT1",    "BININT2",    "EMPTY_DICT",       "EMPTY_LIST",
    "FRAME",      "LONG1",        "LONG_BINGET", "MARK",       "MEMOIZE",    "BINPUT",           "LONG_BINPUT",
    "SETITEMS",   "SETITEM",      "DICT",        "SHORT_BINUNICODE", "BINUNICODE", "STOP",      "EMPTY_TUPLE",
    "TUPLE1",     "TUPLE2",       "TUPLE3",      "BINFLOAT"};

TEST_P(PickleFixture, ExportUsesOnlyMemoryVizOpcodes) {
  std::string out = tmp / "export.pickle", ops = tmp / "ops.json";
  export_pickle_file(import_pickle_file(path()), out);
  ASSERT_EQ(facts_script("opcodes", out, ops), 0);
  json j = read_json(ops);
  EXPECT_EQ(j["protocol"], 4);
  for (const auto& name : j["opcodes"]) EXPECT_TRUE(kMemoryVizOpcodes.count(name.get<std::string>())) << name;
  EXPECT_LE(j["largest_int"].get<uint64_t>(), uint64_t{1} << 53);
}

TEST_P(PickleFixture, Protocol5ImportsAndConvertsTo4) {
  std::string p5 = tmp / "p5.pickle", p4 = tmp / "p4.pickle";
  ASSERT_EQ(facts_script("proto5", path(), p5), 0);
  ASSERT_EQ(test::file_bytes(p5).at(1), 5);
  Snapshot s = import_pickle_file(p5);
  EXPECT_TRUE(s == import_pickle_file(path()));
  export_pickle_file(s, p4);
  EXPECT_EQ(facts_script("diff", path(), p4), 0);
}

INSTANTIATE_TEST_SUITE_P(Torch211, PickleFixture,
                         ::testing::Values("torch_2layer_python.pickle", "torch_2layer_all.pickle"),
                         [](const auto& info) { return info.param.substr(0, info.param.find('.')); });

// A history no fixture has: two devices, an oom, expandable segments, a second stream, unclosed annotations.
Snapshot two_device_history() {
  Snapshot s;
  Frame f{0, s.strings.intern("forward"), s.strings.intern("model.py"), 0, 42};
  uint32_t frame = s.frames.intern(f);
  std::vector<uint32_t> ids{frame, frame};
  uint32_t stack = s.stacks.intern(ids);
  uint16_t side = s.intern_stream(0x5555aaaa0000);
  s.scopes.push_back(Scope{1000, -1, s.strings.intern("step"), 0, ScopeKind::annotation, 1});
  s.events.push_back(Event{1000, 0x7f0000000000, 1 << 20, stack, 0, 0, 0, Action::segment_map, 0});
  s.events.push_back(Event{2000, 0x7f0000000000, 512, stack, 0, 0, side, Action::alloc, 0});
  s.events.push_back(Event{3000, 123456789, 1ull << 40, 0, 1, 0, 0, Action::oom, 1});
  s.events.push_back(Event{4000, 0x7e0000000000, 2 << 20, 0, 1, 0, 0, Action::segment_alloc, 1});
  Segment seg;
  seg.addr = 0x7e0000000000;
  seg.total_size = 2 << 20;
  seg.device = 1;
  seg.pool_id[0] = 1;
  seg.pool_id[1] = -3;
  seg.is_expandable = true;
  seg.is_large = false;
  seg.stream = side;
  seg.blocks.push_back(Block{seg.addr, 2 << 20, 100, stack, BlockState::active_pending_free});
  s.segments_end.push_back(seg);
  s.metadata["allocator_settings"] = R"({"expandable_segments":true,"ratio":0.5,"limit":-1,"none":null})";
  return s;
}

TEST(Pickle, TwoDevicesOomAndSettingsRoundTrip) {
  TempDir tmp;
  Snapshot s = two_device_history();
  std::string out = tmp / "two.pickle";
  export_pickle_file(s, out);
  EXPECT_TRUE(import_pickle_file(out) == s);
  json facts = python_facts(out, tmp);
  ASSERT_EQ(facts["events"].size(), 4u);
  EXPECT_EQ(facts["events"][2]["device"], 1);
  EXPECT_EQ(facts["events"][2]["action"], "oom");
  EXPECT_EQ(facts["events"][2]["addr"], 123456789);  // read from device_free by Python
  EXPECT_EQ(facts["events"][1]["stream"], 0x5555aaaa0000);
  EXPECT_EQ(facts["segments"][0]["segment_pool_id"], json::array({1, -3}));
  EXPECT_EQ(facts["segments"][0]["blocks"][0]["state"], "active_pending_free");
  EXPECT_EQ(facts["allocator_settings"], json::parse(s.metadata["allocator_settings"]));
  EXPECT_EQ(facts["annotations"], json::parse(R"([{"stage":"START","name":"step","device":1,"time_us":1}])"));
}

using ResolvedStack = std::vector<std::tuple<std::string, std::string, uint32_t>>;

ResolvedStack resolve(const Snapshot& s, uint32_t stack) {
  ResolvedStack out;
  for (uint32_t id : s.stacks[stack]) {
    const Frame& f = s.frames[id];
    out.emplace_back(s.strings[f.function], s.strings[f.file], f.line);
  }
  return out;
}

// Events and segments equal up to the numbering of strings, frames, stacks and streams.
void expect_same_history(const Snapshot& a, const Snapshot& b) {
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    Event x = a.events[i], y = b.events[i];
    ASSERT_EQ(resolve(a, x.stack), resolve(b, y.stack)) << "event " << i;
    ASSERT_EQ(a.streams.at(x.stream), b.streams.at(y.stream)) << "event " << i;
    x.stack = y.stack = 0;
    x.stream = y.stream = 0;
    ASSERT_EQ(x, y) << "event " << i;
  }
  ASSERT_EQ(a.segments_end.size(), b.segments_end.size());
  for (size_t i = 0; i < a.segments_end.size(); ++i) {
    Segment x = a.segments_end[i], y = b.segments_end[i];
    ASSERT_EQ(resolve(a, x.stack), resolve(b, y.stack)) << "segment " << i;
    ASSERT_EQ(x.blocks.size(), y.blocks.size()) << "segment " << i;
    for (size_t k = 0; k < x.blocks.size(); ++k) {
      ASSERT_EQ(resolve(a, x.blocks[k].stack), resolve(b, y.blocks[k].stack)) << "segment " << i << " block " << k;
      x.blocks[k].stack = y.blocks[k].stack = 0;
    }
    x.stack = y.stack = 0;
    x.stream = y.stream = 0;
    ASSERT_EQ(x, y) << "segment " << i;
  }
}

TEST(Pickle, SyntheticHistoryRoundTrips) {
  Snapshot s = make_synthetic(20000, 7);
  for (size_t i = 0; i < s.events.size(); ++i)  // pickles carry requested sizes only
    s.events.update(i, [](Event& e) { e.rounding = 0; });
  ASSERT_GT(s.stacks.size(), 256u);           // memo ids past BINGET's reach
  expect_same_history(import_pickle(export_pickle(s)), s);
}

TEST(Pickle, LegacyEntriesWithoutFramesGetTheEmptyStack) {
  TempDir tmp;
  std::string p = tmp / "legacy.pickle";
  test::python_pickle(
      "{'segments': [{'address': 4096, 'total_size': 8192, 'stream': 0, 'segment_type': 'large',"
      " 'blocks': [{'address': 4096, 'size': 8192, 'state': 'inactive'}]}],"
      " 'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 10, 'stream': 0}]]}",
      p);
  Snapshot s = import_pickle_file(p);
  ASSERT_EQ(s.events.size(), 1u);
  EXPECT_EQ(s.events[0].stack, 0u);
  EXPECT_EQ(s.events[0].time_ns, 0);
  ASSERT_EQ(s.segments_end.size(), 1u);
  EXPECT_EQ(s.segments_end[0].blocks.at(0).requested_size, 8192u);  // no requested_size: the block size
}

TEST(Pickle, MissingFileIsAClearError) {
  try {
    import_pickle_file("/nonexistent/snapshot.pickle");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/snapshot.pickle"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memrec
