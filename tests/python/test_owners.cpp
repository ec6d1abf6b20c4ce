// Owners on real programs recorded with `memrec record` (Debian's torch 1.13 on the CPU in CI): the blocks of
// parameters, buffers, gradients and optimizer state carry their names, and checkpointed forwards run again in a
// phase of their own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/load.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

using test::run_command;
using test::TempDir;

const std::string kMemrec = MEMREC_BINARY;
const std::string kPython = MEMREC_TEST_PYTHON;

// The Adam program: Net.net = Sequential(Linear(16, 32), ReLU, Linear(32, 4)); net.0.weight is 32 x 16 floats.
const char* kAdam = R"(import torch, torch.nn as nn
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(3):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item().hex())
del loss  # a 4-byte block alive past the last phase would count as a parameter by its lifetime
)";

// A block with an owner, as the replay resolved it.
struct Owned {
  OwnerKind kind;
  uint64_t size;        // of the block
  uint64_t row_size;    // the row's storage bytes
  Category category;
  uint32_t alloc_step;
  std::string module;
};

struct Recording {
  std::string file;
  Snapshot s;
  std::map<std::string, std::vector<Owned>> owned;  // by owner name, one entry per block
  uint64_t unresolved = 0;
};

Recording record(const TempDir& dir, const std::string& name, const std::string& program,
                 const std::string& options = "") {
  std::ofstream(dir / (name + ".py")) << program;
  std::string file = dir / (name + ".memrec");
  auto r = run_command(kMemrec + " record " + options + " -o " + file + " -- " + kPython + " " + dir / (name + ".py"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  Recording out{file, load_snapshot(file)};
  const Snapshot& s = out.s;
  Replay replay(s, 0);
  auto categories = categorize(s, replay);
  for (uint32_t id = 0; id < replay.allocations().size(); ++id) {
    uint32_t row = replay.owner_of(id);
    if (row == kNoOwner) continue;
    Owner o = s.owners[row];
    out.owned[s.strings[o.name]].push_back(Owned{o.kind, replay.size_of(id), o.size, categories[id],
                                                 replay.alloc_steps()[id], s.strings[o.module]});
  }
  out.unresolved = replay.unresolved_owners();
  return out;
}

std::set<std::string> owner_names(const Snapshot& s) {
  std::set<std::string> names;
  for (const Owner& o : s.owners) names.insert(s.strings[o.name]);
  return names;
}

const Group* find(const std::vector<Group>& groups, const std::string& key) {
  for (const Group& g : groups)
    if (g.key == key) return &g;
  return nullptr;
}

size_t index(Category c) { return static_cast<size_t>(c); }

TEST(Owners, AdamStateGradientsAndParametersAreNamed) {
  TempDir dir;
  Recording rec = record(dir, "adam", kAdam);
  const Snapshot& s = rec.s;
  EXPECT_EQ(rec.unresolved, 0u);
  for (const char* name : {"net.0.weight", "net.0.bias", "net.2.weight", "net.0.weight.grad", "net.2.bias.grad",
                           "net.0.weight.exp_avg", "net.0.weight.exp_avg_sq", "net.0.weight.step"})
    EXPECT_TRUE(rec.owned.count(name)) << name;
  ASSERT_EQ(rec.owned["net.0.weight"].size(), 1u);
  EXPECT_EQ(rec.owned["net.0.weight"][0].kind, OwnerKind::parameter);
  EXPECT_EQ(rec.owned["net.0.weight"][0].size, 2048u);
  EXPECT_EQ(rec.owned["net.0.weight"][0].category, Category::parameter);
  EXPECT_EQ(rec.owned["net.0.weight"][0].module, "net.0");
  for (const char* state : {"net.0.weight.exp_avg", "net.0.weight.exp_avg_sq"}) {
    ASSERT_EQ(rec.owned[state].size(), 1u) << state;
    EXPECT_EQ(rec.owned[state][0].kind, OwnerKind::optimizer_state);
    EXPECT_EQ(rec.owned[state][0].size, 2048u);
    EXPECT_EQ(rec.owned[state][0].category, Category::optimizer_state);
  }
  EXPECT_EQ(rec.owned["net.0.weight.step"][0].row_size, 4u);  // a float32 tensor
  for (const Owned& g : rec.owned["net.0.weight.grad"]) {
    EXPECT_EQ(g.kind, OwnerKind::gradient);
    EXPECT_EQ(g.size, 2048u);
    EXPECT_EQ(g.category, Category::gradient);
    EXPECT_NE(g.alloc_step, kNoEvent);  // allocated in the recording, by the first backward
  }

  // At the end, net.0 holds its parameters, their gradients and Adam's state, wherever they were allocated; no
  // byte of a parameter, gradient or optimizer state is left without a module.
  Replay r(s, 0);
  auto modules = group_live(s, r, r.steps() - 1, GroupBy::module);
  const Group* net0 = find(modules, "net.0");
  ASSERT_NE(net0, nullptr);
  EXPECT_GE(net0->bytes, 4u * 2048);
  EXPECT_EQ(net0->by_category[index(Category::parameter)], 2048u + 128);
  EXPECT_EQ(net0->by_category[index(Category::gradient)], 2048u + 128);
  EXPECT_GE(net0->by_category[index(Category::optimizer_state)], 2u * (2048 + 128));
  if (const Group* none = find(modules, "<none>"))
    for (Category c : {Category::parameter, Category::gradient, Category::optimizer_state})
      EXPECT_EQ(none->by_category[index(c)], 0u) << to_string(c);
  auto layers = group_live(s, r, r.steps() - 1, GroupBy::layer);
  ASSERT_NE(find(layers, "net.0"), nullptr);
  EXPECT_EQ(find(layers, "net.0")->bytes, net0->bytes);
  auto owners = group_live(s, r, r.steps() - 1, GroupBy::owner);
  ASSERT_NE(find(owners, "net.0.weight.exp_avg_sq"), nullptr);
  EXPECT_EQ(find(owners, "net.0.weight.exp_avg_sq")->bytes, 2048u);

  // The command line's JSON at the end: each group says how many of its bytes have an owner.
  auto cli = run_command(kMemrec + " stats " + rec.file + " --by owner --top 100 --at 100s --json 2>/dev/null");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  nlohmann::json j = nlohmann::json::parse(cli.output);
  bool exp_avg = false;
  for (const auto& row : j["live"]) {
    if (row["key"] == "<none>") EXPECT_EQ(row["owned"], 0) << row.dump();
    else EXPECT_EQ(row["owned"], row["bytes"]) << row.dump();
    exp_avg |= row["key"] == "net.0.weight.exp_avg" && row["bytes"] == 2048;
  }
  EXPECT_TRUE(exp_avg) << j["live"].dump();

  // By module, net.0's row names its owners, largest first, and they add up to its owned bytes.
  cli = run_command(kMemrec + " stats " + rec.file + " --by module --top 100 --at 100s --json 2>/dev/null");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  j = nlohmann::json::parse(cli.output);
  const nlohmann::json* row0 = nullptr;
  for (const auto& row : j["live"])
    if (row["key"] == "net.0") row0 = &row;
  ASSERT_NE(row0, nullptr) << j["live"].dump();
  const auto& row0_owners = (*row0)["owners"];
  ASSERT_FALSE(row0_owners.empty()) << row0->dump();
  EXPECT_EQ(row0_owners[0]["bytes"], 2048) << row0->dump();  // the weight, its gradient, exp_avg, exp_avg_sq: 2048 each
  std::set<std::string> names;
  for (const auto& o : row0_owners) names.insert(o["owner"]);
  EXPECT_TRUE(names.count("net.0.weight.exp_avg")) << row0->dump();
  uint64_t all = 0;
  for (const auto& [name, bytes] : net0->owners) all += bytes;
  EXPECT_EQ(all, net0->owned);
  auto info = run_command(kMemrec + " info " + rec.file);
  EXPECT_NE(info.output.find("owners: "), std::string::npos) << info.output;
  EXPECT_NE(info.output.find(", 0 unresolved"), std::string::npos) << info.output;
}

TEST(Owners, SgdMomentumAndAGradientPerStepWithSetToNone) {
  TempDir dir;
  Recording rec = record(dir, "sgd", R"(import torch, torch.nn as nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
for step in range(3):
    loss = net(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
)");
  EXPECT_EQ(rec.unresolved, 0u);
  ASSERT_EQ(rec.owned["0.weight.momentum_buffer"].size(), 1u);
  EXPECT_EQ(rec.owned["0.weight.momentum_buffer"][0].size, 2048u);
  EXPECT_EQ(rec.owned["0.weight.momentum_buffer"][0].category, Category::optimizer_state);
  EXPECT_EQ(rec.owned["0.weight.momentum_buffer"][0].module, "0");
  // Each step's gradient is a new block: each has its owner, at whatever address.
  size_t rows = 0;
  for (const Owner& o : rec.s.owners) rows += rec.s.strings[o.name] == "0.weight.grad";
  EXPECT_EQ(rows, 3u);
  EXPECT_EQ(rec.owned["0.weight.grad"].size(), 3u);
  for (const Owned& g : rec.owned["0.weight.grad"]) EXPECT_EQ(g.category, Category::gradient);
}

// memrec.start(owners=False, ops=False): the same program, the same loss, with no owner rows and no op scopes; the
// module scopes and the allocator's events stay.
TEST(Owners, StartWithoutOwnersOrOpsRecordsNeither) {
  TempDir dir;
  std::string program = std::string("import memrec, sys\n") + kAdam;
  program.replace(program.find("model = Net()"), 0, "memrec.start(sys.argv[1], owners=sys.argv[2] == 'on', "
                                                    "ops=sys.argv[2] == 'on')\n");
  std::ofstream(dir / "adam.py") << program << "memrec.stop()\n";
  auto run = [&](const std::string& mode) {
    std::string file = dir / (mode + ".memrec");
    auto r = run_command("PYTHONPATH=" + std::string(MEMREC_PYTHON_PACKAGE_DIR) + " " + kPython + " " +
                         dir / "adam.py" + " " + file + " " + mode);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::pair{r.output, load_snapshot(file)};
  };
  auto [on_output, on] = run("on");
  auto [off_output, off] = run("off");
  EXPECT_EQ(on_output, off_output);
  auto count = [](const Snapshot& s, ScopeKind kind) {
    size_t n = 0;
    for (size_t id = 1; id < s.scopes.size(); ++id) n += s.scopes[id].kind == kind;  // 0: no scope
    return n;
  };
  EXPECT_GT(on.owners.size(), 0u);
  EXPECT_GT(count(on, ScopeKind::op), 0u);
  EXPECT_EQ(off.owners.size(), 0u);
  EXPECT_EQ(count(off, ScopeKind::op), 0u);
  EXPECT_EQ(count(off, ScopeKind::module), count(on, ScopeKind::module));
  EXPECT_EQ(off.events.size(), on.events.size());
}

// Recorded from the end of step 1: the parameters and Adam's state were made before the recording began, and
// still get their names, on blocks live since the start.
TEST(Owners, TensorsMadeBeforeTheRecordingAreNamed) {
  TempDir dir;
  Recording rec = record(dir, "late", kAdam, "--record wait=1,warmup=0,active=1");
  EXPECT_EQ(rec.unresolved, 0u);
  for (const char* name : {"net.0.weight", "net.0.weight.exp_avg", "net.0.weight.exp_avg_sq", "net.2.bias"}) {
    ASSERT_EQ(rec.owned[name].size(), 1u) << name;
    EXPECT_EQ(rec.owned[name][0].alloc_step, kNoEvent) << name;
    EXPECT_EQ(rec.owned[name][0].size, rec.owned[name][0].row_size) << name;
  }
  EXPECT_EQ(rec.owned["net.0.weight"][0].category, Category::parameter);
  EXPECT_EQ(rec.owned["net.0.weight.exp_avg"][0].category, Category::optimizer_state);
  EXPECT_EQ(owner_names(rec.s).count("Adam.param_groups.0.0"), 0u);  // named after the module, not the optimizer
  Replay r(rec.s, 0);
  EXPECT_GE(r.initial().allocated, 3u * (2048 + 128));
}

// A new storage under a parameter at the address its last one had (as the CUDA caching allocator hands a freed
// block back) is a new block, named again: storages over one bytearray stand for blocks at one address.
TEST(Owners, ANewStorageAtTheOldAddressIsNamedAgain) {
  TempDir dir;
  Recording rec = record(dir, "swap", R"(import torch
net = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
memory = bytearray(64)
for step in range(3):
    with torch.no_grad():
        net[0].weight.data = torch.frombuffer(memory, dtype=torch.float32).view(4, 4)
    net(torch.ones(1, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
)");
  std::set<uint64_t> addresses;
  size_t rows = 0;
  for (const Owner& o : rec.s.owners)
    if (rec.s.strings[o.name] == "0.weight") {
      ++rows;
      addresses.insert(o.addr);
      EXPECT_EQ(o.size, 64u);
    }
  EXPECT_EQ(rows, 3u);  // one a step: the first forward's, then each step's
  EXPECT_EQ(addresses.size(), 1u);
}

TEST(Owners, BuffersAndTiedWeightsWithoutOptimizer) {
  TempDir dir;
  Recording rec = record(dir, "tied", R"(import torch, torch.nn as nn


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.layers = nn.Sequential(nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)))
        self.head = nn.Linear(8, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, i):
        return self.head(self.layers(self.emb(i)))


model = Tied().eval()
with torch.no_grad():
    model(torch.arange(4))
)");
  EXPECT_EQ(rec.unresolved, 0u);
  ASSERT_EQ(rec.owned["layers.0.1.running_mean"].size(), 1u);
  EXPECT_EQ(rec.owned["layers.0.1.running_mean"][0].kind, OwnerKind::buffer);
  EXPECT_EQ(rec.owned["layers.0.1.running_mean"][0].category, Category::parameter);
  EXPECT_EQ(rec.owned["layers.0.1.running_mean"][0].module, "layers.0.1");
  ASSERT_EQ(rec.owned["emb.weight"].size(), 1u);
  EXPECT_EQ(rec.owned["emb.weight"][0].size, 10u * 8 * 4);
  EXPECT_EQ(owner_names(rec.s).count("head.weight"), 0u);  // the tied weight keeps its first name
  EXPECT_EQ(owner_names(rec.s).count("emb.weight.grad"), 0u);
}

// torch.utils.checkpoint, both modes: the forward run again in backward is its own phase, under the recomputed
// layer's module scopes; after it, backward goes on.
TEST(Owners, CheckpointedForwardsRunAgainInARecomputePhase) {
  TempDir dir;
  Recording rec = record(dir, "ckpt", R"(import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Blocks(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=self.reentrant)
        return x


for reentrant in (True, False):
    model = Blocks(reentrant)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64, requires_grad=True)
    for step in range(2):
        loss = model(x * 1.0).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
)");
  const Snapshot& s = rec.s;
  std::set<std::string> phases, recomputed;
  size_t recompute_scopes = 0;
  for (uint32_t id = 1; id < s.scopes.size(); ++id)
    if (s.scopes[id].kind == ScopeKind::phase) {
      phases.insert(s.strings[s.scopes[id].name]);
      recompute_scopes += s.strings[s.scopes[id].name] == "recompute";
    }
  EXPECT_TRUE(phases.count("forward") && phases.count("backward") && phases.count("recompute"));
  EXPECT_EQ(recompute_scopes, 2u * 2 * 3);  // two models, two steps, three blocks
  PhaseIndex index(s, 0);
  size_t recompute_allocs = 0, backward_after_recompute = 0;
  int64_t first_recompute_end = INT64_MAX;
  for (uint32_t id = 1; id < s.scopes.size(); ++id)
    if (s.strings[s.scopes[id].name] == "recompute")
      first_recompute_end = std::min(first_recompute_end, s.scopes[id].end_ns);
  for (const Event& e : s.events) {
    if (e.action != Action::alloc) continue;
    std::string phase = enclosing_scope(s, e.scope, ScopeKind::phase);
    uint32_t at = index.at(e.time_ns);
    if (phase == "recompute") {
      ++recompute_allocs;
      std::string module = enclosing_scope(s, e.scope, ScopeKind::module);
      recomputed.insert(module.substr(0, module.find('.', module.find('.') + 1)));
      EXPECT_EQ(at ? index.kind(at) : PhaseKind::none, PhaseKind::recompute);
    } else if (phase == "backward") {
      // Time between recomputes is backward's (PhaseIndex used to answer "no phase" after a nested one).
      EXPECT_EQ(at ? index.kind(at) : PhaseKind::none, PhaseKind::backward) << e.time_ns;
      backward_after_recompute += e.time_ns > first_recompute_end;
    }
  }
  EXPECT_GT(recompute_allocs, 0u);
  EXPECT_GT(backward_after_recompute, 0u);
  EXPECT_EQ(recomputed, (std::set<std::string>{"blocks.0", "blocks.1", "blocks.2"}));
  // Parameters still have their owners, gradients too.
  EXPECT_TRUE(rec.owned.count("blocks.1.0.weight"));
  EXPECT_TRUE(rec.owned.count("blocks.1.0.weight.grad"));
}

// Code torch.compile generated, mapped back to the model: inductor is stood in for (torch 1.13 has none) by a
// module in a generated file's place run from the model's forward, and by the map memrec's hook notes when inductor
// writes such a file (the FX node's nn_module_stack and stack trace at each line that begins a node's code).
TEST(Owners, CompiledCodeIsOwnedByTheNodesModuleAndSourceLine) {
  TempDir dir;
  std::filesystem::create_directories(dir / "torchinductor_u");
  std::string generated = dir / "torchinductor_u/cab.py";
  std::ofstream(generated) << "import torch\n\n\ndef call(x):\n    buf0 = torch.empty(4096)\n    return buf0\n";
  Recording rec = record(dir, "compiled", R"(import torch
from memrec import _compiled


class Node:  # an FX node as inductor's line map holds it
    def __init__(self, name, modules, trace):
        self.name, self.meta, self.stack_trace = name, {"nn_module_stack": {m: (m, object) for m in modules}}, trace


trace = 'File "/src/model.py", line 40, in forward\n    x = self.h[3](x)\nFile "/src/model.py", line 22, in forward\n    return self.attn(x)\n'
_compiled._note(")" + generated + R"(", [(3, Node("empty", ["L['self'].transformer", "L['self'].transformer.h[3]", "L['self']._modules['transformer']._modules['h']._modules['3'].attn"], trace))])
generated = {}
exec(compile(open(")" + generated + R"(").read(), ")" + generated + R"(", "exec"), generated)


class Model(torch.nn.Module):
    def forward(self, x):
        return generated["call"](x)


kept = Model()(torch.ones(2))
)");
  const Snapshot& s = rec.s;
  std::set<std::string> modules, sites;
  for (const Event& e : s.events)
    if (e.action == Action::alloc && e.size == 4096 * sizeof(float)) {
      std::string chain;  // the module scopes, innermost first
      for (uint32_t sc = e.scope; sc != 0; sc = s.scopes[sc].parent)
        if (s.scopes[sc].kind == ScopeKind::module) chain += s.strings[s.scopes[sc].name] + " < ";
      modules.insert(chain);
      sites.insert(allocation_site(s, e.stack));
    }
  EXPECT_EQ(modules, std::set<std::string>{"transformer.h.3.attn < transformer.h.3 < transformer < Model < "});
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_TRUE(sites.begin()->starts_with("forward (model.py:22)")) << *sites.begin();
}

// DDP's optimizer cuts a compiled graph into pieces compiled one by one, and pieces alike run one generated file
// whose map names the modules of the piece it was made for (block 0's). Stood in for as above: each piece noted as
// the recorder's hook notes it when DDP's optimizer compiles it, run inside a split graph (`GraphModule`) that is no
// submodule of the model. Each piece's buffers are its own block's.
TEST(Owners, EachPieceOfASplitGraphOwnsTheSharedCodeItRan) {
  TempDir dir;
  std::filesystem::create_directories(dir / "torchinductor_u");
  std::string generated = dir / "torchinductor_u/cpiece.py";
  std::ofstream(generated) << "import torch\n\n\ndef call(x):\n    buf0 = torch.empty(4096)\n"
                              "    buf1 = torch.empty(1024)\n    return x + 1\n";
  Recording rec = record(dir, "pieces", R"(import torch
from memrec import _compiled


class Node:  # an FX node
    def __init__(self, name, modules, line):
        self.name, self.meta = name, {"nn_module_stack": {m: (m, object) for m in modules}}
        self.stack_trace = f'File "/src/model.py", line {line}, in forward\n'


class Graph:  # a piece's FX graph, as DDP's optimizer hands it to the compiler
    def __init__(self, nodes):
        self.graph = type("G", (), {"nodes": nodes})()


def block(b):  # the block's MLP, and the next block's ln_1
    h, n = f"L['self'].transformer.h[{b}]", f"L['self'].transformer.h[{b + 1}]"
    return [Node("addmm", [h, h + ".mlp", h + ".mlp.c_fc"], 26), Node("add", [n, n + ".ln_1"], 35)]


_compiled._note(")" + generated + R"(", [(5, block(0)[0]), (6, block(0)[1])])
generated = {}
exec(compile(open(")" + generated + R"(").read(), ")" + generated + R"(", "exec"), generated)


class WrapperModule(torch.nn.Module):
    def forward(self, x):
        return generated["call"](x)


class GraphModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pieces = torch.nn.ModuleList(WrapperModule() for _ in range(3))
        for b, piece in enumerate(self.pieces):
            _compiled.note_piece(piece, Graph(block(b)))

    def forward(self, x):
        for piece in self.pieces:
            x = piece(x)
        return x


split = GraphModule()


class GPT(torch.nn.Module):
    def forward(self, x):
        return split(x)


kept = GPT()(torch.ones(2))
)");
  const Snapshot& s = rec.s;
  std::vector<std::string> modules;
  for (const Event& e : s.events)
    if (e.action == Action::alloc && (e.size == 4096 * sizeof(float) || e.size == 1024 * sizeof(float)))
      modules.push_back(enclosing_scope(s, e.scope, ScopeKind::module));
  EXPECT_EQ(modules, (std::vector<std::string>{"transformer.h.0.mlp.c_fc", "transformer.h.1.ln_1",
                                                "transformer.h.1.mlp.c_fc", "transformer.h.2.ln_1",
                                                "transformer.h.2.mlp.c_fc", "transformer.h.3.ln_1"}));
}

}  // namespace
}  // namespace memrec
