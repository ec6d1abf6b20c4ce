// Each subcommand lives in its own file and registers itself on the app; main() only dispatches.
#pragma once

#include <CLI/CLI.hpp>

namespace memrec::cli {

void add_io_commands(CLI::App& app);        // import, export, info (cmd_io.cpp)
void add_analysis_commands(CLI::App& app);  // stats, diff, whatif (cmd_analysis.cpp)
void add_run_command(CLI::App& app);    // run (cmd_run.cpp, built with MEMREC_WITH_TORCH)
void add_view_command(CLI::App& app);   // view (cmd_view.cpp, built with MEMREC_WITH_VIEWER)
void add_report_command(CLI::App& app); // report (cmd_report.cpp)
void add_record_command(CLI::App& app); // record (cmd_record.cpp)

}  // namespace memrec::cli
