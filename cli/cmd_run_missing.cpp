// `memrec run` in a build without libtorch: say so instead of pretending.
#include <stdexcept>

#include "commands.h"
#include "memrec/snapshot.h"

namespace memrec::cli {

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Record a workload (this build has no libtorch)");
  cmd->allow_extras();
  cmd->callback([] { throw Error("this memrec was built without libtorch (MEMREC_WITH_TORCH=OFF)"); });
}

}  // namespace memrec::cli
