// `memrec record -- PROGRAM` and the memrec Python module on real Python programs (Debian's torch 1.13 on CPU in
// CI; the same tests run against a CUDA torch, where the example trains on the GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/load.h"
#include "memrec/sites.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::TempDir;

const std::string kMemrec = MEMREC_BINARY;
const std::string kPython = MEMREC_TEST_PYTHON;
const std::string kTrain = test::source("examples/train.py");

std::string record(const std::string& options, const std::string& program) {
  return kMemrec + " record " + options + " -- " + program;
}

// The 1-based line of train.py that contains `text`.
uint32_t line_of(const std::string& text) {
  std::ifstream in(kTrain);
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); ++n)
    if (line.find(text) != std::string::npos) return n;
  ADD_FAILURE() << "no line with " << text;
  return 0;
}

std::set<std::string> scope_names(const Snapshot& s, ScopeKind kind) {
  std::set<std::string> out;
  for (uint32_t id = 1; id < s.scopes.size(); ++id)
    if (s.scopes[id].kind == kind) out.insert(s.strings[s.scopes[id].name]);
  return out;
}

std::string frames_text(const Snapshot& s, uint32_t stack) {
  std::string out = allocation_site(s, stack) + ":";
  for (uint32_t f : s.stacks[stack]) {
    const Frame& frame = s.frames[f];
    out += "\n    " + s.strings[frame.function] + " " + s.strings[frame.file] + ":" + std::to_string(frame.line) + " [" +
           s.strings[frame.library] + "]";
  }
  return out;
}

bool has_frame(const Snapshot& s, uint32_t stack, const std::string& function, const std::string& file_end,
               uint32_t line) {
  for (uint32_t f : s.stacks[stack]) {
    const Frame& fr = s.frames[f];
    if (s.strings[fr.function] == function && s.strings[fr.file].ends_with(file_end) && fr.line == line) return true;
  }
  return false;
}

