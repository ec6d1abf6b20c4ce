// The recorder on a real libtorch CPU run (Debian's libtorch 1.13 in CI): through `memrec run` and in-process.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/wait.h>
#include <unistd.h>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checks.h"
#include "memrec/format.h"
#include "memrec/recorder.h"
#include "memrec/replay.h"
#include "memrec/workloads.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  auto dir = fs::temp_directory_path() / fmt::format("memrec_recorder_test_{}", ::getpid());
  fs::create_directories(dir);
  return dir;
}

int run_memrec(const std::string& args, const fs::path& log) {
  std::string cmd = fmt::format("'{}' {} > '{}' 2>&1", MEMREC_BINARY, args, log.string());
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

workloads::Config small_cpu(const char* model = "transformer") {
  workloads::Config c = workloads::cpu_defaults({});
  c.model = model;
  c.layers = 2;
  c.steps = 2;
  return c;
}

TEST(RunCommand, RecordsTransformerOnCpu) {
  auto dir = temp_dir();
  auto out = dir / "run.memrec", pickle = dir / "run.pickle", log = dir / "run.log";
  ASSERT_EQ(run_memrec(fmt::format("run transformer --layers 2 --device cpu -o '{}' --pickle '{}'", out.string(),
                                   pickle.string()), log), 0)
      << slurp(log);
  std::string text = slurp(log);
  EXPECT_NE(text.find("peak allocated"), std::string::npos) << text;
  EXPECT_NE(text.find("dropped: 0"), std::string::npos) << text;
  EXPECT_TRUE(fs::file_size(pickle) > 0);

  Snapshot s = read_file(out.string());
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.dropped_events, 0u);
  EXPECT_EQ(s.metadata.at("device.0.type"), "cpu");
  ASSERT_GT(s.events.size(), 1000u);
  auto live = test::check_frees_match(s, 0);
  EXPECT_TRUE(live.empty()) << live.size() << " blocks never freed although the workload was destroyed";
  test::check_frames(s);
  for (const char* phase : {"forward", "backward", "optimizer"})
    EXPECT_TRUE(test::has_scope(s, ScopeKind::phase, phase)) << phase;
  EXPECT_TRUE(test::has_scope(s, ScopeKind::module, "layers.1.self_attn"));
  EXPECT_TRUE(test::has_scope(s, ScopeKind::step, "step 2"));

  // Peak: at least the fp32 parameters plus Adam's two moments, below everything ever allocated.
  Replay r(s, 0);
  uint64_t total = 0;
  for (const Event& e : s.events) total += e.action == Action::alloc ? e.size : 0;
  const uint64_t params = 4ull * 1'600'000;
  EXPECT_GE(r.peak_allocated().bytes, 3 * params);
  EXPECT_LT(r.peak_allocated().bytes, total);
  EXPECT_EQ(r.unmatched_frees(), 0u);
}

TEST(RunCommand, MlpWorkloadWithoutStacks) {
  auto dir = temp_dir();
  auto out = dir / "mlp.memrec", log = dir / "mlp.log";
  ASSERT_EQ(run_memrec(fmt::format("run mlp --layers 3 --device cpu --stacks off --optimizer sgd -o '{}'",
                                   out.string()), log), 0)
      << slurp(log);
  Snapshot s = read_file(out.string());
  ASSERT_GT(s.events.size(), 100u);
  for (const Event& e : s.events) ASSERT_EQ(e.stack, 0u);
  EXPECT_TRUE(test::has_scope(s, ScopeKind::module, "blocks.2.fc1"));
  EXPECT_EQ(s.metadata.at("recorder.stacks"), "off");
}

