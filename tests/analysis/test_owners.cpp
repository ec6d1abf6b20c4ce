// Owners (Snapshot::owners) on histories built by hand: the replay attaches each row to the block live at its
// address, the block takes the owner's category, and --by module, layer and owner file it under the owner.
#include <gtest/gtest.h>

#include "analysis/history.h"
#include "memrec/analysis.h"

namespace memrec {
namespace {

// Parameters before the phases, a forward under module net.2, a backward whose gradient buffer was allocated under
// net.2's backward scope but belongs to net.0.weight, and Adam's state.
struct OwnedStep : test::History {
  void own(uint64_t addr, uint64_t size, const std::string& name, const std::string& module, OwnerKind kind) {
    s.owners.push_back(Owner{.time_ns = 0, .event = s.events.size(), .addr = addr, .size = size,
                             .name = s.strings.intern(name), .module = module.empty() ? 0 : s.strings.intern(module),
                             .kind = kind});
  }

  OwnedStep() {
    uint32_t fwd = scope(ScopeKind::phase, "forward", 100, 200);
    uint32_t bwd = scope(ScopeKind::phase, "backward", 200, 300);
    uint32_t opt = scope(ScopeKind::phase, "optimizer", 300, 400);
    uint32_t net2 = scope(ScopeKind::module, "net.2", 110, 190, fwd);
    uint32_t net2_back = scope(ScopeKind::module, "net.2", 210, 250, bwd);
    event(10, Action::alloc, 0x1000, 2048);             // net.0.weight
    event(20, Action::alloc, 0x2000, 128);              // net.0.bias
    own(0x1000, 2048, "net.0.weight", "net.0", OwnerKind::parameter);
    own(0x2000, 128, "net.0.bias", "net.0", OwnerKind::parameter);
    event(120, Action::alloc, 0x3000, 4000, net2);      // activation of net.2
    event(220, Action::alloc, 0x4000, 2048, net2_back); // net.0.weight's gradient, allocated under net.2
    free(260, 0x3000, 4000);
    own(0x4000, 2048, "net.0.weight.grad", "net.0", OwnerKind::gradient);
    event(310, Action::alloc, 0x5000, 2048, opt);       // exp_avg
    event(320, Action::alloc, 0x6000, 2048, opt);       // exp_avg_sq
    own(0x5000, 2048, "net.0.weight.exp_avg", "net.0", OwnerKind::optimizer_state);
    own(0x6000, 2048, "net.0.weight.exp_avg_sq", "net.0", OwnerKind::optimizer_state);
    own(0x6000, 2048, "net.0.weight.exp_avg_sq_view", "net.0", OwnerKind::optimizer_state);  // a second name
  }
};

uint32_t id_at(const Replay& r, uint64_t addr) {
  for (uint32_t id = 0; id < r.allocations().size(); ++id)
    if (r.allocations()[id].addr == addr) return id;
  ADD_FAILURE() << "no block at " << addr;
  return 0;
}

const Group* find(const std::vector<Group>& groups, const std::string& key) {
  for (const Group& g : groups)
    if (g.key == key) return &g;
  return nullptr;
}

TEST(Owners, TheReplayAttachesEachRowToTheBlockLiveAtItsAddress) {
  OwnedStep t;
  Replay r(t.s, 0);
  EXPECT_TRUE(r.has_owners());
  EXPECT_EQ(r.unresolved_owners(), 0u);
  EXPECT_EQ(t.s.strings[t.s.owners[r.owner_of(id_at(r, 0x1000))].name], "net.0.weight");
  EXPECT_EQ(t.s.strings[t.s.owners[r.owner_of(id_at(r, 0x4000))].name], "net.0.weight.grad");
  EXPECT_EQ(r.owner_of(id_at(r, 0x3000)), kNoOwner);
  EXPECT_EQ(r.owner_names(id_at(r, 0x3000)), 0u);
  // Two names on one block: the first is kept, the other counted.
  uint32_t state = id_at(r, 0x6000);
  EXPECT_EQ(t.s.strings[t.s.owners[r.owner_of(state)].name], "net.0.weight.exp_avg_sq");
  EXPECT_EQ(r.owner_names(state), 2u);
  EXPECT_EQ(owner_label(t.s, r, state), "net.0.weight.exp_avg_sq (+1)");
}

TEST(Owners, AnOwnerDecidesTheCategory) {
  OwnedStep t;
  Replay r(t.s, 0);
  auto c = categorize(t.s, r);
  EXPECT_EQ(c[id_at(r, 0x1000)], Category::parameter);
  EXPECT_EQ(c[id_at(r, 0x3000)], Category::activation);
  EXPECT_EQ(c[id_at(r, 0x4000)], Category::gradient);
  EXPECT_EQ(c[id_at(r, 0x5000)], Category::optimizer_state);
  EXPECT_EQ(category_of(OwnerKind::buffer), Category::parameter);
}

TEST(Owners, ModuleLayerAndOwnerGroupsFollowTheOwner) {
  OwnedStep t;
  Replay r(t.s, 0);
  uint32_t last = r.steps() - 1;
  auto modules = group_live(t.s, r, last, GroupBy::module);
  const Group* net0 = find(modules, "net.0");
  ASSERT_NE(net0, nullptr);
  EXPECT_EQ(net0->bytes, 2048u + 128 + 2048 + 2048 + 2048);  // the gradient allocated under net.2 included
  EXPECT_EQ(net0->owned, net0->bytes);
  EXPECT_EQ(net0->by_category[static_cast<size_t>(Category::gradient)], 2048u);
  EXPECT_EQ(find(modules, "<none>"), nullptr);
  EXPECT_EQ(find(modules, "net.2"), nullptr);  // its activation was freed

  auto layers = group_live(t.s, r, last, GroupBy::layer);
  ASSERT_NE(find(layers, "net.0"), nullptr);
  EXPECT_EQ(find(layers, "net.0")->bytes, net0->bytes);

  auto owners = group_live(t.s, r, last, GroupBy::owner);
  ASSERT_NE(find(owners, "net.0.weight.grad"), nullptr);
  EXPECT_EQ(find(owners, "net.0.weight.grad")->bytes, 2048u);
  EXPECT_NE(find(owners, "net.0.weight.exp_avg_sq (+1)"), nullptr);

  // At the forward's peak the activation has no owner: it stays under the scope it was allocated in.
  auto at_forward = group_live(t.s, r, 2, GroupBy::module);
  ASSERT_NE(find(at_forward, "net.2"), nullptr);
  EXPECT_EQ(find(at_forward, "net.2")->owned, 0u);
  EXPECT_EQ(find(group_live(t.s, r, 2, GroupBy::owner), "<none>")->bytes, 4000u);
}

TEST(Owners, AnOwnerWithoutModuleKeepsTheScopeItWasAllocatedIn) {
  OwnedStep t;
  uint32_t net2 = 4;
  t.event(500, Action::alloc, 0x7000, 64, net2);
  t.own(0x7000, 64, "SGD.param_groups.0.4", "", OwnerKind::parameter);
  Replay r(t.s, 0);
  uint32_t last = r.steps() - 1;
  EXPECT_NE(find(group_live(t.s, r, last, GroupBy::module), "net.2"), nullptr);
  EXPECT_EQ(categorize(t.s, r)[id_at(r, 0x7000)], Category::parameter);
  EXPECT_NE(find(group_live(t.s, r, last, GroupBy::owner), "SGD.param_groups.0.4"), nullptr);
}

// CPU recordings have no start state: a tensor made before the recording is a block the events never allocated.
TEST(Owners, OnTheCpuARowOnAnUnknownAddressIsABlockLiveSinceTheStart) {
  OwnedStep t;
  t.own(0x9000, 4096, "emb.weight", "emb", OwnerKind::parameter);
  t.event(600, Action::alloc, 0xA000, 100);
  t.free(700, 0x9000, 4096);  // the recorder gives the free its size once the row named the block
  Replay r(t.s, 0);
  uint32_t id = id_at(r, 0x9000);
  Allocation a = r.allocation(id);
  EXPECT_EQ(a.alloc_step, kNoEvent);
  EXPECT_NE(a.free_step, kNoEvent);
  EXPECT_EQ(r.unmatched_frees(), 0u);
  EXPECT_EQ(r.initial().allocated, 4096u);
  EXPECT_EQ(t.s.strings[t.s.owners[r.owner_of(id)].name], "emb.weight");
  EXPECT_EQ(r.after(r.steps() - 1).allocated, r.after(r.steps() - 3).allocated - 4096);
  EXPECT_EQ(r.unresolved_owners(), 0u);
  // Pre-existing blocks come first, by address, and keep their owners through that ordering.
  t.own(0x500, 16, "a.b", "a", OwnerKind::buffer);
  Replay r2(t.s, 0);
  EXPECT_EQ(r2.allocation(0).addr, 0x500u);
  EXPECT_EQ(t.s.strings[t.s.owners[r2.owner_of(0)].name], "a.b");
  EXPECT_EQ(t.s.strings[t.s.owners[r2.owner_of(1)].name], "emb.weight");
  EXPECT_EQ(t.s.strings[t.s.owners[r2.owner_of(id_at(r2, 0x1000))].name], "net.0.weight");
}

TEST(Owners, WithAKnownStartStateAnUnknownAddressIsUnresolved) {
  OwnedStep t;
  t.s.has_segments_start = true;
  t.own(0x9000, 4096, "emb.weight", "emb", OwnerKind::parameter);
  Replay r(t.s, 0);
  EXPECT_EQ(r.unresolved_owners(), 1u);
  EXPECT_EQ(r.initial().allocated, 0u);
}

TEST(Owners, RowsOfAnotherDeviceAreNotThisOnes) {
  OwnedStep t;
  Owner o = t.s.owners[0];
  o.device = 1;
  t.s.owners.push_back(o);
  Replay r(t.s, 0);
  EXPECT_EQ(r.owner_names(id_at(r, 0x1000)), 1u);
}

// A recompute (or a reentrant backward) inside backward: after it ends, time is backward's again.
TEST(Owners, PhasesNestAndARecomputeKeepsItsActivations) {
  Snapshot s;
  auto scope = [&](const char* name, int64_t start, int64_t end) {
    s.scopes.push_back(Scope{start, end, s.strings.intern(name), 0, ScopeKind::phase, 0});
  };
  scope("forward", 0, 90);
  scope("backward", 100, 200);
  scope("recompute", 140, 160);
  auto event = [&](int64_t t, Action a, uint64_t addr) {
    s.events.push_back(Event{.time_ns = t, .addr = addr, .size = 10, .action = a});
  };
  event(150, Action::alloc, 0x1);  // recomputed activation, used by the backward after the recompute
  event(155, Action::alloc, 0x2);  // recompute temporary
  event(158, Action::free_requested, 0x2);
  event(170, Action::alloc, 0x3);  // gradient allocated in backward after the recompute
  event(180, Action::free_requested, 0x1);
  event(300, Action::alloc, 0x4);  // after every phase
  PhaseIndex phases(s, 0);
  EXPECT_EQ(phases.kind(phases.at(150)), PhaseKind::recompute);
  EXPECT_EQ(phases.kind(phases.at(170)), PhaseKind::backward);
  EXPECT_EQ(phases.kind(phases.at(120)), PhaseKind::backward);
  EXPECT_EQ(phases.at(95), 0u);
  EXPECT_EQ(phases.at(300), 0u);
  EXPECT_EQ(to_string(PhaseKind::recompute), "recompute");
  Replay r(s, 0);
  auto c = categorize(s, r);
  EXPECT_EQ(c[0], Category::activation);
  EXPECT_EQ(c[1], Category::temporary);
  EXPECT_EQ(c[2], Category::gradient);
}

}  // namespace
}  // namespace memrec