TEST(Record, TrainingScriptGetsModulePhaseAndStepScopesAndPythonFrames) {
  TempDir dir;
  auto r = run_command(record("-o " + dir / "t.memrec", kPython + " " + kTrain + " --steps 3 --layers 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + dir / "t.memrec"), std::string::npos) << r.output;
  Snapshot s = load_snapshot(dir / "t.memrec");

  // Steps are the program's optimizer steps; the last one runs until the program exits.
  EXPECT_EQ(scope_names(s, ScopeKind::step), (std::set<std::string>{"step 0", "step 1", "step 2", "step 3"}));
  EXPECT_EQ(scope_names(s, ScopeKind::phase), (std::set<std::string>{"forward", "backward", "optimizer"}));
  std::set<std::string> modules = scope_names(s, ScopeKind::module);
  for (const char* m : {"GPT", "h.0", "h.1", "h.0.attn", "h.1.attn.qkv", "h.1.mlp.0", "lm_head"})
    EXPECT_TRUE(modules.count(m)) << m;

  // Allocations carry their module in forward and in backward (the module whose backward runs).
  std::set<std::string> forward_modules, backward_modules;
  bool optimizer_allocs = false, optimizer_site = false, memrec_frames = false;
  std::set<std::string> optimizer_sites;
  std::string optimizer_stacks;  // for the failure message
  std::string step_site = "train (train.py:" + std::to_string(line_of("optimizer.step()")) + ")";
  uint32_t scores_line = line_of("scores = (q @ k"), qkv_line = line_of("q, k, v = self.qkv(x)");
  bool scores_frame = false, qkv_frame = false, joined = false;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc) continue;
    std::string phase = enclosing_scope(s, e.scope, ScopeKind::phase);
    std::string module = enclosing_scope(s, e.scope, ScopeKind::module);
    if (phase == "forward") forward_modules.insert(module);
    if (phase == "backward") backward_modules.insert(module);
    optimizer_allocs |= phase == "optimizer" && enclosing_scope(s, e.scope, ScopeKind::step).starts_with("step ");
    if (!e.stack) continue;
    // Sites lead with the user's own frame: Adam's state is allocated at train.py's optimizer.step() line, and
    // memrec's own hooks (which wrap step on torch 1.13) stay out of the stacks.
    if (phase == "optimizer") {
      optimizer_site |= allocation_site(s, e.stack).starts_with(step_site);  // then " via aten::..."
      if (optimizer_sites.size() < 4 && optimizer_sites.insert(allocation_site(s, e.stack)).second)
        optimizer_stacks += frames_text(s, e.stack) + "\n";
    }
    for (uint32_t f : s.stacks[e.stack]) memrec_frames |= s.strings[s.frames[f].file].find("/memrec/_") != std::string::npos;
    scores_frame |= has_frame(s, e.stack, "Attention.forward", "examples/train.py", scores_line);
    qkv_frame |= has_frame(s, e.stack, "Linear.forward", "linear.py", 0) ||
                 has_frame(s, e.stack, "Attention.forward", "examples/train.py", qkv_line);
    // C++ frames (innermost) then Python frames in place of the interpreter's own, as PyTorch's stacks="all".
    auto frames = s.stacks[e.stack];
    bool python = false, interpreter = false;
    for (uint32_t f : frames) {
      python |= s.frames[f].pc == 0 && s.strings[s.frames[f].file].ends_with(".py");
      interpreter |= s.strings[s.frames[f].function].find("PyEval_EvalFrame") != std::string::npos;
    }
    joined |= s.frames[frames.front()].pc != 0 && python && !interpreter;
  }
  EXPECT_TRUE(forward_modules.count("h.0.attn") && forward_modules.count("h.1.mlp.1"));
  // The innermost module whose backward runs: a Linear of the MLP, not the Sequential around it.
  EXPECT_TRUE(backward_modules.count("h.0.attn") && backward_modules.count("h.1.mlp.2")) << backward_modules.size();
  EXPECT_FALSE(backward_modules.count("h.1.mlp"));
  EXPECT_TRUE(optimizer_allocs);
  EXPECT_TRUE(optimizer_site) << step_site << "; sites and stacks in the optimizer:\n" << optimizer_stacks;
  EXPECT_FALSE(memrec_frames);
  EXPECT_TRUE(scores_frame) << "no allocation at train.py:" << scores_line;
  EXPECT_TRUE(qkv_frame);
  EXPECT_TRUE(joined);
}

TEST(Record, ExitStatusPassesThroughAndTheFileIsComplete) {
  TempDir dir;
  auto r = run_command(record("-o " + dir / "x.memrec",
                              kPython + " -c " + quote("import sys, torch; a = torch.ones(1000); sys.exit(3)")));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  Snapshot s = load_snapshot(dir / "x.memrec");
  bool found = false;
  for (const Event& e : s.events) found |= e.action == Action::alloc && e.size == 4000;
  EXPECT_TRUE(found);
}

// transformers and datasets ask importlib.util.find_spec("torch") before importing it: recording still starts.
TEST(Record, AFindSpecBeforeTheImportStillRecords) {
  TempDir dir;
  auto r = run_command(record("-o " + dir / "f.memrec",
                              kPython + " -c " + quote("import importlib.util; importlib.util.find_spec(\"torch\"); "
                                                       "import torch; a = torch.ones(1000)")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "f.memrec");
  bool found = false;
  for (const Event& e : s.events) found |= e.action == Action::alloc && e.size == 4000;
  EXPECT_TRUE(found) << r.output;
}

// nohup's SIGHUP (a disposition inherited as ignored) stays ignored for the program; memrec's own lines go to
// stderr, so the program's stdout is its own.
TEST(Record, IgnoredSignalsStayIgnoredAndStdoutIsTheProgramsOwn) {
  TempDir dir;
  std::string program = "sh -c " + quote("kill -HUP $$; echo survived");
  auto r = run_command("(trap '' HUP; " + record("-o " + dir / "s.memrec", program) + " 2>/dev/null)");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "survived\n");
}

