// Commands another executable carries out: `memrec run` is memrec-run, so `memrec` itself never loads libtorch
// and its other commands start in milliseconds.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace memrec::cli {

// Registers `name` (listed in `memrec --help` with `description`) and leaves its arguments unparsed: choosing it
// execs `executable` from the folder of this one with this process's own argv, so the sibling parses them, prints
// the command's help and errors, and its exit code, signals and output are the command's. `argv` is main()'s.
void add_sibling_command(CLI::App& app, const std::string& name, const std::string& description,
                         const std::string& executable, char** argv);

}  // namespace memrec::cli
