// Module scopes in backward on real PyTorch programs: each backward node's allocations are in the module scopes of
// the call whose forward made the node, through retain_graph, double backward, checkpointing, recursion and threads.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/load.h"

namespace memrec {
namespace {

using test::run_command;
using test::TempDir;

const std::string kMemrec = MEMREC_BINARY;
const std::string kPython = MEMREC_TEST_PYTHON;

Snapshot record_program(const TempDir& dir, const std::string& source) {
  std::ofstream(dir / "p.py") << source;
  auto r = run_command(kMemrec + " record -o " + dir / "p.memrec -- " + kPython + " " + dir / "p.py");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return load_snapshot(dir / "p.memrec");
}

// An allocation in backward: the autograd node that made it (the innermost op scope that is not an aten op), its
// module scopes up to the backward phase ("tree.cell < tree < Twice"), and the backward phase's scope.
struct BackwardAlloc {
  std::string node, modules;
  uint32_t backward = 0;
  uint64_t size = 0;
};

std::vector<BackwardAlloc> backward_allocs(const Snapshot& s) {
  std::vector<BackwardAlloc> out;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc || enclosing_scope(s, e.scope, ScopeKind::phase) != "backward") continue;
    BackwardAlloc a{.size = e.size};
    for (uint32_t id = e.scope; id != 0 && !a.backward; id = s.scopes[id].parent) {
      const Scope& sc = s.scopes[id];
      const std::string& name = s.strings[sc.name];
      if (sc.kind == ScopeKind::op && a.node.empty() && !name.starts_with("aten::")) a.node = name;
      if (sc.kind == ScopeKind::module) a.modules += (a.modules.empty() ? "" : " < ") + name;
      if (sc.kind == ScopeKind::phase) a.backward = id;
    }
    out.push_back(a);
  }
  return out;
}

// The module scopes of each node's allocations in backward.
std::map<std::string, std::set<std::string>> modules_of_nodes(const Snapshot& s) {
  std::map<std::string, std::set<std::string>> out;
  for (const BackwardAlloc& a : backward_allocs(s)) out[a.node].insert(a.modules);
  return out;
}

// A second backward through the same graph runs in the same scopes; the loss computed after the model, and the
// nodes double backward made (in backward, by no module's forward), have none.
TEST(BackwardScopes, RetainGraphAndDoubleBackward) {
  TempDir dir;
  Snapshot s = record_program(dir, R"(import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
x = torch.randn(4, 8, requires_grad=True)
loss = model(x).pow(2).mean()
loss.backward(retain_graph=True)
loss.backward()
(g,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
g.pow(2).sum().backward()
)");
  auto nodes = modules_of_nodes(s);
  EXPECT_EQ(nodes["AddmmBackward0"], (std::set<std::string>{"0 < Sequential", "2 < Sequential"}));
  EXPECT_EQ(nodes["TanhBackward0"], std::set<std::string>{"1 < Sequential"});
  EXPECT_EQ(nodes["PowBackward0"], std::set<std::string>{""});
  EXPECT_EQ(nodes["TanhBackwardBackward0"], std::set<std::string>{""});
  std::set<uint32_t> passes;  // backward passes with allocations in the last Linear's scope
  for (const BackwardAlloc& a : backward_allocs(s))
    if (a.modules == "2 < Sequential") passes.insert(a.backward);
  EXPECT_EQ(passes.size(), 3u);  // both of retain_graph, and autograd.grad's
}

// Checkpointed blocks: reentrant, the recomputed forward's nodes run in a backward of their own, in the scopes of
// the recomputed calls (outermost in the recompute); not reentrant, the nodes of the first forward run.
TEST(BackwardScopes, CheckpointedBlocks) {
  TempDir dir;
  Snapshot s = record_program(dir, R"(import torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint
class Blocks(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(2))
    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=self.reentrant)
        return x
for reentrant in (True, False):
    Blocks(reentrant)(torch.randn(4, 16, requires_grad=True)).pow(2).mean().backward()
)");
  auto nodes = modules_of_nodes(s);
  EXPECT_EQ(nodes["AddmmBackward0"], (std::set<std::string>{"blocks.0.0 < blocks.0", "blocks.1.0 < blocks.1",
                                                              "blocks.0.0 < blocks.0 < Blocks",
                                                              "blocks.1.0 < blocks.1 < Blocks"}));
  EXPECT_EQ(nodes["GeluBackward0"], (std::set<std::string>{"blocks.0.1 < blocks.0", "blocks.1.1 < blocks.1",
                                                             "blocks.0.1 < blocks.0 < Blocks",
                                                             "blocks.1.1 < blocks.1 < Blocks"}));
}