// A forward that raises (an OOM caught to retry with a smaller batch) leaves nothing of its inputs alive.
TEST(Record, AForwardThatRaisesKeepsNoActivationAlive) {
  TempDir dir;
  std::ofstream(dir / "raise.py") << "import gc, weakref, torch, torch.nn as nn\n"
                                     "class Boom(nn.Module):\n"
                                     "    def forward(self, x):\n"
                                     "        Boom.seen = weakref.ref(x)\n"
                                     "        raise RuntimeError('out of memory')\n"
                                     "model = nn.Sequential(nn.Linear(4, 4), Boom())\n"
                                     "try:\n"
                                     "    model(torch.ones(2, 4))\n"
                                     "except RuntimeError:\n"
                                     "    pass\n"
                                     "gc.collect()\n"
                                     "print('alive' if Boom.seen() is not None else 'freed')\n";
  auto r = run_command(record("-o " + dir / "r.memrec", kPython + " " + dir / "raise.py"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("freed"), std::string::npos) << r.output;
}

// The programs that died under memrec with "IndexError: pop from empty list" (a module's backward scope closed
// once per gradient hook: a tensor passed twice, a second backward through the same graph) run as without it,
// and their recordings carry no note of a repair.
TEST(Record, ReentrantAndRepeatedBackwardRunAsWithoutMemrec) {
  TempDir dir;
  std::ofstream(dir / "again.py") << R"(import torch, torch.nn as nn
torch.manual_seed(0)
enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2)
opt = torch.optim.AdamW(enc.parameters())
loss = enc(torch.randn(2, 4, 16)).pow(2).mean()
loss.backward(retain_graph=True)
loss.backward()
opt.step()
x = torch.randn(3, 16, requires_grad=True)
y = enc(torch.sin(x).unsqueeze(0)).sum()
(g,) = torch.autograd.grad(y, x, create_graph=True)
g.pow(2).sum().backward()
print(float(loss).hex(), float(x.grad.sum()).hex())
)";
  auto plain = run_command("(" + kPython + " " + dir / "again.py 2>/dev/null)");  // stdout alone, as below
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto r = run_command("(" + record("-o " + dir / "a.memrec", kPython + " " + dir / "again.py") + " 2>/dev/null)");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, plain.output);
  Snapshot s = load_snapshot(dir / "a.memrec");
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  EXPECT_TRUE(scope_names(s, ScopeKind::module).count("layers.1.self_attn"));
}

// A module's backward scope holds its own backward ops: the gradient reaching a module's input ends that module's
// scope before the module that made the input begins its own (both hook the same tensor).
TEST(Record, BackwardOpsAreInTheirModulesScope) {
  TempDir dir;
  std::ofstream(dir / "mlp.py") << R"(import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
model(torch.sin(torch.ones(4, 8, requires_grad=True))).sum().backward()
)";
  auto r = run_command(record("-o " + dir / "m.memrec", kPython + " " + dir / "mlp.py"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "m.memrec");
  std::map<std::string, std::set<std::string>> modules_of_op;  // backward ops -> their module scopes
  for (const Event& e : s.events)
    if (e.action == Action::alloc && enclosing_scope(s, e.scope, ScopeKind::phase) == "backward")
      modules_of_op[enclosing_scope(s, e.scope, ScopeKind::op)].insert(enclosing_scope(s, e.scope, ScopeKind::module));
  EXPECT_EQ(modules_of_op["aten::threshold_backward"], std::set<std::string>{"1"});
  EXPECT_EQ(modules_of_op["aten::mm"], (std::set<std::string>{"0", "2"}));  // not the enclosing Sequential
}

