// memrec advise: what to change in the program to lower its peak, ranked by the bytes each change saves.
#include <memory>

#include "commands.h"
#include "queries.h"

namespace memrec::cli {

void add_advise_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("advise", "What to change to lower the peak, ranked by the bytes each change saves "
                                           "(replayed, scaled from other sizes, or counted at the peak)");
  struct Options {
    AdviseQuery q;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("input", o->q.file, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  cmd->add_option("--device-memory", o->q.device_memory,
                  "the device's memory, e.g. 80GiB (default: the recording's)");
  cmd->add_option("--scale-with", o->q.scale_with, "runs of the same program at other sizes (one or two): the "
                                                   "largest size that fits")
      ->check(CLI::ExistingFile);
  cmd->add_option("--sizes", o->q.sizes, "with --scale-with: this run's size (batch or sequence length), then each "
                                         "--scale-with run's: 4,2");
  add_device_option(cmd, o->q.device);
  cmd->add_flag("--json", o->json, "print JSON for scripts");
  cmd->callback([o] { print_answer(advise_answer(o->q), o->json); });
}

}  // namespace memrec::cli
