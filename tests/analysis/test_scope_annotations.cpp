// memrec's steps, phases and modules in an exported pickle's external_annotations, in PyTorch's format
// (stage/name/device/time_us), and back as the same scopes on import.
#include <gtest/gtest.h>

#include <map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/load.h"
#include "memrec/pickle.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::TempDir;

// "kind name [start_us, end_us] in parent" for every scope but ops, the way a round trip can keep them
// (times in whole microseconds, as pickles hold them).
std::vector<std::string> scope_lines(const Snapshot& s) {
  std::vector<std::string> out;
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    if (sc.kind == ScopeKind::op) continue;
    uint32_t parent = sc.parent;
    while (parent && s.scopes[parent].kind == ScopeKind::op) parent = s.scopes[parent].parent;
    out.push_back(fmt::format("{} {} [{}, {}] in {}", to_string(sc.kind), s.strings[sc.name], sc.start_ns / 1000,
                              sc.end_ns / 1000, parent ? s.strings[s.scopes[parent].name] : "-"));
  }
  return out;
}

// The recorded transformer: 4 steps, their phases and every layer's modules, and op scopes under them.
const std::string kRecording = test::data("transformer_2layer_cpu.memrec");

TEST(ScopeAnnotations, RoundTripKeepsStepsPhasesAndModules) {
  Snapshot a = load_snapshot(kRecording);
  Snapshot b = import_pickle(export_pickle(a));
  auto want = scope_lines(a);
  ASSERT_GT(want.size(), 20u);
  EXPECT_EQ(scope_lines(b), want);
  // What the scopes answer is the same: live memory at the peak by module, phase and category.
  Replay ra(a, 0), rb(b, 0);
  for (GroupBy by : {GroupBy::module, GroupBy::phase, GroupBy::category, GroupBy::layer}) {
    auto ga = group_live(a, ra, ra.peak_allocated().step, by), gb = group_live(b, rb, rb.peak_allocated().step, by);
    ASSERT_EQ(ga.size(), gb.size()) << to_string(by);
    for (size_t i = 0; i < ga.size(); ++i) {
      EXPECT_EQ(ga[i].key, gb[i].key) << to_string(by);
      EXPECT_EQ(ga[i].bytes, gb[i].bytes) << to_string(by) << " " << ga[i].key;
    }
  }
}

// python3's pickle reads them as PyTorch writes its own: START and END dicts in time order, each END after its
// START; memrec's carry memrec_kind beside.
TEST(ScopeAnnotations, PythonReadsThemInPyTorchsFormat) {
  TempDir dir;
  export_pickle_file(load_snapshot(kRecording), dir / "t.pickle");
  auto r = run_command("/usr/bin/python3 -c " +
                       quote("import json, pickle, sys\n"
                             "a = pickle.load(open(sys.argv[1], \"rb\"))[\"external_annotations\"]\n"
                             "print(json.dumps(a))\n") +
                       " " + quote(dir / "t.pickle"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto marks = nlohmann::json::parse(r.output);
  std::map<std::string, size_t> kinds;
  std::map<std::string, int> open;
  int64_t last = 0;
  for (const auto& m : marks) {
    EXPECT_EQ(m.size(), 5u) << m;  // stage, name, device, time_us, memrec_kind
    EXPECT_GE(m["time_us"].get<int64_t>(), last);
    last = m["time_us"].get<int64_t>();
    ++kinds[m["memrec_kind"].get<std::string>()];
    int& depth = open[m["name"].get<std::string>()];
    depth += m["stage"] == "START" ? 1 : -1;
    EXPECT_GE(depth, 0) << m;
  }
  EXPECT_GT(kinds["step"], 0u);
  EXPECT_GT(kinds["phase"], 0u);
  EXPECT_GT(kinds["module"], 0u);
  EXPECT_EQ(kinds.size(), 3u);
}

// PyTorch's own annotations (no memrec_kind) stay annotations, and still mark the optimizer.
TEST(ScopeAnnotations, PyTorchAnnotationsStayAnnotations) {
  Snapshot s = load_snapshot(test::data("torch_compile_graph.pickle"));
  size_t annotations = 0;
  for (const Scope& sc : s.scopes) annotations += sc.kind == ScopeKind::annotation;
  EXPECT_EQ(annotations + 1, s.scopes.size());
  EXPECT_EQ(scope_lines(import_pickle(export_pickle(s))), scope_lines(s));
}

}  // namespace
}  // namespace memrec