// A model given token ids (no input needs a gradient) that returns its loss in a dict, as Hugging Face models do:
// the loss's backward ops are in the model's scope, the embedding's in the embedding's, the head's in the head's.
TEST(Record, ModulesGivenTokenIdsKeepTheirBackwardScope) {
  TempDir dir;
  std::ofstream(dir / "lm.py") << R"(import torch, torch.nn as nn
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(64, 16), nn.Linear(16, 64)
    def forward(self, ids):
        logits = self.head(self.emb(ids))
        return {"loss": nn.functional.cross_entropy(logits.view(-1, 64), ids.view(-1)), "logits": logits}
model = LM()
ids = torch.randint(0, 64, (4, 32))
for _ in range(2):
    model(ids)["loss"].backward()
)";
  auto r = run_command(record("-o " + dir / "lm.memrec", kPython + " " + dir / "lm.py"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "lm.memrec");
  std::map<std::string, std::set<std::string>> modules_of_site;  // backward allocations' sites -> module scopes
  for (const Event& e : s.events)
    if (e.action == Action::alloc && enclosing_scope(s, e.scope, ScopeKind::phase) == "backward")
      modules_of_site[allocation_site(s, e.stack)].insert(enclosing_scope(s, e.scope, ScopeKind::module));
  auto modules_where = [&](const std::string& text) {
    std::set<std::string> out;
    for (const auto& [site, modules] : modules_of_site)
      if (site.find(text) != std::string::npos) out.insert(modules.begin(), modules.end());
    return out;
  };
  EXPECT_EQ(modules_where("NllLossBackward0"), std::set<std::string>{"LM"});
  EXPECT_EQ(modules_where("LogSoftmaxBackward0"), std::set<std::string>{"LM"});
  EXPECT_EQ(modules_where("AddmmBackward0"), std::set<std::string>{"head"});
  EXPECT_EQ(modules_where("EmbeddingBackward0"), std::set<std::string>{"emb"});
  EXPECT_EQ(modules_where(""), (std::set<std::string>{"", "LM", "head", "emb"}));  // "": backward's seed, ones_like
}

// An internal error in memrec's hooks (here forced: naming a module fails) never reaches the program: it runs to
// its end and prints nothing more, and the file says what was repaired.
TEST(Record, HookErrorsAreRepairedAndNoted) {
  TempDir dir;
  std::ofstream(dir / "broken.py") << R"(import torch, torch.nn as nn
from memrec import _hooks
_hooks._name_of = lambda module, root: 1 / 0
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = model(torch.sin(torch.ones(2, 4, requires_grad=True))).sum()
    loss.backward()
    opt.step()
print("trained", loss.item().hex())  # float(loss) warns on torch 2.x: the program's stderr must be empty
)";
  auto r = run_command(record("-o " + dir / "b.memrec", "sh -c " + quote("exec \"$0\" \"$1\" 2>\"$2\"")) + " " +
                       kPython + " " + dir / "broken.py " + dir / "program.err");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trained"), std::string::npos) << r.output;
  std::ifstream err(dir / "program.err");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(err), {}), "");
  Snapshot s = load_snapshot(dir / "b.memrec");
  // The scope hooks' note, and the owner scans' (they name modules too: once per root, and after each repair every
  // module called is an outermost one).
  ASSERT_EQ(s.warnings.size(), 2u);
  EXPECT_NE(s.warnings[0].find("met 8 internal error(s)"), std::string::npos) << s.warnings[0];
  EXPECT_NE(s.warnings[0].find("ZeroDivisionError"), std::string::npos) << s.warnings[0];
  EXPECT_NE(s.warnings[1].find("owner scans met 4 internal error(s)"), std::string::npos) << s.warnings[1];
  EXPECT_EQ(scope_names(s, ScopeKind::step), (std::set<std::string>{"step 0", "step 1", "step 2"}));
}

