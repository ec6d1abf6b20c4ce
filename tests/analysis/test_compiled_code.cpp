// Code that torch.compile generated, mapped back to the model through the recording's "compiled_code" metadata:
// the stacks gain the model's source frames, the blocks the FX node's module, as eager code has them.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

using test::TempDir;

constexpr const char* kGenerated = "/tmp/torchinductor_u/ab/cabc.py";

struct Compiled {
  Snapshot s;
  uint32_t generated_frame = 0;
};

uint32_t frame(Snapshot& s, const std::string& function, const std::string& file, uint32_t line,
               const std::string& library = "") {
  return s.frames.intern(Frame{.pc = 0, .function = s.strings.intern(function), .file = s.strings.intern(file),
                               .library = library.empty() ? 0 : s.strings.intern(library), .line = line});
}

uint32_t scope(Snapshot& s, const std::string& name, ScopeKind kind, uint32_t parent) {
  s.scopes.push_back(Scope{.start_ns = 0, .end_ns = 1000, .name = s.strings.intern(name), .parent = parent,
                           .kind = kind, .device = 0});
  return static_cast<uint32_t>(s.scopes.size() - 1);
}

// One allocation by the generated code at `line` (a buffer of the compiled forward), run under `module_scopes`
// (outermost first), and one by eager code.
Snapshot compiled_run(uint32_t line, const std::vector<std::string>& module_scopes, const std::string& map) {
  Snapshot s;
  uint32_t op = frame(s, "at::empty_strided", "", 0, "libtorch_cuda.so");
  uint32_t generated = frame(s, "call", kGenerated, line);
  uint32_t user = frame(s, "train", "train.py", 12);
  uint32_t compiled = s.stacks.intern(std::vector<uint32_t>{op, generated, user});
  uint32_t eager = s.stacks.intern(std::vector<uint32_t>{op, user});
  uint32_t parent = 0;
  for (const std::string& m : module_scopes) parent = scope(s, m, ScopeKind::module, parent);
  s.events.push_back(Event{.time_ns = 10, .addr = 0x1000, .size = 4096, .stack = compiled, .scope = parent});
  s.events.push_back(Event{.time_ns = 20, .addr = 0x3000, .size = 512, .stack = eager, .scope = parent});
  s.metadata["compiled_code"] = map;
  return s;
}

const std::string kMap = std::string(R"({")") + kGenerated + R"(": [
  [100, ["transformer", "transformer.h.3", "transformer.h.3.attn"], "addmm_7",
   [["model.py", 30, "Attention.forward"], ["model.py", 44, "Block.forward"]]],
  [130, [], "output", []]]})";

Snapshot reread(const Snapshot& s) {
  TempDir tmp;
  write_file(s, tmp / "c.memrec");
  return load_snapshot(tmp / "c.memrec", nullptr);
}

TEST(CompiledCode, BlocksNameTheModelsLineAndTheNodesModule) {
  Snapshot s = reread(compiled_run(120, {"GPT2LMHeadModel"}, kMap));
  Event buffer = s.events[0], eager = s.events[1];
  EXPECT_EQ(allocation_site(s, buffer.stack), "Attention.forward (model.py:30) via at::empty_strided");
  EXPECT_EQ(enclosing_scope(s, buffer.scope, ScopeKind::module), "transformer.h.3.attn");
  EXPECT_EQ(layer_of(enclosing_scope(s, buffer.scope, ScopeKind::module)), "transformer.h.3");
  std::vector<std::string> outer;  // nested as eager calls nest, in the module that ran the code
  for (uint32_t sc = s.scopes[buffer.scope].parent; sc != 0; sc = s.scopes[sc].parent)
    outer.push_back(s.strings[s.scopes[sc].name]);
  EXPECT_EQ(outer, (std::vector<std::string>{"transformer.h.3", "transformer", "GPT2LMHeadModel"}));
  EXPECT_EQ(enclosing_scope(s, eager.scope, ScopeKind::module), "GPT2LMHeadModel");
  EXPECT_EQ(allocation_site(s, eager.stack), "train (train.py:12) via at::empty_strided");
  EXPECT_TRUE(s.warnings.empty());
}

