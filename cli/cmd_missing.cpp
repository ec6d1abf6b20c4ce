// Commands this build left out (no libtorch, no viewer, no curses): they say so instead of pretending.
#include <string>

#include "commands.h"
#include "memrec/snapshot.h"

namespace memrec::cli {
namespace {

[[maybe_unused]] void add_unavailable(CLI::App& app, const std::string& name, const std::string& reason) {
  auto* cmd = app.add_subcommand(name, "(unavailable: " + reason + ")");
  cmd->allow_extras();
  cmd->callback([name, reason] { throw Error("'memrec " + name + "' is unavailable: this memrec was built without " + reason); });
}

}  // namespace

#ifndef MEMREC_HAS_RUN
void add_run_command(CLI::App& app) { add_unavailable(app, "run", "libtorch (MEMREC_WITH_TORCH=OFF)"); }
#endif
#ifndef MEMREC_HAS_VIEW
void add_view_command(CLI::App& app) { add_unavailable(app, "view", "the viewer (MEMREC_WITH_VIEWER=OFF)"); }
#endif
#ifndef MEMREC_HAS_TOP
void add_top_command(CLI::App& app) { add_unavailable(app, "top", "curses (install libncurses-dev and rebuild)"); }
#endif

}  // namespace memrec::cli
