#include <cstdio>
#include <exception>

#include <fmt/core.h>

#include "commands.h"
#include "memrec/snapshot.h"

int main(int argc, char** argv) {
  CLI::App app{"memrec: where your GPU memory goes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "memrec 0.1.0");
  memrec::cli::add_io_commands(app);
  memrec::cli::add_analysis_commands(app);
  memrec::cli::add_run_command(app);
  memrec::cli::add_view_command(app);
  memrec::cli::add_report_command(app);
  memrec::cli::add_record_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Error& e) {  // parse errors, and RuntimeError for a chosen exit code
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "memrec: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