TEST(CompiledCode, ACompiledSubmodulePrefixesTheNodesModule) {
  Snapshot s = reread(compiled_run(100, {"Model", "blocks.2"}, R"({")" + std::string(kGenerated) +
                                            R"(": [[90, ["attn"], "mm", [["model.py", 30, "Attention.forward"]]]]})"));
  EXPECT_EQ(enclosing_scope(s, s.events[0].scope, ScopeKind::module), "blocks.2.attn");
}

// DDP around a compiled model, as the recorder names its scopes: the DDP and OptimizedModule wrappers share the
// root's name; DDPOptimizer's split graph runs as a `GraphModule` and each piece in a `WrapperModule`, or, when the
// split graph is the outermost module, as its attribute `compiled_submod_N`. None of them prefixes the nodes'
// modules, which are the model's paths already.
TEST(CompiledCode, ASplitGraphsPiecesAreNoPrefix) {
  for (const std::vector<std::string>& scopes :
       {std::vector<std::string>{"GPT", "GPT", "GraphModule", "WrapperModule"},  // DDP(torch.compile(model))
        std::vector<std::string>{"GPT", "GPT"},  // one bucket: no split
        std::vector<std::string>{"GraphModule", "compiled_submod_1"}}) {
    Snapshot s = reread(compiled_run(120, scopes, kMap));
    std::string module = enclosing_scope(s, s.events[0].scope, ScopeKind::module);
    EXPECT_EQ(module, "transformer.h.3.attn") << scopes.back();
    EXPECT_EQ(layer_of(module), "transformer.h.3");
    for (uint32_t id = 1; id < s.scopes.size(); ++id)  // the pieces take the name of the module they run in
      EXPECT_TRUE(s.strings[s.scopes[id].name] != "WrapperModule" &&
                  s.strings[s.scopes[id].name] != "compiled_submod_1") << s.strings[s.scopes[id].name];
  }
}

// DDP around a 12-layer GPT compiled whole, recorded on an H200 (PyTorch 2.11; tests/data/ddp_gpt_h200.memrec):
// DDP's optimizer cut the graph into a piece per gradient bucket, and the pieces of blocks 0 .. 10 (each a block's
// attention and MLP, and the next block's ln_1) ran one generated file, whose map names block 0's modules (three of
// its rows here, as recorded). The recorder named each piece and noted its nodes' modules, as recorded: the pieces
// of blocks 1 .. 10 list one module more than block 0's, the block before (a node of it), so the maker's modules
// and theirs are not at the same places. Each piece's buffers are its own block's.
const std::string kSharedPiece = R"(/tmp/layers/inductor/ub/cubdini7z6houtuygij5b3yhc2mmlanrpozv5jk6a4tk5sdk2j2a.py)";
const std::string kSharedPieceMap = R"({"/tmp/layers/inductor/ub/cubdini7z6houtuygij5b3yhc2mmlanrpozv5jk6a4tk5sdk2j2a.py": [[323, ["transformer.h.0", "transformer.h.0.attn", "transformer.h.0.attn.c_attn"], "addmm", [["/tmp/layers/layers_gpt.py", 14, "forward"], ["/tmp/layers/layers_gpt.py", 35, "forward"], ["/tmp/layers/layers_gpt.py", 49, "forward"]]], [354, ["transformer.h.0", "transformer.h.0.mlp", "transformer.h.0.mlp.c_fc"], "addmm_2", [["/tmp/layers/layers_gpt.py", 26, "forward"], ["/tmp/layers/layers_gpt.py", 36, "forward"], ["/tmp/layers/layers_gpt.py", 49, "forward"]]], [365, ["transformer.h.1", "transformer.h.1.ln_1"], "add_6", [["/tmp/layers/layers_gpt.py", 35, "forward"], ["/tmp/layers/layers_gpt.py", 49, "forward"]]]]})";
const std::string kPieces = R"({"compiled_submod_0": ["transformer.wte", "transformer.wpe", "transformer.h.0", "transformer.h.0.ln_1"], "compiled_submod_1": ["transformer.h.0", "transformer.h.0.ln_1", "transformer.h.0.attn", "transformer.h.0.attn.c_attn", "transformer.h.0.attn.c_proj", "transformer.h.0.ln_2", "transformer.h.0.mlp", "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj", "transformer.h.1", "transformer.h.1.ln_1"], "compiled_submod_2": ["transformer.h.1", "transformer.h.1.ln_1", "transformer.h.1.attn", "transformer.h.1.attn.c_attn", "transformer.h.1.attn.c_proj", "transformer.h.0", "transformer.h.1.ln_2", "transformer.h.1.mlp", "transformer.h.1.mlp.c_fc", "transformer.h.1.mlp.c_proj", "transformer.h.2", "transformer.h.2.ln_1"], "compiled_submod_3": ["transformer.h.2", "transformer.h.2.ln_1", "transformer.h.2.attn", "transformer.h.2.attn.c_attn", "transformer.h.2.attn.c_proj", "transformer.h.1", "transformer.h.2.ln_2", "transformer.h.2.mlp", "transformer.h.2.mlp.c_fc", "transformer.h.2.mlp.c_proj", "transformer.h.3", "transformer.h.3.ln_1"]})";

