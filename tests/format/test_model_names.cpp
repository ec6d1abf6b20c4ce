// The model's own names at read time: names an older recorder wrote with the wrappers' parts (DDP's `module.`,
// torch.compile's `_orig_mod.`, checkpoint wrappers', inductor's WrapperModule) are read as the model's paths, in
// module scopes, layers and owners alike; and a real H100 recording of compiled GPT-2 names its twelve blocks so, and
// cuBLAS's workspaces as what they are.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/model_names.h"

namespace memrec {
namespace {

TEST(ModelNames, WrapperPartsAreLeftOut) {
  EXPECT_EQ(model_path("module.blocks.0._checkpoint_wrapped_module.fc1.weight", true), "blocks.0.fc1.weight");
  EXPECT_EQ(model_path("module._orig_mod.transformer.h.0", true), "transformer.h.0");
  EXPECT_EQ(model_path("_orig_mod.module.transformer.h.0", true), "transformer.h.0");
  EXPECT_EQ(model_path("WrapperModule.transformer.h.3.attn", false), "transformer.h.3.attn");
  EXPECT_EQ(model_path("L['self'].transformer.h.3", false), "transformer.h.3");
  EXPECT_EQ(model_path("_fsdp_wrapped_module.layers.0._fsdp_wrapped_module.attn", false), "layers.0.attn");
  EXPECT_EQ(model_path("module", true), "");
}

TEST(ModelNames, UserModulesCalledModuleKeepTheirNames) {
  EXPECT_EQ(model_path("module.blocks.0", false), "module.blocks.0");          // no data-parallel wrapper
  EXPECT_EQ(model_path("module.blocks.0.module.fc1", true), "blocks.0.module.fc1");  // only the wrapper's, in front
  EXPECT_EQ(model_path("blocks.0.fc1.weight.exp_avg", false), "blocks.0.fc1.weight.exp_avg");
}

uint32_t scope(Snapshot& s, const std::string& name, uint32_t parent) {
  s.scopes.push_back(Scope{.start_ns = 0, .end_ns = 10, .name = s.strings.intern(name), .parent = parent,
                           .kind = ScopeKind::module, .device = 0});
  return static_cast<uint32_t>(s.scopes.size() - 1);
}

std::string name_of(const Snapshot& s, uint32_t id) { return s.strings[s.scopes[id].name]; }

// A DDP-wrapped model with checkpoint-wrapped blocks as an older recorder named it, and a compiled graph's piece.
TEST(ModelNames, OlderRecordingsReadAsTheModelsPaths) {
  Snapshot s;
  uint32_t ddp = scope(s, "DistributedDataParallel", 0), inner = scope(s, "module", ddp),
           wrapper = scope(s, "module.blocks.0", inner),
           block = scope(s, "module.blocks.0._checkpoint_wrapped_module", wrapper),
           fc1 = scope(s, "module.blocks.0._checkpoint_wrapped_module.fc1", block),
           piece = scope(s, "WrapperModule", inner), compiled = scope(s, "WrapperModule.blocks.1.fc1", piece),
           plain = scope(s, "Plain", 0), user = scope(s, "module.fc", plain);
  s.owners.push_back(Owner{.time_ns = 0, .event = 0, .addr = 0x1000, .size = 64,
                           .name = s.strings.intern("module.blocks.0._checkpoint_wrapped_module.fc1.weight.exp_avg"),
                           .module = s.strings.intern("module.blocks.0._checkpoint_wrapped_module.fc1"),
                           .kind = OwnerKind::optimizer_state, .device = 0});
  name_modules_by_model_path(s);
  EXPECT_EQ(name_of(s, ddp), "DistributedDataParallel");  // a root: the whole model's name
  EXPECT_EQ(name_of(s, inner), "DistributedDataParallel");
  EXPECT_EQ(name_of(s, wrapper), "blocks.0");
  EXPECT_EQ(name_of(s, block), "blocks.0");
  EXPECT_EQ(name_of(s, fc1), "blocks.0.fc1");
  EXPECT_EQ(name_of(s, piece), "DistributedDataParallel");
  EXPECT_EQ(name_of(s, compiled), "blocks.1.fc1");
  EXPECT_EQ(name_of(s, user), "module.fc");  // under no data-parallel root
  EXPECT_EQ(s.strings[s.owners[0].name], "blocks.0.fc1.weight.exp_avg");
  EXPECT_EQ(s.strings[s.owners[0].module], "blocks.0.fc1");
  EXPECT_EQ(layer_of(name_of(s, fc1)), "blocks.0");

  Snapshot again = s;
  name_modules_by_model_path(again);
  EXPECT_TRUE(again.scopes == s.scopes && again.owners == s.owners);
}

// HF GPT-2 under torch.compile, recorded on an H100 (PyTorch 2.11): the blocks' compiled code is named by the
// model's paths, transformer.h.0 .. 11, and no layer carries a wrapper's part.
TEST(ModelNames, CompiledGpt2LayersAreTheModelsBlocks) {
  Snapshot s = load_snapshot(test::data("gpt2_compile_h100.memrec"));
  std::vector<std::string> layers = run_layers(s, 0);
  for (int i = 0; i < 12; ++i)
    EXPECT_NE(std::find(layers.begin(), layers.end(), "transformer.h." + std::to_string(i)), layers.end()) << i;
  for (const std::string& l : layers)
    for (const char* part : {"_orig_mod", "WrapperModule", "L['self']", "module."})
      EXPECT_EQ(l.find(part), std::string::npos) << l;
}

// The same H100 recording: cuBLAS's workspaces (32 MiB for each of the forward's and backward's streams, cuBLASLt's
// 1 MiB; each made by the first matmul there and kept) are owned by "cublas workspace", a row of its own at the
// peak, not activations of the model or of transformer.h.0; a file written from the read recording and read again
// has the same owners.
TEST(ModelNames, CublasWorkspacesAreNamedForWhatTheyAre) {
  Snapshot s = load_snapshot(test::data("gpt2_compile_h100.memrec"));
  uint64_t owned = 0;
  for (const Owner& o : s.owners)
    if (s.strings[o.name] == "cublas workspace") owned += o.size;
  EXPECT_EQ(owned, (65u << 20));
  Replay r(s, 0);
  std::map<std::string, Group> layers;
  for (Group& g : group_live(s, r, r.peak_allocated().step, GroupBy::layer)) layers[g.key] = std::move(g);
  ASSERT_TRUE(layers.count("cublas workspace"));
  EXPECT_EQ(layers["cublas workspace"].bytes, owned);
  EXPECT_EQ(layers["cublas workspace"].by_category[static_cast<size_t>(Category::activation)], 0u);
  EXPECT_LT(layers["GPT2LMHeadModel"].by_category[static_cast<size_t>(Category::activation)], 1u << 20);
  EXPECT_LT(layers["transformer.h.0"].by_category[static_cast<size_t>(Category::activation)],
            layers["transformer.h.1"].by_category[static_cast<size_t>(Category::activation)] * 11 / 10);

  test::TempDir tmp;
  write_file(s, tmp / "again.memrec");
  Snapshot again = load_snapshot(tmp / "again.memrec");
  EXPECT_TRUE(again.owners == s.owners);
}

// The state just before the marker block a program allocates (`layers_gpt.py` of bench/layers_check.py: 12345 x 512
// bytes, right after its last forward).
std::map<std::string, Group> layers_before_marker(const Snapshot& s) {
  Replay r(s, 0);
  uint32_t step = 0;
  while (step < r.steps() && !(r.event(step).action == Action::alloc && r.event(step).size == 12345 * 512)) ++step;
  EXPECT_LT(step, r.steps()) << "no marker block";
  std::map<std::string, Group> layers;
  for (Group& g : group_live(s, r, step - 1, GroupBy::layer)) layers[g.key] = std::move(g);
  return layers;
}

// A 12-layer GPT under FSDP2 (fully_shard per block and root, one rank), recorded on an H200 (PyTorch 2.11) by
// bench/layers_check.py: at the end of the last forward the root's parameters stay unsharded (wte, lm_head 24 MiB
// each, wpe 3 MiB, ln_f), in storages PyTorch gives their bytes back with alloc_storage before the all-gather:
// they are "fsdp all-gather" parameters, not the root's activations.
TEST(ModelNames, Fsdp2UnshardedParametersAreTheAllGathers) {
  Snapshot s = load_snapshot(test::data("fsdp2_gpt_h200.memrec"));
  std::map<std::string, Group> layers = layers_before_marker(s);
  ASSERT_TRUE(layers.count("fsdp all-gather"));
  const Group& gathered = layers["fsdp all-gather"];
  EXPECT_EQ(gathered.by_category[static_cast<size_t>(Category::parameter)], gathered.bytes);
  EXPECT_GT(gathered.bytes, uint64_t{51} << 20);
  EXPECT_LT(gathered.bytes, uint64_t{52} << 20);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(layers["transformer.h." + std::to_string(i)].by_category[static_cast<size_t>(Category::activation)],
              uint64_t{3076} << 17) << i;  // 384.5 MiB each, as every layer's saved activations
}

// A 12-layer GPT compiled whole in DDP (one rank on NCCL), recorded on an H200 (PyTorch 2.11) by
// bench/layers_check.py: DDP's optimizer cut the graph into a piece per gradient bucket, and the pieces of blocks
// 0 .. 10 ran one generated file, made for block 0's. At the end of the last forward each block holds its own
// saved activations (384.5 MiB each, as in eager); block 0 holds the embeddings' sum too, which the code fused into
// its ln_1.
TEST(ModelNames, DdpSplitGraphsPiecesOwnTheirBlocks) {
  Snapshot s = load_snapshot(test::data("ddp_gpt_h200.memrec"));
  std::map<std::string, Group> layers = layers_before_marker(s);
  auto activations = [&](int i) {
    return layers["transformer.h." + std::to_string(i)].by_category[static_cast<size_t>(Category::activation)];
  };
  uint64_t sum = 0;
  for (int i = 0; i < 12; ++i) sum += activations(i);
  for (int i = 0; i < 12; ++i) {
    EXPECT_LT(std::max(activations(i), sum / 12) - std::min(activations(i), sum / 12), sum / 120) << i;
    if (i > 1) EXPECT_EQ(activations(i), activations(1)) << i;  // the same code, its own buffers
  }
}

}  // namespace
}  // namespace memrec
