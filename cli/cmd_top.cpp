// `memrec top [--follow] FILE`: the terminal view (terminal/), for a GPU node reached over SSH.
#include <memory>

#include "commands.h"
#include "memrec/top.h"

namespace memrec::cli {

void add_top_command(CLI::App& app) {
  auto o = std::make_shared<terminal::TopOptions>();
  auto* cmd = app.add_subcommand("top", "Watch a recording in the terminal: memory over time, the peak, who holds it");
  // Not checked to exist: with --follow, the recording may not have been created yet.
  cmd->add_option("file", o->file, ".memrec file or PyTorch pickle")->required();
  cmd->add_flag("-f,--follow", o->follow, "re-read the file as it grows: watch a recording while it is written");
  add_device_option(cmd, o->device);
  add_internal_option(cmd);
  cmd->callback([o] { terminal::run_top(*o); });
}

}  // namespace memrec::cli
