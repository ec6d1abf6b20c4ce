// What every memrec executable shares: parsing, and turning each failure into one line and an exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace memrec::cli {

// Parses and runs the chosen command. A range check that failed reads as one sentence ("--layers must be a
// positive integer (got 0)") for every command's flags; memrec::Error and an allocation that failed print
// "memrec: error: ..." and exit 1; CLI::RuntimeError(N) exits N.
int run_app(CLI::App& app, int argc, char** argv);

}  // namespace memrec::cli
