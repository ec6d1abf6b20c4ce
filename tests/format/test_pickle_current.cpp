// Snapshots of current PyTorch (2.11 and the fields of later versions): compile_context, user_metadata,
// forward_frames, annotate entries, host (pinned memory) traces, line 2^64-1 — kept through pickle -> Snapshot ->
// pickle and pickle -> .memrec -> pickle, compared with the original by Python's own pickle module.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "memrec/format.h"
#include "memrec/pickle.h"
#include "test_pickle_util.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::facts_script;
using test::TempDir;

// pickle -> Snapshot -> .memrec file -> Snapshot -> pickle.
void export_through_memrec(const std::string& in, const std::string& out, const TempDir& tmp) {
  std::string file = tmp / "through.memrec";
  write_file(import_pickle_file(in), file);
  export_pickle_file(read_file(file), out);
}

TEST(CurrentPytorch, CompiledGraphFixtureExportsEqualToTheOriginal) {
  TempDir tmp;
  std::string out = tmp / "export.pickle";
  export_pickle_file(import_pickle_file(test::data("torch_compile_graph.pickle")), out);
  EXPECT_EQ(facts_script("diff", test::data("torch_compile_graph.pickle"), out), 0);
}

TEST(CurrentPytorch, CompiledGraphFixtureSurvivesAMemrecFile) {
  TempDir tmp;
  std::string out = tmp / "export.pickle";
  export_through_memrec(test::data("torch_compile_graph.pickle"), out, tmp);
  EXPECT_EQ(facts_script("diff", test::data("torch_compile_graph.pickle"), out), 0);
}

TEST(CurrentPytorch, CompileContextAndUserMetadataAreKeptPerEvent) {
  Snapshot s = import_pickle_file(test::data("torch_compile_graph.pickle"));
  size_t compiled = 0, graph = 0;
  for (const EventContext& c : s.event_contexts) {
    compiled += s.strings[c.compile_context] == "Torch-Compiled Region: 0/0";
    graph += s.strings[c.user_metadata] == "cuda_graph";
  }
  EXPECT_EQ(compiled, 12u);  // counted with Python: 6 entries in each of the two steps
  EXPECT_EQ(graph, 86u);
  // Entries with both defaults ('N/A', '') take no row.
  EXPECT_EQ(s.event_contexts.size(), s.events.size() - 72);
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
}

TEST(CurrentPytorch, CudaGraphPoolSurvivesAMemrecFile) {
  TempDir tmp;
  std::string file = tmp / "graph.memrec";
  write_file(import_pickle_file(test::data("torch_compile_graph.pickle")), file);
  Snapshot s = read_file(file);
  auto graph_pool = [](const Segment& seg) { return seg.pool_id[0] == 1 && seg.pool_id[1] == 0; };
  EXPECT_EQ(std::count_if(s.segments_end.begin(), s.segments_end.end(), graph_pool), 2);
}

// The fields no fixture has, shaped as PyTorch writes them: a Python frame with line 2^64-1, forward_frames
// (a list of formatted frames), an annotate entry (torch.cuda.memory._annotate_memory) with dict metadata, an
// empty compile_context, and the host_segments/host_traces of record_pinned_host_memory.
const char* kNewerFields = R"(
{'segments': [{'device': 0, 'address': 1048576, 'total_size': 2097152, 'allocated_size': 512,
   'active_size': 512, 'requested_size': 500, 'stream': 0, 'segment_type': 'small', 'segment_pool_id': (0, 0),
   'is_expandable': False, 'frames': [],
   'blocks': [{'address': 1048576, 'size': 512, 'requested_size': 500, 'state': 'active_allocated',
               'frames': [{'name': 'forward', 'filename': 'model.py', 'line': 2**64 - 1}]}]}],
 'device_traces': [[
   {'action': 'segment_alloc', 'addr': 1048576, 'size': 2097152, 'stream': 0, 'time_us': 10,
    'compile_context': 'N/A', 'user_metadata': '', 'frames': []},
   {'action': 'alloc', 'addr': 1048576, 'size': 500, 'stream': 0, 'time_us': 11,
    'compile_context': 'Torch-Compiled Region: 0/0', 'user_metadata': 'step=0',
    'frames': [{'name': 'forward', 'filename': 'model.py', 'line': 2**64 - 1},
               {'name': 'main', 'filename': 'train.py', 'line': 7}],
    'forward_frames': ['  File "model.py", line 3, in forward\n', '    return self.up(x)\n']},
   {'action': 'annotate', 'addr': 1048576, 'size': 500, 'stream': 0, 'time_us': 12,
    'compile_context': '', 'user_metadata': {'retained_by': 'autograd', 'step': 0},
    'frames': [{'name': 'pack_hook', 'filename': 'autograd.py', 'line': 12}]}]],
 'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': '', 'max_split_size': -1},
 'external_annotations': [{'stage': 'START', 'name': 'step', 'device': 0, 'time_us': 9}],
 'host_segments': [{'address': 140000000000, 'total_size': 4096, 'allocated_size': 4096, 'requested_size': 4000,
   'blocks': [{'address': 140000000000, 'size': 4096, 'requested_size': 4000, 'state': 'active_allocated',
               'frames': [{'name': 'pin', 'filename': 'data.py', 'line': 2**64 - 1}]}]}],
 'host_traces': [{'action': 'alloc', 'addr': 140000000000, 'size': 4000, 'stream': 0, 'time_us': 11,
   'frames': [{'name': 'pin', 'filename': 'data.py', 'line': 5}]}]}
)";

class NewerFields : public ::testing::Test {
 protected:
  void SetUp() override { test::python_pickle(kNewerFields, in); }
  TempDir tmp;
  std::string in = tmp / "newer.pickle";
  std::string out = tmp / "export.pickle";
};

TEST_F(NewerFields, ImportKeepsTheUnknownLineAndRealLines) {
  Snapshot s = import_pickle_file(in);
  ASSERT_EQ(s.events.size(), 3u);
  auto alloc = s.stacks[s.events[1].stack];
  ASSERT_EQ(alloc.size(), 2u);
  EXPECT_EQ(s.frames[alloc[0]].line, kUnknownLine);
  EXPECT_EQ(s.frames[alloc[1]].line, 7u);
  EXPECT_EQ(s.events[2].action, Action::annotate);
}

TEST_F(NewerFields, ExportEqualsTheOriginal) {
  export_pickle_file(import_pickle_file(in), out);
  EXPECT_EQ(facts_script("diff", in, out), 0);
}

TEST_F(NewerFields, SurviveAMemrecFile) {
  export_through_memrec(in, out, tmp);
  EXPECT_EQ(facts_script("diff", in, out), 0);
}

TEST_F(NewerFields, ImportOfExportIsIdentity) {
  Snapshot s = import_pickle_file(in);
  EXPECT_TRUE(import_pickle(export_pickle(s)) == s);
}

TEST(CurrentPytorch, LinesPastThirtyTwoBitsOtherThanUnknownAreStillRefused) {
  TempDir tmp;
  std::string p = tmp / "line.pickle";
  test::python_pickle(
      "{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 0, 'size': 1, 'stream': 0,"
      " 'frames': [{'name': 'f', 'filename': 'x.py', 'line': 2**32}]}]]}",
      p);
  EXPECT_THROW(import_pickle_file(p), Error);
}

}  // namespace
}  // namespace memrec
