// memrec.start(ops="steps"): op scopes on the kernels' steps only (the first 3, then every 10th), backward's module
// scopes on every step.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/load.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::TempDir;

const std::string kPython = MEMREC_TEST_PYTHON;
const std::string kPackage = MEMREC_PYTHON_PACKAGE_DIR;

bool in_op(const Snapshot& s, uint32_t scope) {
  for (uint32_t id = scope; id != 0; id = s.scopes[id].parent)
    if (s.scopes[id].kind == ScopeKind::op) return true;
  return false;
}

TEST(OpSteps, OpScopesOnTheChosenStepsModuleScopesOnEvery) {
  TempDir dir;
  std::ofstream(dir / "p.py") << R"(import sys, torch, torch.nn as nn, memrec
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
memrec.start(sys.argv[1], ops="steps", stacks="off", kernels=False)
for _ in range(12):
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
memrec.stop()
)";
  auto r = run_command("PYTHONPATH=" + quote(kPackage) + " " + kPython + " " + dir / "p.py " + dir / "p.memrec");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Snapshot s = load_snapshot(dir / "p.memrec");
  // "step 0" opens at start, each optimizer step opens the next: 13 begun, op scopes on the 1st-3rd and the 10th.
  EXPECT_EQ(s.metadata.at("recorder.op_steps_traced"), "4 of 13");

  std::map<std::string, int> allocs, in_ops, backward_in_module;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc) continue;
    std::string step = enclosing_scope(s, e.scope, ScopeKind::step);
    ++allocs[step];
    in_ops[step] += in_op(s, e.scope);
    backward_in_module[step] += enclosing_scope(s, e.scope, ScopeKind::phase) == "backward" &&
                                !enclosing_scope(s, e.scope, ScopeKind::module).empty();
  }
  for (int i = 0; i < 12; ++i) {
    std::string step = "step " + std::to_string(i);
    ASSERT_GT(allocs[step], 0) << step;
    bool chosen = i < 3 || i == 9;
    if (chosen) EXPECT_GT(in_ops[step], 0) << step;
    else EXPECT_EQ(in_ops[step], 0) << step;
    EXPECT_GT(backward_in_module[step], 0) << step;
  }
}

TEST(OpSteps, AnOpsValueOtherThanStepsIsRefused) {
  auto r = run_command("PYTHONPATH=" + quote(kPackage) + " " + kPython +
                       " -c \"import memrec; memrec.start('/dev/null', ops='some')\"");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("ops must be True, False or \"steps\""), std::string::npos) << r.output;
}

}  // namespace
}  // namespace memrec
