// Each subcommand lives in its own file and registers itself on the app; main() only dispatches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "memrec/sites.h"
#include "queries.h"

namespace memrec::cli {

inline constexpr const char* kRunDescription = "Record a libtorch training workload and show where memory goes";
// --device N: left unset, commands analyze memrec::choose_device's default, the first device with events.
inline CLI::Option* add_device_option(CLI::App* cmd, std::optional<uint8_t>& device) {
  return cmd->add_option_function<int>("--device", [&device](const int& d) { device = static_cast<uint8_t>(d); },
                                       "device index (default: the first device with events)")
      ->check(CLI::Range(0, 255));
}

// --internal PATTERN (repeatable): frames matching it are not the user's code, so no site (memrec/sites.h).
inline CLI::Option* add_internal_option(CLI::App* cmd) {
  return cmd->add_option_function<std::vector<std::string>>(
      "--internal", [](const std::vector<std::string>& p) { add_internal_patterns(p); },
      "treat frames as internal, not the user's code: a namespace prefix (mylib::detail::), or part of a file or "
      "library path (transformers/, libmyalloc.so); repeatable; adds to MEMREC_INTERNAL");
}

// --range T1..T2 and --steps A..B: read only that part of the recording (RangeFlags, memrec/range.h).
inline void add_range_options(CLI::App* cmd, RangeFlags& f) {
  cmd->add_option("--range", f.range, "read only the times T1..T2 after the start, e.g. 10s..20s");
  cmd->add_option("--steps", f.steps, "read only the training steps A..B (scopes named 'step N'), e.g. 3..5");
}

// --scale-with RUN --sizes --predict [--device-memory] [--alloc-conf] on report and view (GhostFlags).
inline void add_ghost_options(CLI::App* cmd, GhostFlags& g) {
  auto* with = cmd->add_option("--scale-with", g.with,
                               "a run of the same program at another size (repeatable, one or two): draw the "
                               "prediction at --predict's size over this run's timeline (memrec whatif scale)")
                   ->check(CLI::ExistingFile);
  cmd->add_option("--sizes", g.sizes, "with --scale-with: this run's size (batch or sequence length), then each "
                                      "--scale-with run's: 4,2")->needs(with);
  cmd->add_option("--predict", g.predict, "with --scale-with: the size whose prediction is drawn, e.g. 8")->needs(with);
  cmd->add_option("--device-memory", g.device_memory,
                  "with --scale-with: the device's memory, e.g. 80GiB (default: the recording's, less what NVML saw "
                  "outside the allocator)")->needs(with);
  cmd->add_option("--alloc-conf", g.conf, "with --scale-with: allocator settings for the predicted reserved memory "
                                          "(default: those the run was recorded with)")->needs(with);
}

void add_io_commands(CLI::App& app);        // import, export, info (cmd_io.cpp)
void add_analysis_commands(CLI::App& app);  // stats, diff (cmd_analysis.cpp)
void add_growth_command(CLI::App& app);     // growth (cmd_growth.cpp)
void add_whatif_command(CLI::App& app);     // whatif checkpoint, allocator, scale (cmd_whatif.cpp)
void add_advise_command(CLI::App& app);     // advise (cmd_advise.cpp)
void add_run_command(CLI::App& app);    // run (cmd_run.cpp in memrec-run, built with MEMREC_WITH_TORCH)
void add_view_command(CLI::App& app);   // view (cmd_view.cpp, built with MEMREC_WITH_VIEWER)
void add_report_command(CLI::App& app); // report (cmd_report.cpp)
void add_record_command(CLI::App& app); // record (cmd_record.cpp)
void add_mcp_command(CLI::App& app);    // mcp (cmd_mcp.cpp)
void add_top_command(CLI::App& app);    // top (cmd_top.cpp, built where curses is)

}  // namespace memrec::cli