TEST(RunCommand, BadFlagsFailWithOneError) {
  auto dir = temp_dir();
  auto log = dir / "bad.log";
  for (const char* args : {"run transformer --layers 0 --device cpu", "run transformer --dtype fp8 --device cpu",
                           "run resnet --device cpu", "run transformer --device cpu --heads 3 --d-model 256",
                           "run transformer --device cpu --dtype fp16", "run transformer --stacks maybe"}) {
    EXPECT_NE(run_memrec(args, log), 0) << args;
    std::string text = slurp(log);
    EXPECT_FALSE(text.empty()) << args;
    EXPECT_EQ(text.find("step "), std::string::npos) << args << " ran anyway:\n" << text;
  }
  EXPECT_NE(run_memrec(fmt::format("run transformer --layers 1 --device cpu --steps 1 -o '{}'",
                                   (dir / "missing" / "x.memrec").string()), log), 0);
}

// The workloads here run on CPU, so the recorder must watch the CPU allocator even on a GPU machine.
RecorderOptions cpu_options() {
  RecorderOptions o;
  o.cuda = false;
  return o;
}

// In-process: the wrapper's own count equals the recorded allocs, user scopes parent the allocations.
TEST(Recorder, CountsEveryCpuAllocation) {
  RecorderOptions o = cpu_options();
  o.free_stacks = true;
  Recorder rec(o);
  rec.start();
  {
    MEMREC_SCOPE("my annotation");
    auto w = workloads::Workload::create(small_cpu());
    w->step(0);
  }
  rec.stop();
  const Snapshot& s = rec.snapshot();
  RecorderStats st = rec.stats();
  size_t allocs = 0, frees_with_stack = 0, frees = 0;
  for (const Event& e : s.events) {
    allocs += e.action == Action::alloc;
    if (e.action == Action::free_requested) ++frees, frees_with_stack += e.stack != 0;
  }
  EXPECT_GT(allocs, 100u);
  EXPECT_EQ(allocs, st.cpu_allocs);
  EXPECT_EQ(st.dropped, 0u);
  EXPECT_EQ(frees, frees_with_stack);
  test::check_frees_match(s, 0);
  test::check_frames(s);
  // The annotation encloses every allocation: each event's scope chain reaches it.
  ASSERT_TRUE(test::has_scope(s, ScopeKind::annotation, "my annotation"));
  for (const Event& e : s.events) {
    uint32_t id = e.scope;
    while (id != 0 && s.strings[s.scopes[id].name] != "my annotation") id = s.scopes[id].parent;
    ASSERT_NE(id, 0u) << "event outside the annotation";
  }
  // Scopes close in order: every closed child lies within its parent.
  for (const Scope& sc : s.scopes) {
    if (sc.parent == 0 || sc.end_ns < 0) continue;
    const Scope& p = s.scopes[sc.parent];
    EXPECT_GE(sc.start_ns, p.start_ns);
    if (p.end_ns >= 0) EXPECT_LE(sc.end_ns, p.end_ns);
  }
}

TEST(Recorder, SmallBufferCountsDrops) {
  RecorderOptions o = cpu_options();
  o.buffer_events = 1;  // one record between drains: nearly everything overflows
  Recorder rec(o);
  rec.start();
  workloads::Workload::create(small_cpu("mlp"))->step(0);
  rec.stop();
  RecorderStats st = rec.stats();
  EXPECT_GT(st.dropped, 0u);
  EXPECT_EQ(rec.snapshot().dropped_events, st.dropped);
  // No alloc vanishes silently: each one the wrapper served is either kept or counted as dropped.
  uint64_t kept = 0;
  for (const Event& e : rec.snapshot().events) kept += e.action == Action::alloc;
  EXPECT_EQ(kept + st.dropped_by_action[size_t(Action::alloc)], st.cpu_allocs);
  EXPECT_EQ(st.dropped, st.dropped_buffer_full);
}

TEST(Recorder, OneAtATimeAndRestartable) {
  Recorder a(cpu_options()), b(cpu_options());
  a.start();
  EXPECT_THROW(b.start(), Error);
  a.stop();
  b.start();
  workloads::Workload::create(small_cpu("mlp"))->step(0);
  b.stop();
  EXPECT_GT(b.snapshot().events.size(), 0u);
  EXPECT_EQ(b.stats().dropped, 0u);
}