Snapshot split_graph_run(bool pieces_noted) {
  Snapshot s;
  uint32_t op = frame(s, "torch::dynamo::_empty_strided_device", "", 0, "libtorch_python.so");
  uint32_t user = frame(s, "<module>", "/tmp/layers/layers_gpt.py", 76);
  uint32_t split = scope(s, "GraphModule", ScopeKind::module, scope(s, "GPT", ScopeKind::module, 0));
  for (int block = 0; block < 3; ++block) {
    std::string name = "compiled_submod_" + std::to_string(block + 1);
    uint32_t run = scope(s, "CompiledFunction", ScopeKind::op, scope(s, name, ScopeKind::module, split));
    for (uint32_t line : {354u, 366u}) {  // the MLP's c_fc (96 MiB), the next block's ln_1 (24 MiB)
      uint32_t stack = s.stacks.intern(std::vector<uint32_t>{op, frame(s, "call", kSharedPiece, line), user});
      s.events.push_back(Event{.time_ns = 100 * block + line, .addr = 0x1000 * (s.events.size() + 1),
                               .size = line == 354 ? 100663296u : 25165824u, .stack = stack, .scope = run});
    }
  }
  s.metadata["compiled_code"] = kSharedPieceMap;
  if (pieces_noted) s.metadata["compiled_pieces"] = kPieces;
  return s;
}

TEST(CompiledCode, EachPieceOfASplitGraphOwnsTheCodeItRan) {
  Snapshot s = reread(split_graph_run(true));
  std::vector<std::string> modules;
  for (const Event& e : s.events) modules.push_back(enclosing_scope(s, e.scope, ScopeKind::module));
  EXPECT_EQ(modules, (std::vector<std::string>{"transformer.h.0.mlp.c_fc", "transformer.h.1.ln_1",
                                                "transformer.h.1.mlp.c_fc", "transformer.h.2.ln_1",
                                                "transformer.h.2.mlp.c_fc", "transformer.h.3.ln_1"}));
  EXPECT_TRUE(s.warnings.empty());

  Snapshot again = reread(s);  // resolving the resolved file changes nothing
  EXPECT_EQ(again.scopes.size(), s.scopes.size());
  for (size_t i = 0; i < s.events.size(); ++i) EXPECT_EQ(again.events[i].scope, s.events[i].scope) << i;

  Snapshot unnoted = reread(split_graph_run(false));  // without the pieces' modules: the map's, block 0's
  for (const Event& e : unnoted.events)
    EXPECT_TRUE(layer_of(enclosing_scope(unnoted, e.scope, ScopeKind::module)) == "transformer.h.0" ||
                layer_of(enclosing_scope(unnoted, e.scope, ScopeKind::module)) == "transformer.h.1");
}