// torch.compile(module) warns when global module hooks exist (PyTorch 2.x asks _has_any_global_hook()): memrec's
// answer leaves its own hooks out and keeps the program's. Checked on a stand-in of torch.nn.modules.module, as
// torch 1.13 has no torch.compile (the zoo's compile program checks the real one on PyTorch 2).
TEST(Record, CompileWarningSeesOnlyTheProgramsGlobalHooks) {
  TempDir dir;
  std::ofstream(dir / "warn.py") << R"(import types, torch
from memrec import _hooks
m = types.ModuleType("stand_in")
m._global_forward_pre_hooks, m._global_forward_hooks, m._global_backward_hooks = {1: 0}, {2: 0}, {}
m._global_parameter_registration_hooks = {5: 0}  # not a call hook: torch's answer leaves it out too
m._has_any_global_hook = lambda: m._global_forward_pre_hooks or m._global_forward_hooks or m._global_backward_hooks
_hooks._hide_from_compile_warning(m, {1, 2})
alone = m._has_any_global_hook()
m._global_backward_hooks[3] = 0
print(alone, m._has_any_global_hook())
)";
  auto r = run_command("PYTHONPATH=" + std::string(MEMREC_PYTHON_PACKAGE_DIR) + " " + kPython + " " + dir / "warn.py");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "False True\n");
}

TEST(Record, ProcessesWithoutTorchRecordNothing) {
  TempDir dir;
  auto r = run_command(record("-o " + dir / "n.memrec", kPython + " -c " + quote("print(1)")));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nothing recorded"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "n.memrec"));
}

