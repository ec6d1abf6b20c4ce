// Op scopes on the kernels' steps only (the first 3, then every 10th; memrec.start's and memrec record's default),
// backward's module scopes on every step.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/frames.h"
#include "memrec/load.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::TempDir;

const std::string kPython = MEMREC_TEST_PYTHON;
const std::string kPackage = MEMREC_PYTHON_PACKAGE_DIR;
const std::string kMemrec = MEMREC_BINARY;

bool in_op(const Snapshot& s, uint32_t scope) {
  for (uint32_t id = scope; id != 0; id = s.scopes[id].parent)
    if (s.scopes[id].kind == ScopeKind::op) return true;
  return false;
}

// The program, unchanged, under `memrec record --ops MODE`: per step, its allocations, those inside an op scope and
// backward's inside a module scope.
struct StepCounts {
  std::map<std::string, int> allocs, in_ops, backward_in_module;
};

StepCounts record_steps(const TempDir& dir, const std::string& ops, Snapshot& s) {
  std::ofstream(dir / "p.py") << R"(import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
for _ in range(12):
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
)";
  std::string file = dir / (ops + ".memrec");
  std::string flag = ops == "default" ? "" : " --ops " + ops;
  auto r = run_command(kMemrec + " record --stacks off --kernels off" + flag + " -o " + file + " -- " + kPython + " " +
                       dir / "p.py");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  s = load_snapshot(file);
  StepCounts c;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc) continue;
    std::string step = enclosing_scope(s, e.scope, ScopeKind::step);
    ++c.allocs[step];
    c.in_ops[step] += in_op(s, e.scope);
    c.backward_in_module[step] += enclosing_scope(s, e.scope, ScopeKind::phase) == "backward" &&
                                  !enclosing_scope(s, e.scope, ScopeKind::module).empty();
  }
  return c;
}

// By default op scopes are on the kernels' steps (the 1st-3rd and the 10th), backward's module scopes on every step;
// --ops all takes them on every step, --ops off on none.
TEST(OpSteps, OpScopesOnTheChosenStepsByDefaultEveryStepWithAll) {
  TempDir dir;
  for (std::string ops : {"default", "on", "all", "off"}) {
    Snapshot s;
    StepCounts c = record_steps(dir, ops, s);
    // "step 0" opens at start, each optimizer step opens the next: 13 begun.
    bool chosen_steps = ops == "default" || ops == "on";
    if (chosen_steps) EXPECT_EQ(s.metadata.at("recorder.op_steps_traced"), "4 of 13") << ops;
    else EXPECT_FALSE(s.metadata.count("recorder.op_steps_traced")) << ops;
    for (int i = 0; i < 12; ++i) {
      std::string step = "step " + std::to_string(i);
      ASSERT_GT(c.allocs[step], 0) << ops << " " << step;
      bool traced = ops == "all" || (chosen_steps && (i < 3 || i == 9));
      if (traced) EXPECT_GT(c.in_ops[step], 0) << ops << " " << step;
      else EXPECT_EQ(c.in_ops[step], 0) << ops << " " << step;
      EXPECT_GT(c.backward_in_module[step], 0) << ops << " " << step;
    }
  }
}

// By op, a block no op scope encloses is filed under the op its C++ frames enter, named as its op scope would be:
// recorded with op scopes, the two names agree on every block; recorded without, the by-op table names aten ops.
TEST(OpSteps, WithoutOpScopesTheCppFramesNameTheOp) {
  TempDir dir;
  std::ofstream(dir / "p.py") << R"(import sys, torch, torch.nn as nn, memrec
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.LayerNorm(256), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
memrec.start(sys.argv[1], ops=sys.argv[2] == "on", stacks="cpp", kernels=False)
for _ in range(3):
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
memrec.stop()
)";
  auto record = [&](const char* ops) {
    auto r = run_command("PYTHONPATH=" + quote(kPackage) + " " + kPython + " " + dir / "p.py " + dir / ops + " " + ops);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return load_snapshot(dir / ops);
  };
  Snapshot on = record("on");
  int compared = 0;
  for (const Event& e : on.events) {
    std::vector<std::string> ops = stack_ops(on, e.stack);
    std::string scope = enclosing_scope(on, e.scope, ScopeKind::op);
    if (e.action != Action::alloc || ops.empty() || !scope.starts_with("aten::")) continue;
    EXPECT_EQ(ops.back(), scope);
    ++compared;
  }
  EXPECT_GT(compared, 50);

  Snapshot off = record("off");
  Replay r(off, 0);
  std::vector<uint32_t> ids(r.allocations().size());
  std::iota(ids.begin(), ids.end(), 0u);
  uint64_t named = 0, all = 0;
  std::set<std::string> keys;
  for (const Group& g : group_allocations(off, r, ids, GroupBy::op)) {
    all += g.bytes;
    if (g.key.starts_with("aten::")) named += g.bytes, keys.insert(g.key);
  }
  EXPECT_GT(named, all * 9 / 10);
  std::string listed;
  for (const std::string& k : keys) listed += k + " ";
  for (const char* op :
       {"aten::mm", "aten::addmm", "aten::empty_strided", "aten::_log_softmax", "aten::nll_loss_forward"})
    EXPECT_TRUE(keys.count(op)) << op << " not among " << listed;
}

TEST(OpSteps, AnOpsValueOtherThanStepsIsRefused) {
  auto r = run_command("PYTHONPATH=" + quote(kPackage) + " " + kPython +
                       " -c \"import memrec; memrec.start('/dev/null', ops='some')\"");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("ops must be True, False or \"steps\""), std::string::npos) << r.output;
}

}  // namespace
}  // namespace memrec