// A module whose output is a dataclass (as Hugging Face's ModelOutput subclasses are): the nodes its forward made
// are in its scope, whatever holds their tensors.
TEST(BackwardScopes, ModulesReturningDataclasses) {
  TempDir dir;
  Snapshot s = record_program(dir, R"(import dataclasses, torch, torch.nn as nn
@dataclasses.dataclass
class Output:
    hidden: torch.Tensor
    aux: torch.Tensor
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 1)
    def forward(self, x, gate):
        return Output(self.lin(x * gate), gate.mean())
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate, self.head = nn.Linear(8, 8), Head()
    def forward(self, x):
        return self.head(x, torch.sigmoid(self.gate(x)))
out = Model()(torch.randn(4, 8))
(out.hidden.pow(2).mean() + out.aux).backward()
)");
  auto nodes = modules_of_nodes(s);
  EXPECT_EQ(nodes["MulBackward0"], std::set<std::string>{"head < Model"});
  EXPECT_EQ(nodes["MeanBackward0"], (std::set<std::string>{"", "head < Model"}));  // the loss's, and aux's
  EXPECT_EQ(nodes["SigmoidBackward0"], std::set<std::string>{"Model"});
  EXPECT_EQ(nodes["AddmmBackward0"], (std::set<std::string>{"gate < Model", "head.lin < head < Model"}));
}

// A module that calls itself and one called twice: each call's nodes in that call's scopes.
TEST(BackwardScopes, RecursiveAndRepeatedCalls) {
  TempDir dir;
  Snapshot s = record_program(dir, R"(import torch, torch.nn as nn
class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(8, 8)
    def forward(self, x, depth=2):
        x = torch.tanh(self.cell(x))
        return x if depth == 0 else self(x, depth - 1) + x
class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.tree, self.shared, self.head = Tree(), nn.Linear(8, 8), nn.Linear(8, 1)
    def forward(self, x):
        return self.head(self.shared(torch.relu(self.shared(self.tree(x)))))
Twice()(torch.randn(5, 8)).pow(2).mean().backward()
)");
  auto nodes = modules_of_nodes(s);
  EXPECT_EQ(nodes["AddmmBackward0"],
            (std::set<std::string>{"tree.cell < tree < Twice", "tree.cell < tree < tree < Twice",
                                   "tree.cell < tree < tree < tree < Twice", "shared < Twice", "head < Twice"}));
  EXPECT_EQ(nodes["TanhBackward0"], (std::set<std::string>{"tree < Twice", "tree < tree < Twice",
                                                             "tree < tree < tree < Twice"}));
}