// A user's own submodule called `submod_0` is no piece: only a split graph's are.
TEST(CompiledCode, AUsersSubmodNamedLikeAPieceKeepsItsPath) {
  Snapshot s = reread(compiled_run(100, {"Model", "submod_0"}, R"({")" + std::string(kGenerated) +
                                            R"(": [[90, ["attn"], "mm", [["model.py", 30, "Attention.forward"]]]]})"));
  EXPECT_EQ(enclosing_scope(s, s.events[0].scope, ScopeKind::module), "submod_0.attn");
}

TEST(CompiledCode, LinesBeforeTheMapOrWithoutSourceStayAsRecorded) {
  for (uint32_t line : {50u, 140u}) {
    Snapshot s = reread(compiled_run(line, {"GPT2LMHeadModel"}, kMap));
    EXPECT_EQ(s.stacks[s.events[0].stack].size(), 3u) << line;
    EXPECT_EQ(enclosing_scope(s, s.events[0].scope, ScopeKind::module), "GPT2LMHeadModel") << line;
  }
}

TEST(CompiledCode, ResolvingTwiceChangesNothing) {
  Snapshot once = reread(compiled_run(120, {"GPT2LMHeadModel"}, kMap));
  Snapshot twice = reread(once);
  EXPECT_TRUE(twice.stacks == once.stacks);
  EXPECT_EQ(twice.scopes.size(), once.scopes.size());
  EXPECT_EQ(twice.events[0].scope, once.events[0].scope);
}

TEST(CompiledCode, AnUnreadableMapIsNotedAndLeftOut) {
  for (const std::string& map :
       {std::string("{\"") + kGenerated + "\": [[\"x\"]]}", std::string("[1, 2"), std::string("7")}) {
    Snapshot s = reread(compiled_run(120, {"GPT2LMHeadModel"}, map));
    EXPECT_EQ(s.stacks[s.events[0].stack].size(), 3u) << map;
    ASSERT_EQ(s.warnings.size(), 1u) << map;
    EXPECT_NE(s.warnings[0].find("compiled code"), std::string::npos) << s.warnings[0];
  }
}

// GPT-2 (124M) under torch.compile, recorded on an H100 (PyTorch 2.11) by bench/owners_models.py: at the peak, every
// layer holds its activations, and only the program's own input ids (64 KiB) are outside every module.
TEST(CompiledCode, CompiledGpt2RecordedOnAnH100NamesItsTwelveLayers) {
  auto r = test::run_command(std::string(MEMREC_BINARY) + " stats " + test::data("gpt2_compile_h100.memrec") +
                             " --by layer --json --top 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json stats = nlohmann::json::parse(r.output);
  std::map<std::string, uint64_t> activations, bytes;
  for (const auto& g : stats["live"]) {
    activations[g["key"]] = g["categories"].value("activation", uint64_t{0});
    bytes[g["key"]] = g["bytes"];
  }
  EXPECT_LE(bytes["<none>"], uint64_t{8 * 1024 * 8 + 4});  // the batch of token ids (8 x 1024 int64) and a scalar
  for (int layer = 0; layer < 12; ++layer)
    EXPECT_GT(activations["transformer.h." + std::to_string(layer)], uint64_t{400} << 20) << layer;
  auto info = test::run_command(std::string(MEMREC_BINARY) + " info " + test::data("gpt2_compile_h100.memrec"));
  EXPECT_NE(info.output.find("compiled_code          ("), std::string::npos) << "the map is summed up, not printed";
}

}  // namespace
}  // namespace memrec