// A Recorder started again records a new snapshot whose stacks name its own frames, as the first one's did, and
// whose frees are of blocks it saw allocated (a block of the first recording freed in the second is not its event).
TEST(Recorder, ASecondRecordingOfOneRecorderHasItsOwnFramesAndBlocks) {
  Recorder rec(cpu_options());
  auto w = workloads::Workload::create(small_cpu("transformer"));
  at::Tensor kept;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    rec.start();
    w->step(run);
    kept = run == 0 ? at::empty({1024}) : at::Tensor();
    rec.stop();
    const Snapshot& s = rec.snapshot();
    test::check_frames(s);
    test::check_frees_match(s, 0);
    EXPECT_EQ(rec.stats().cpu_unmatched_frees, 2u * run) << "the first recording's block, freed in the second";
    for (const Event& e : s.events) {
      if (e.stack == 0) continue;
      ASSERT_LT(e.stack, s.stacks.size());
      for (uint32_t f : s.stacks[e.stack]) ASSERT_LT(f, s.frames.size());
    }
  }
}

// One step of `model` recorded with stack capture `c`, whole stacks: captures that walk from frames of their own
// cut a stack at max_frames at different depths.
Snapshot recorded_step(StackCapture c, const char* model) {
  RecorderOptions o = cpu_options();
  o.capture = c;
  o.max_frames = 128;
  Recorder rec(o);
  rec.start();
  workloads::Workload::create(small_cpu(model))->step(0);
  rec.stop();
  return rec.snapshot();
}

TEST(Recorder, CaptureMethodsGiveTheSameWorkloadFrames) {
  for (StackCapture c :
       {StackCapture::unwind_backtrace, StackCapture::boost, StackCapture::torch_unwind, StackCapture::libunwind}) {
    if (!stack_capture_available(c)) continue;
    SCOPED_TRACE(std::string(to_string(c)));
    test::check_frames(recorded_step(c, "transformer"));
  }
}

// Each alloc's symbolized stack from one mlp step recorded with `c`, sorted (intra-op threads may reorder allocs).
std::vector<std::string> alloc_stacks(StackCapture c) {
  Snapshot s = recorded_step(c, "mlp");
  std::vector<std::string> stacks;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc) continue;
    std::string text;
    for (uint32_t id : s.stacks[e.stack]) {
      const Frame& f = s.frames[id];
      text += fmt::format("{} {}:{}\n", s.strings[f.function], s.strings[f.file], f.line);
    }
    stacks.push_back(text);
  }
  std::sort(stacks.begin(), stacks.end());
  return stacks;
}

TEST(Recorder, AutomaticCaptureIsLibunwindWhereItLoads) {
  if (!stack_capture_available(StackCapture::libunwind)) GTEST_SKIP() << "built without libunwind";
  Recorder rec(cpu_options());
  rec.start();
  rec.stop();
  EXPECT_EQ(rec.snapshot().metadata.at("recorder.stacks"), "libunwind");
}

TEST(Recorder, LibunwindRecordsTheReferenceStacks) {
  if (!stack_capture_available(StackCapture::libunwind)) GTEST_SKIP() << "built without libunwind";
  std::vector<std::string> reference, fast;
  for (StackCapture c : {StackCapture::unwind_backtrace, StackCapture::libunwind})  // one call site: the same lines
    (c == StackCapture::libunwind ? fast : reference) = alloc_stacks(c);
  ASSERT_GT(reference.size(), 10u);
  ASSERT_EQ(fast.size(), reference.size());
  auto [a, b] = std::mismatch(fast.begin(), fast.end(), reference.begin());
  EXPECT_TRUE(a == fast.end()) << "libunwind recorded\n" << *a << "where _Unwind_Backtrace recorded\n" << *b;
}

}  // namespace
}  // namespace memrec