// Two ranks started from a shell script the way torchrun starts them (Debian's torchrun 1.13 fails on Python
// 3.11): one file per rank, named by RANK; the shell itself records nothing.
TEST(Record, TwoRanksGiveTwoFiles) {
  TempDir dir;
  std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(20000 + getpid() % 20000);
  std::string rank = kPython + " " + kTrain + " --steps 2 --layers 1 --device cpu";
  std::string script = "RANK=0 LOCAL_RANK=0 " + env + " " + rank + " & a=$!; RANK=1 LOCAL_RANK=1 " + env + " " +
                       rank + " & b=$!; wait $a && wait $b";
  auto r = run_command(record("-o " + dir / "r.memrec --pickle " + dir / "r.pickle", "/bin/bash -c " + quote(script)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(std::filesystem::file_size(dir / "r.rank0.pickle"), 0u) << "one pickle per file, named like it";
  EXPECT_GT(std::filesystem::file_size(dir / "r.rank1.pickle"), 0u);
  for (const char* name : {"r.rank0.memrec", "r.rank1.memrec"}) {
    ASSERT_TRUE(std::filesystem::exists(dir / name)) << r.output;
    EXPECT_NE(r.output.find(dir / name), std::string::npos) << r.output;
    Snapshot s = load_snapshot(dir / name);
    EXPECT_EQ(scope_names(s, ScopeKind::step), (std::set<std::string>{"step 0", "step 1", "step 2"}));
    std::set<std::string> modules = scope_names(s, ScopeKind::module);
    EXPECT_TRUE(modules.count("h.0") && !modules.count("module.h.0")) << "the model's own path, not DDP's";
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "r.memrec"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path))
    EXPECT_EQ(entry.path().filename().string().find(".pid"), std::string::npos) << "bash recorded: " << entry.path();
}

// A libtorch C++ program that knows nothing of memrec: the preload library loads the recorder into it.
TEST(Record, LibtorchProgramIsRecorded) {
  TempDir dir;
  auto r = run_command(record("-o " + dir / "c.memrec", std::string(MEMREC_C10_ALLOCATIONS) + " 25 1234"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "c.memrec");
  int allocs = 0, frees = 0;
  bool main_frame = false;
  for (const Event& e : s.events) {
    if (e.size != 1234) continue;
    allocs += e.action == Action::alloc;
    frees += e.action == Action::free_completed;
    for (uint32_t f : e.stack ? s.stacks[e.stack] : std::span<const uint32_t>{})
      main_frame |= s.strings[s.frames[f].function] == "main" && s.strings[s.frames[f].file].ends_with("c10_allocations.cpp");
  }
  EXPECT_EQ(allocs, 25);
  EXPECT_EQ(frees, 25);
  EXPECT_TRUE(main_frame) << "C++ frames of the program";
}

// A child the program forks exits through its static destructors: it neither joins the parent's drain thread nor
// writes the parent's file, and its allocation is not in the recording.
TEST(Record, LibtorchProgramThatForks) {
  TempDir dir;
  auto r = run_command("timeout 60 " + record("-o " + dir / "f.memrec", std::string(MEMREC_C10_ALLOCATIONS) + " 5 1234 fork"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "f.memrec");
  int parent = 0, child = 0;
  for (const Event& e : s.events) {
    parent += e.action == Action::alloc && e.size == 1234;
    child += e.size == 3 * 1234;
  }
  EXPECT_EQ(parent, 5);
  EXPECT_EQ(child, 0);
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
}

TEST(Record, RecordWindowCountsTheProgramsOptimizerSteps) {
  TempDir dir;
  auto r = run_command(record("-o " + dir / "w.memrec --record wait=1,warmup=1,active=1",
                              kPython + " " + kTrain + " --steps 4 --layers 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "w.memrec");
  EXPECT_EQ(scope_names(s, ScopeKind::step), (std::set<std::string>{"step 2"}));
  EXPECT_EQ(scope_names(s, ScopeKind::phase), (std::set<std::string>{"forward", "backward", "optimizer"}));

  auto bad = run_command(record("--record wait=1", kPython + " -c pass"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--record 'wait=1'"), std::string::npos) << bad.output;
}

// kernels: True, False or "all" (every step); anything else is refused before recording starts. On a CUDA machine
// the file says which steps were traced.
TEST(Record, KernelsAndDeviceMemoryOptionsReachTheProgram) {
  TempDir dir;
  std::ofstream(dir / "k.py") << R"(
import sys, torch, memrec
for k in (True, False, "all"):
    memrec.start(sys.argv[1] + str(k) + ".memrec", kernels=k)
    torch.ones(3)
    memrec.stop()
try:
    memrec.start(sys.argv[1] + "x.memrec", kernels="sometimes")
except ValueError as e:
    print("refused:", e)
print("running:", memrec.running())
)";
  auto r = run_command("PYTHONPATH=" + std::string(MEMREC_PYTHON_PACKAGE_DIR) + " " + kPython + " " + dir / "k.py" +
                       " " + dir / "k");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("refused: kernels must be True, False or \"all\", not 'sometimes'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("running: False"), std::string::npos) << r.output;
  for (std::string k : {"True", "False", "all"}) EXPECT_TRUE(load_snapshot(dir / ("k" + k + ".memrec")).complete);

  auto all = run_command(record("-o " + dir / "all.memrec --kernels all",
                                kPython + " " + kTrain + " --steps 2 --layers 1"));
  ASSERT_EQ(all.exit_code, 0) << all.output;
  Snapshot s = load_snapshot(dir / "all.memrec");
  if (s.metadata.at("device.0.type") == "cuda") {
    EXPECT_EQ(s.metadata.at("recorder.kernel_steps"), "all");
    EXPECT_GT(s.kernels.size(), 0u);
  }
  auto bad = run_command(record("--kernels sometimes", kPython + " -c pass"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--kernels"), std::string::npos) << bad.output;

  auto quiet = run_command(record("-o " + dir / "quiet.memrec --kernels off --device-memory off",
                                  kPython + " " + kTrain + " --steps 2 --layers 1"));
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  s = load_snapshot(dir / "quiet.memrec");
  EXPECT_GT(s.events.size(), 0u);
  EXPECT_EQ(s.metadata.count("recorder.device_memory"), 0u);  // no CUPTI started, on any device
  EXPECT_EQ(s.kernels.size(), 0u);
  bad = run_command(record("--device-memory sometimes", kPython + " -c pass"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--device-memory"), std::string::npos) << bad.output;
}

// SIGINT sent to memrec reaches the program (KeyboardInterrupt), whose file is then complete; SIGTERM kills it,
// and its file stays readable up to the recorder's last flush.
TEST(Record, SignalsReachTheProgramAndFilesStayReadable) {
  TempDir dir;
  std::string loop = "import time, torch\nprint('ready', flush=True)\nwhile True:\n    x = torch.ones(256)\n"
                     "    time.sleep(0.001)\n";
  for (int sig : {SIGINT, SIGTERM}) {
    std::string file = dir / ("s" + std::to_string(sig) + ".memrec");
    test::Child child({kMemrec, "record", "-o", file, "--", kPython, "-c", loop}, dir / "log");
    for (int i = 0; i < 300; ++i) {
      std::ifstream log(dir / "log");
      std::string text((std::istreambuf_iterator<char>(log)), {});
      if (text.find("ready") != std::string::npos) break;
      usleep(50'000);
    }
    test::wait_for_events_on_disk(dir.path, "s" + std::to_string(sig), 11);
    child.signal(sig);
    EXPECT_EQ(child.wait(std::chrono::seconds(60)), 128 + sig) << sig;
    Snapshot s = load_snapshot(file);
    EXPECT_GT(s.events.size(), 10u) << sig;
  }
}

// The module API in a program of its own: record(), scope() as context manager and decorator, mark(); a forked
// child (as a DataLoader worker) records nothing and leaves the parent's file intact.
TEST(Record, PythonModuleApi) {
  TempDir dir;
  std::string script = R"(
import os, sys, torch, memrec
@memrec.scope("load")
def load():
    return torch.zeros(300)
with memrec.record(sys.argv[1], stacks="python"):
    with memrec.scope("prepare"):
        a = torch.ones(100)
    b = load()
    memrec.mark("checkpoint")
    pid = os.fork()
    if pid == 0:
        c = torch.ones(12345)
        os._exit(0)
    os.waitpid(pid, 0)
    d = torch.ones(200)
    with torch.autograd.profiler.record_function("Torch-Compiled Region: 0/0"):  # as torch.compile's frames run
        e = torch.ones(77)
print("running after stop:", memrec.running())
)";
  std::ofstream(dir / "api.py") << script;
  auto r = run_command("PYTHONPATH=" + std::string(MEMREC_PYTHON_PACKAGE_DIR) + " " + kPython + " " + dir / "api.py" +
                       " " + dir / "api.memrec");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("running after stop: False"), std::string::npos) << r.output;
  Snapshot s = load_snapshot(dir / "api.memrec");
  EXPECT_EQ(scope_names(s, ScopeKind::annotation), (std::set<std::string>{"prepare", "load", "checkpoint"}));
  std::map<uint64_t, std::string> scope_of_size;
  for (const Event& e : s.events)
    if (e.action == Action::alloc) scope_of_size[e.size] = enclosing_scope(s, e.scope, ScopeKind::annotation);
  EXPECT_EQ(scope_of_size.at(400), "prepare");
  EXPECT_EQ(scope_of_size.at(1200), "load");
  EXPECT_EQ(scope_of_size.at(800), "");
  EXPECT_FALSE(scope_of_size.count(12345 * 4)) << "the forked child's allocation";
  bool in_region = false;  // record_function blocks (user scopes) enclose the ops inside them
  for (const Event& e : s.events)
    for (uint32_t sc = e.scope; e.action == Action::alloc && e.size == 77 * 4 && sc != 0; sc = s.scopes[sc].parent)
      in_region |= s.strings[s.scopes[sc].name] == "Torch-Compiled Region: 0/0";
  EXPECT_TRUE(in_region);
  // stacks="python": Python frames only, the innermost the decorated function's line.
  for (const Event& e : s.events)
    if (e.action == Action::alloc && e.size == 1200)
      EXPECT_TRUE(has_frame(s, e.stack, "load", "api.py", 5)) << allocation_site(s, e.stack);
}

}  // namespace
}  // namespace memrec
