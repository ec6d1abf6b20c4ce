// memrec growth: memory that grows step over step, the lines that keep it, and the step at which the device is full.
#include <memory>

#include "commands.h"
#include "queries.h"

namespace memrec::cli {

void add_growth_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("growth", "Memory that grows step over step: the slope, the lines that keep it, "
                                           "and the step at which the device is full");
  struct Options {
    GrowthQuery q;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("input", o->q.file, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  cmd->add_option("--steps", o->q.steps, "compare only the training steps A..B, e.g. 3..50");
  cmd->add_option("--device-memory", o->q.device_memory,
                  "the memory to project against, e.g. 80GiB (default: the recording's device memory)");
  add_device_option(cmd, o->q.device);
  add_internal_option(cmd);
  cmd->add_flag("--json", o->json, "print JSON for scripts");
  cmd->callback([o] { print_answer(growth_answer(o->q), o->json); });
}

}  // namespace memrec::cli
