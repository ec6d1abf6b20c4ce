// `memrec`: every command but `run`, which memrec-run carries out, so this executable links no libtorch.
#include "app.h"
#include "commands.h"
#include "sibling.h"

int main(int argc, char** argv) {
  CLI::App app{"memrec: where your GPU memory goes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "memrec 0.1.0");
  memrec::cli::add_io_commands(app);
  memrec::cli::add_analysis_commands(app);
  memrec::cli::add_growth_command(app);
  memrec::cli::add_whatif_command(app);
  memrec::cli::add_advise_command(app);
#ifdef MEMREC_HAS_RUN
  memrec::cli::add_sibling_command(app, "run", memrec::cli::kRunDescription, "memrec-run", argv);
#else
  memrec::cli::add_run_command(app);
#endif
  memrec::cli::add_view_command(app);
  memrec::cli::add_report_command(app);
  memrec::cli::add_record_command(app);
  memrec::cli::add_mcp_command(app);
  memrec::cli::add_top_command(app);
  return memrec::cli::run_app(app, argc, argv);
}
