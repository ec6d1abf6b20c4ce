// Names from recorded Python programs: the layer of any model's module path, and sites that lead to user code.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "memrec/analysis.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

TEST(PythonNames, LayerIsThePathUpToTheFirstNumericComponent) {
  EXPECT_EQ(layer_of("layers.3.self_attn.out_proj"), "layers.3");
  EXPECT_EQ(layer_of("transformer.h.11.attn.c_attn"), "transformer.h.11");
  EXPECT_EQ(layer_of("model.blocks.2.mlp.0"), "model.blocks.2");  // the Sequential index is inner
  EXPECT_EQ(layer_of("h.0"), "h.0");
  EXPECT_EQ(layer_of("encoder.attn.proj"), "encoder.attn");  // nothing repeated: the first two components
  EXPECT_EQ(layer_of("lm_head"), "lm_head");
  EXPECT_EQ(layer_of(""), "");
}

// The site of one allocation whose stack is these frames, innermost first: {function, file, line}.
std::string site_of(std::initializer_list<std::tuple<const char*, const char*, uint32_t>> stack) {
  Snapshot s;
  std::vector<uint32_t> frames;
  for (const auto& [fn, file, line] : stack)
    frames.push_back(s.frames.intern(Frame{.function = s.strings.intern(fn), .file = s.strings.intern(file), .line = line}));
  return allocation_site(s, s.stacks.intern(frames));
}

TEST(PythonNames, SiteSkipsInstalledPackagesForTheUsersFrame) {
  EXPECT_EQ(site_of({{"at::native::addmm", "", 0},
                     {"Linear.forward", "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 114},
                     {"Module._call_impl", "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", 1190},
                     {"Attention.forward", "/home/me/train.py", 29},
                     {"_run_module_as_main", "/usr/lib/python3.11/runpy.py", 198}}),
            "Attention.forward (train.py:29) via at::native::addmm");
}

TEST(PythonNames, SiteSkipsTheCodeTorchCompileGenerated) {
  EXPECT_EQ(site_of({{"at::native::clone", "", 0},
                     {"Runner.call", "/tmp/torchinductor_root/6j/c6jsvhkakz6wy635ame5yg5qx3gieo7dtudpldso7lplh6kgyosd.py", 1700},
                     {"CompiledFunction.forward", "/venv/lib/python3.12/site-packages/torch/_functorch/aot_autograd.py", 500},
                     {"train", "/home/me/train.py", 74}}),
            "train (train.py:74) via at::native::clone");
}

}  // namespace
}  // namespace memrec