// Two threads train their own models at once (on the CPU each runs its backward itself): each model's backward
// allocations are in its own modules' scopes. The models differ in width, so their weight gradients in size.
TEST(BackwardScopes, TwoThreadsTheirOwnModels) {
  TempDir dir;
  Snapshot s = record_program(dir, R"(import threading, torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self, tag, width):
        super().__init__()
        self.tag = tag
        setattr(self, tag + "1", nn.Linear(8, width))
        setattr(self, tag + "2", nn.Linear(width, 1))
    def forward(self, x):
        return getattr(self, self.tag + "2")(torch.tanh(getattr(self, self.tag + "1")(x)))
class A(Net): pass
class B(Net): pass
def train(model):
    x = torch.randn(16, 8)
    for _ in range(20):
        model(x).pow(2).mean().backward()
threads = [threading.Thread(target=train, args=(m,)) for m in (A("a", 32), B("b", 48))]
for t in threads:
    t.start()
for t in threads:
    t.join()
)");
  std::map<std::string, std::set<uint64_t>> sizes;  // the weight gradients' sizes by module scopes
  for (const BackwardAlloc& a : backward_allocs(s))
    if (a.node == "TBackward0" || a.node == "AddmmBackward0") sizes[a.modules].insert(a.size);
  auto weight = [](int in, int out) { return uint64_t(in) * out * 4; };
  EXPECT_TRUE(sizes["a1 < A"].count(weight(8, 32)));
  EXPECT_TRUE(sizes["b1 < B"].count(weight(8, 48)));
  EXPECT_FALSE(sizes["a1 < A"].count(weight(8, 48)) || sizes["a2 < A"].count(weight(8, 48)));
  EXPECT_FALSE(sizes["b1 < B"].count(weight(8, 32)) || sizes["b2 < B"].count(weight(8, 32)));
  EXPECT_EQ(sizes.size(), 4u) << "module scopes other than a1, a2, b1, b2";
}

// A forward run again inside backward that raises out of its modules, as torch 2.x checkpoint's early stop does:
// its "recompute" phase (with the rest of the node that ran it) ends when the next node starts, that node and the rest
// of backward are backward's in their own module scopes, and the next step's forward is a phase of its own.
TEST(BackwardScopes, RecomputeStoppedEarlyEndsAtTheNextNode) {
  TempDir dir;
  Snapshot s = record_program(dir, R"(import torch, torch.nn as nn
class Stop(Exception):
    pass
class Half(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)
    def forward(self, x, stop=False):
        y = self.a(x)
        if stop:
            raise Stop
        return self.b(torch.tanh(y))
class Rerun(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0
    @staticmethod
    def backward(ctx, grad):
        with torch.enable_grad():
            try:
                model.part(torch.randn(64, 16), stop=True)
            except Stop:
                pass
        return grad * 2
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.part = Half()
    def forward(self, x):
        return Rerun.apply(self.part(x))
model = Model()
for step in range(2):
    model(torch.randn(64, 16)).pow(2).mean().backward()
)");
  auto nodes = modules_of_nodes(s);
  EXPECT_EQ(nodes["TanhBackward0"], std::set<std::string>{"part < Model"});
  EXPECT_EQ(nodes["AddmmBackward0"], (std::set<std::string>{"part.a < part < Model", "part.b < part < Model"}));
  std::map<std::string, std::vector<uint32_t>> phases;
  for (uint32_t id = 1; id < s.scopes.size(); ++id)
    if (s.scopes[id].kind == ScopeKind::phase) phases[s.strings[s.scopes[id].name]].push_back(id);
  ASSERT_EQ(phases["recompute"].size(), 2u);
  ASSERT_EQ(phases["forward"].size(), 2u);
  for (uint32_t id : phases["forward"]) EXPECT_EQ(enclosing_scope(s, s.scopes[id].parent, ScopeKind::phase), "");
  size_t recomputed = 0;
  for (const Event& e : s.events)
    if (e.action == Action::alloc && enclosing_scope(s, e.scope, ScopeKind::phase) == "recompute") {
      EXPECT_TRUE(enclosing_scope(s, e.scope, ScopeKind::module).starts_with("part"));  // the rest of its node too
      ++recomputed;
    }
  EXPECT_GT(recomputed, 0u);
}

// scopes=False: no module scope, in forward or backward.
TEST(BackwardScopes, NoneWithoutScopes) {
  TempDir dir;
  std::ofstream(dir / "off.py") << R"(import torch, torch.nn as nn, memrec
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
with memrec.record(")" + dir / "off.memrec" + R"(", scopes=False):
    model(torch.randn(4, 8)).sum().backward()
)";
  auto r = run_command("PYTHONPATH=" MEMREC_PYTHON_PACKAGE_DIR " " + kPython + " " + dir / "off.py");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "off.memrec");
  EXPECT_FALSE(s.events.empty());
  for (uint32_t id = 1; id < s.scopes.size(); ++id) EXPECT_NE(s.scopes[id].kind, ScopeKind::module);
}

}  // namespace
}  // namespace memrec
