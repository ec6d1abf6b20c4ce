// memrec whatif: predict the peak under another memory policy (activation checkpointing, allocator settings) or at
// another size.
#include <memory>
#include <string>

#include "commands.h"
#include "queries.h"

namespace memrec::cli {
namespace {

void add_checkpoint(CLI::App* cmd) {
  auto* checkpoint = cmd->add_subcommand("checkpoint", "Predict the allocated peak with activation checkpointing");
  struct Options {
    CheckpointQuery q;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  checkpoint->add_option("input", o->q.file, "a run recorded without checkpointing")->required()->check(CLI::ExistingFile);
  checkpoint->add_option("--layers", o->q.layers, "'all' or layers as stats --by layer names them: layers.3, or 0,3,5");
  add_device_option(checkpoint, o->q.device);
  checkpoint->add_flag("--json", o->json, "print JSON for scripts");
  checkpoint->callback([o] { print_answer(checkpoint_answer(o->q), o->json); });
}

void add_allocator(CLI::App* cmd) {
  auto* alloc = cmd->add_subcommand(
      "allocator", "Predict reserved memory under other PYTORCH_CUDA_ALLOC_CONF settings by replaying the run's requests");
  struct Options {
    AllocatorQuery q;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  alloc->add_option("input", o->q.file, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  alloc->add_option("--alloc-conf", o->q.conf,
                    "settings in PYTORCH_CUDA_ALLOC_CONF's syntax (default: those the run was recorded with)");
  alloc->add_option("--device-memory", o->q.device_memory,
                    "the device's memory, e.g. 80GiB (default: the recording's, and an OOM's free bytes)");
  alloc->add_flag("--sweep", o->q.sweep, "also predict the common settings, best first");
  add_device_option(alloc, o->q.device);
  alloc->add_flag("--json", o->json, "print JSON for scripts");
  alloc->callback([o] { print_answer(allocator_answer(o->q), o->json); });
}

void add_scale(CLI::App* cmd) {
  auto* scale = cmd->add_subcommand(
      "scale", "Predict the peaks at another batch size or sequence length from runs at two or three sizes, and the "
               "largest size that fits");
  struct Options {
    ScaleQuery q;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  scale->add_option("runs", o->q.files, "two or three recordings of one program at different sizes")
      ->required()
      ->check(CLI::ExistingFile);
  scale->add_option("--sizes", o->q.sizes, "each run's size (batch or sequence length), in the runs' order: 2,4")->required();
  scale->add_option("--predict", o->q.predict, "the sizes to predict: 8 or 8,12,16");
  scale->add_flag("--fit", o->q.fit, "find the largest size that does not run out of the device's memory");
  scale->add_option("--device-memory", o->q.device_memory,
                    "the device's memory, e.g. 80GiB (default: the recording's, less what NVML saw outside the allocator)");
  scale->add_option("--alloc-conf", o->q.conf,
                    "allocator settings in PYTORCH_CUDA_ALLOC_CONF's syntax (default: those the run was recorded with)");
  add_device_option(scale, o->q.device);
  scale->add_flag("--json", o->json, "print JSON for scripts");
  scale->callback([o] { print_answer(scale_answer(o->q), o->json); });
}

}  // namespace

void add_whatif_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("whatif", "Predict the peak under another memory policy");
  cmd->require_subcommand(1);
  add_checkpoint(cmd);
  add_allocator(cmd);
  add_scale(cmd);
}

}  // namespace memrec::cli
