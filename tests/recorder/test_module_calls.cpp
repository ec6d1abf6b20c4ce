// Module scopes in backward with libtorch's own autograd: each backward node runs in the module scopes of the call
// whose forward made it, and the calls of an old forward are forgotten once more than the bound were made since.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/variable.h>

#include <functional>
#include <set>
#include <string>

#include "memrec/analysis.h"
#include "memrec/recorder.h"

namespace memrec {
namespace {

RecorderOptions module_options() {
  RecorderOptions options;
  options.stacks = false;
  options.cuda = false;  // the CPU allocator's blocks, also where a GPU is
  options.ops = false;
  options.module_scopes = true;
  return options;
}

void call_module(const char* name, const std::function<void()>& forward) {
  ASSERT_TRUE(open_scope(name, ScopeKind::module));
  forward();
  close_scope();
}

void backward(const at::Tensor& loss) {
  ASSERT_TRUE(open_scope("backward", ScopeKind::phase));
  torch::autograd::backward({loss});
  close_scope();
}

// The module scopes of each allocation of `bytes` in backward, innermost first ("inner < outer").
std::set<std::string> backward_modules(const Snapshot& s, uint64_t bytes) {
  std::set<std::string> out;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc || e.size != bytes || enclosing_scope(s, e.scope, ScopeKind::phase) != "backward")
      continue;
    std::string chain;
    for (uint32_t id = e.scope; id != 0 && s.scopes[id].kind == ScopeKind::module; id = s.scopes[id].parent)
      chain += (chain.empty() ? "" : " < ") + s.strings[s.scopes[id].name];
    out.insert(chain);
  }
  return out;
}

at::Tensor leaf(int64_t n) { return torch::autograd::make_variable(at::ones({n}), /*requires_grad=*/true); }

TEST(ModuleCalls, BackwardNodesRunInTheScopesOfTheirCalls) {
  Recorder rec(module_options());
  rec.start();
  at::Tensor x = leaf(1000), y = leaf(2000), a, b;
  call_module("outer", [&] {
    a = x.exp();  // exp's backward multiplies: a block of 4000 bytes, in outer
    call_module("inner", [&] { b = y.exp(); });  // 8000 bytes, in inner < outer
  });
  at::Tensor loss = a.sum() + b.sum();  // outside every call
  backward(loss);
  backward(leaf(3000).exp().sum());  // made outside every call: 12000 bytes in no module
  rec.stop();
  const Snapshot& s = rec.snapshot();
  EXPECT_EQ(backward_modules(s, 4000), std::set<std::string>{"outer"});
  EXPECT_EQ(backward_modules(s, 8000), std::set<std::string>{"inner < outer"});
  EXPECT_EQ(backward_modules(s, 12000), std::set<std::string>{""});
}

// 70,000 later calls that made nodes (more than the 65,536 kept): the first call is forgotten, so its node runs in
// no module scope; a recent one still has its.
TEST(ModuleCalls, OldCallsAreForgotten) {
  Recorder rec(module_options());
  rec.start();
  at::Tensor old_x = leaf(1000), new_x = leaf(2000), filler = leaf(1), old_y, new_y;
  call_module("old", [&] { old_y = old_x.exp(); });
  for (int i = 0; i < 70000; ++i) call_module("filler", [&] { (void)(filler * 2); });
  call_module("new", [&] { new_y = new_x.exp(); });
  backward(old_y.sum() + new_y.sum());
  rec.stop();
  EXPECT_EQ(backward_modules(rec.snapshot(), 4000), std::set<std::string>{""});
  EXPECT_EQ(backward_modules(rec.snapshot(), 8000), std::set<std::string>{"new"});
}

// A call that never ends (a training loop inside a module's forward) keeps the bound too: its oldest calls go, the
// outermost among them, and a recent call is still found.
TEST(ModuleCalls, ACallThatNeverEndsKeepsTheBound) {
  Recorder rec(module_options());
  rec.start();
  at::Tensor old_x = leaf(1000), new_x = leaf(2000), filler = leaf(1), old_y, new_y;
  ASSERT_TRUE(open_scope("loop", ScopeKind::module));
  call_module("old", [&] { old_y = old_x.exp(); });
  for (int i = 0; i < 70000; ++i) call_module("filler", [&] { (void)(filler * 2); });
  call_module("new", [&] { new_y = new_x.exp(); });
  backward(old_y.sum() + new_y.sum());
  close_scope();
  rec.stop();
  EXPECT_EQ(backward_modules(rec.snapshot(), 4000), std::set<std::string>{""});
  EXPECT_EQ(backward_modules(rec.snapshot(), 8000), std::set<std::string>{"new"});
}

}  // namespace
}  // namespace memrec
