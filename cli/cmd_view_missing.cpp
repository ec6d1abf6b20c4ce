// `memrec view` in a build without the viewer: say so instead of pretending.
#include "commands.h"
#include "memrec/snapshot.h"

namespace memrec::cli {

void add_view_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("view", "Open the viewer (this build has no viewer)");
  cmd->allow_extras();
  cmd->callback([] { throw Error("this memrec was built without the viewer (MEMREC_WITH_VIEWER=OFF)"); });
}

}  // namespace memrec::cli
