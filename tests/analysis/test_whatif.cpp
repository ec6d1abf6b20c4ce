// Checkpointing predictions on a two-layer history whose answers are worked out by hand.
#include <gtest/gtest.h>

#include <tuple>

#include "analysis/history.h"
#include "memrec/replay.h"
#include "memrec/whatif.h"

namespace memrec {
namespace {

struct TwoLayers : test::History {
  void free(int64_t t, uint64_t addr, uint64_t size) { History::free(t, addr, size, 0); }  // completed at once
  TwoLayers() {
    uint32_t fwd = scope(ScopeKind::phase, "forward", 100, 300, 0);
    scope(ScopeKind::phase, "backward", 300, 500, 0);
    uint32_t l0 = scope(ScopeKind::module, "layers.0", 100, 200, fwd);
    uint32_t l0_attn = scope(ScopeKind::module, "layers.0.self_attn", 105, 150, l0);
    uint32_t l1 = scope(ScopeKind::module, "layers.1", 200, 300, fwd);
    event(10, Action::alloc, 0x1, 1000);  // parameter
    event(110, Action::alloc, 0x10, 100, l0_attn);
    event(120, Action::alloc, 0x20, 200, l0_attn);
    event(190, Action::alloc, 0x30, 50, l0);  // layer 0's output
    event(210, Action::alloc, 0x40, 300, l1);
    event(220, Action::alloc, 0x50, 400, l1);
    event(290, Action::alloc, 0x60, 60, l1);  // layer 1's output
    event(295, Action::alloc, 0x68, 8, l1);   // allocated after the output, like layer_norm's rstd
    free(305, 0x60, 60);                   // the output goes first: the loss saved it
    free(310, 0x50, 400);
    free(310, 0x68, 8);
    free(320, 0x40, 300);
    free(400, 0x30, 50);
    free(410, 0x20, 200);
    free(420, 0x10, 100);
  }
};

TEST(WhatIf, CheckpointingEveryLayerKeepsOnlyOutputsAcrossForward) {
  TwoLayers h;
  auto p = predict_checkpoint(h.s, 0, {});
  EXPECT_EQ(p.device, 0);
  EXPECT_EQ(p.recorded_peak, 2118u);
  EXPECT_EQ(p.layers, (std::vector<std::string>{"layers.0", "layers.1"}));
  EXPECT_EQ(p.blocks_dropped, 5u);
  // At 295: parameter + layer 0's output + layer 1 (not dropped until its forward ends at 300).
  EXPECT_EQ(p.predicted_peak, 1000u + 50 + 300 + 400 + 60 + 8);
  EXPECT_EQ(p.predicted_peak_ns, 295 - 10);
  EXPECT_EQ(p.saving, 2118u - 1818);
  EXPECT_DOUBLE_EQ(p.saving_percent, 100.0 * 300 / 2118);
}

TEST(WhatIf, ChoosingLayersByIndex) {
  TwoLayers h;
  EXPECT_EQ(predict_checkpoint(h.s, 0, {"1"}).predicted_peak, 2118u);  // layer 0 is still live at layer 1's peak
  EXPECT_EQ(predict_checkpoint(h.s, 0, {"0"}).predicted_peak, 1818u);
  EXPECT_EQ(predict_checkpoint(h.s, 0, {"layers.0"}).predicted_peak, 1818u);
}

TEST(WhatIf, TheOutputKeptIsTheActivationFreedFirst) {
  TwoLayers h;
  h.event(301, Action::alloc, 0x80, 5000);  // the loss's gradient, between forward and layer 1's backward
  h.free(303, 0x80, 5000);
  // At 301 only the layers' outputs are left: 0x60 (freed first), not 0x68 (allocated last).
  EXPECT_EQ(predict_checkpoint(h.s, 0, {}).predicted_peak, 1000u + 50 + 60 + 5000);
}

TEST(WhatIf, RecomputationHappensBeforeTheFirstFreeOfTheLayer) {
  TwoLayers h;
  // Make layer 0's recompute the peak: a large gradient allocated in backward and never freed.
  h.event(405, Action::alloc, 0x70, 5000, 0);
  auto p = predict_checkpoint(h.s, 0, {"0"});
  // At 410 layer 0's two dropped activations come back before 0x20 is freed: 1000 + 5000 + 100 + 200.
  EXPECT_EQ(p.predicted_peak, 6300u);
  EXPECT_EQ(p.predicted_peak_ns, 410 - 10);
  // As recorded, the gradient's alloc comes last in the history, after every free: the prediction, in time order,
  // is higher, and the saving none.
  EXPECT_EQ(p.recorded_peak, 1000u + 5000);
  EXPECT_EQ(p.saving, 0u);
  EXPECT_DOUBLE_EQ(p.saving_percent, -5.0);
}

// One layer of three ops (a, b, c) whose backward has a module scope, as the Python recorder writes it; with
// `input`, its input is made just before it and freed as it returns (`x = self.drop(x)`).
struct OneLayerWithBackward : test::History {
  explicit OneLayerWithBackward(bool input = false, bool together = false) {
    uint32_t fwd = scope(ScopeKind::phase, "forward", 100, 300, 0);
    uint32_t bwd = scope(ScopeKind::phase, "backward", 300, 500, 0);
    uint32_t layer = scope(ScopeKind::module, "layers.0", 100, 200, fwd);
    uint32_t a = scope(ScopeKind::module, "layers.0.a", 100, 130, layer);
    uint32_t b = scope(ScopeKind::module, "layers.0.b", 130, 160, layer);
    uint32_t c = scope(ScopeKind::module, "layers.0.c", 160, 200, layer);
    scope(ScopeKind::module, "layers.0", 350, 450, bwd);
    event(10, Action::alloc, 0x1, 1000);      // parameter
    if (input) event(90, Action::alloc, 0x5, 400);
    event(110, Action::alloc, 0x10, 100, a);  // saved
    event(120, Action::alloc, 0x18, 700, a);  // a temporary of op a
    free(125, 0x18, 700, 0);
    event(140, Action::alloc, 0x20, 200, b);  // saved, the last
    event(170, Action::alloc, 0x30, 50, c);   // the output
    event(175, Action::alloc, 0x38, 30, c);   // a temporary after the last saved block
    free(185, 0x38, 30, 0);
    if (input) free(201, 0x5, 400, 0);
    free(305, 0x30, 50, 0);
    event(340, Action::alloc, 0x70, 5000);  // the gradient reaching the layer, before its backward scope
    free(410, 0x20, 200, 0);
    if (!together) event(412, Action::alloc, 0x78, 10);  // op b's backward: another node frees 0x10
    free(420, 0x10, 100, 0);
    if (!together) free(425, 0x78, 10, 0);
    free(430, 0x70, 5000, 0);
  }
};

TEST(WhatIf, RecomputeRunsTheForwardAgainWhenTheLayersBackwardBegins) {
  OneLayerWithBackward h;
  auto p = predict_checkpoint(h.s, 0, {"0"});
  EXPECT_EQ(p.blocks_dropped, 2u);
  EXPECT_EQ(p.recorded_peak, 1000u + 100 + 200 + 5000);
  // At 350 the layer runs again beside the gradient: 0x10, then op a's temporary (freed again before 0x20), and it
  // stops at 0x20, the last saved block: neither the output nor c's temporary is made again.
  EXPECT_EQ(p.predicted_peak, 1000u + 5000 + 100 + 700);
  EXPECT_EQ(p.predicted_peak_ns, 350 - 10);
  EXPECT_EQ(p.saving, 0u);
}

TEST(WhatIf, CheckpointHoldsTheInputTheCallerDroppedUntilTheLayersBackwardIsDone) {
  OneLayerWithBackward h(true);
  auto p = predict_checkpoint(h.s, 0, {"0"});
  EXPECT_EQ(p.recorded_peak, 1000u + 100 + 200 + 5000);
  EXPECT_EQ(p.predicted_peak, 1000u + 5000 + 100 + 700 + 400);  // the recompute's peak, with the input still held
  CheckpointPredictor cp(h.s, 0);
  Snapshot after = cp.history({"0"});
  Replay r(after, 0);
  EXPECT_EQ(r.after(r.steps() - 1).allocated, 1000u);  // the held input is freed again, by the layer's last free
}

TEST(WhatIf, CheckpointedForwardFreesABlockOnceTheNextOpHasAllocated) {
  OneLayerWithBackward h;
  CheckpointPredictor cp(h.s, 0);
  Snapshot after = cp.history({"0"});
  auto at = [&](Action action, uint64_t addr) {
    for (size_t i = 0; i < after.events.size(); ++i)
      if (after.events[i].action == action && after.events[i].addr == addr) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  // 0x10 (op a) goes right after op b's alloc, 0x20 (op b) right after op c's first: 0x30.
  EXPECT_EQ(at(Action::free_requested, 0x10), at(Action::alloc, 0x20) + 1);
  EXPECT_EQ(at(Action::free_requested, 0x20), at(Action::alloc, 0x30) + 1);
}

// Backward frees 0x10 and 0x20 together, one node's saved inputs: op c takes both, so 0x10 lives as long as 0x20.
TEST(WhatIf, BlocksBackwardFreesTogetherGoTogether) {
  OneLayerWithBackward h(false, true);
  Snapshot after = CheckpointPredictor(h.s, 0).history({"0"});
  auto at = [&](Action action, uint64_t addr) {
    for (size_t i = 0; i < after.events.size(); ++i)
      if (after.events[i].action == action && after.events[i].addr == addr) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  for (uint64_t addr : {0x10, 0x20}) {  // both right after op c's first alloc
    EXPECT_GT(at(Action::free_requested, addr), at(Action::alloc, 0x30)) << addr;
    EXPECT_LT(at(Action::free_requested, addr), at(Action::alloc, 0x38)) << addr;
  }
}

// A layer whose blocks have Python stacks:
//   def forward(self, x):      # Block.forward, model.py
//       h = self.a(x)          # line 10: 0x10, a local
//       y = self.c(gelu(h))    # line 11: 0x20 by gelu (an op the line runs), a temporary; 0x30 by c, a local
//       return y + h           # line 12: 0x40, the output
// The checkpointed forward keeps each as Python does: 0x20 until c returns, the locals until the function returns.
struct PythonLayer : test::History {
  PythonLayer() {
    uint32_t fwd = scope(ScopeKind::phase, "forward", 100, 300, 0);
    uint32_t bwd = scope(ScopeKind::phase, "backward", 300, 500, 0);
    uint32_t layer = scope(ScopeKind::module, "layers.0", 100, 200, fwd);
    uint32_t a = scope(ScopeKind::module, "layers.0.a", 100, 130, layer);
    uint32_t gelu = scope(ScopeKind::op, "aten::gelu", 130, 140, layer);
    uint32_t c = scope(ScopeKind::module, "layers.0.c", 140, 160, layer);
    uint32_t add = scope(ScopeKind::op, "aten::add", 170, 180, layer);
    scope(ScopeKind::module, "layers.0", 350, 450, bwd);
    auto frame = [&](const char* function, const char* file, uint32_t line) {
      return s.frames.intern(Frame{.function = s.strings.intern(function), .file = s.strings.intern(file), .line = line});
    };
    uint32_t train = frame("train", "train.py", 3), model = frame("Model.forward", "model.py", 30);
    uint32_t linear = frame("Linear.forward", "torch/nn/modules/linear.py", 125);
    auto stack = [&](std::vector<uint32_t> inner_first) {
      inner_first.push_back(model);
      inner_first.push_back(train);
      return s.stacks.intern(inner_first);
    };
    uint32_t line10 = frame("Block.forward", "model.py", 10), line11 = frame("Block.forward", "model.py", 11);
    uint32_t line12 = frame("Block.forward", "model.py", 12);
    event(10, Action::alloc, 0x1, 1000);  // parameter
    made(110, 0x10, 100, a, stack({linear, line10}));
    made(135, 0x20, 200, gelu, stack({line11}));
    made(150, 0x30, 300, c, stack({linear, line11}));
    made(175, 0x40, 50, add, stack({line12}));
    free(305, 0x40, 50, 0);
    for (auto [t, addr, size] : {std::tuple{400, 0x30, 300}, {420, 0x20, 200}, {440, 0x10, 100}}) {
      event(t - 5, Action::alloc, 0x90 + t, 1);  // each node's gradient: one node frees each block
      free(t, addr, size, 0);
    }
  }
  void made(int64_t t, uint64_t addr, uint64_t size, uint32_t scope, uint32_t stack) {
    event(t, Action::alloc, addr, size, scope);
    Event e = s.events.back();
    e.stack = stack;
    s.events.set(s.events.size() - 1, e);
  }
};

TEST(WhatIf, CheckpointedForwardKeepsBlocksAsItsPythonStatementsDo) {
  PythonLayer h;
  Snapshot after = CheckpointPredictor(h.s, 0).history({"0"});
  auto at = [&](Action action, uint64_t addr) {
    for (size_t i = 0; i < after.events.size(); ++i)
      if (after.events[i].action == action && after.events[i].addr == addr) return static_cast<int64_t>(i);
    return int64_t{-1};
  };
  EXPECT_EQ(at(Action::free_requested, 0x20), at(Action::alloc, 0x30) + 1);  // gone once c has returned
  EXPECT_GT(at(Action::free_requested, 0x10), at(Action::alloc, 0x40));      // locals: until the function returns
  EXPECT_GT(at(Action::free_requested, 0x30), at(Action::alloc, 0x40));
}

TEST(WhatIf, OwnerRowsNameTheBlocksTheyNamedAsRecorded) {
  for (bool in_time_order : {true, false}) {
    TwoLayers h;
    // Layer 1's first activation is named right after its alloc (event 4), on a CPU history (no start state), where
    // a row naming no live block is taken for a block older than the recording. Checkpointing layer 0 adds its early
    // frees before that alloc: the row must still come after the alloc, or its bytes would count twice.
    uint32_t name = h.s.strings.intern("buf");
    h.s.owners.push_back(Owner{.time_ns = 211, .event = 5, .addr = 0x40, .size = 300, .name = name});
    if (!in_time_order) h.event(1, Action::alloc, 0x90, 1);  // recorded last, the first in time: held throughout
    auto p = predict_checkpoint(h.s, 0, {"0"});
    uint64_t extra = in_time_order ? 0 : 1;
    EXPECT_EQ(p.recorded_peak, 2118u) << in_time_order;  // as recorded, the 1 byte comes after the peak
    EXPECT_EQ(p.predicted_peak, 1818u + extra) << in_time_order;
  }
}

TEST(WhatIf, UnknownLayersAndMissingScopesAreErrors) {
  TwoLayers h;
  EXPECT_THROW(predict_checkpoint(h.s, 0, {"7"}), Error);
  Snapshot bare;
  bare.events.push_back(Event{.time_ns = 1, .addr = 1, .size = 1});
  EXPECT_THROW(predict_checkpoint(bare, 0, {}), Error);
}

}  // namespace
}  // namespace memrec
