// memrec import / export / info: moving snapshots between formats and summarizing them.
#include <string>

#include <fmt/core.h>

#include "commands.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/pickle.h"
#include "memrec/summary.h"

namespace memrec::cli {
namespace {

void add_import(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", "Convert a PyTorch snapshot pickle (protocol 2-5) to .memrec");
  static std::string in, out;
  cmd->add_option("input", in, "pickle written by torch.cuda.memory._dump_snapshot")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", out, "output .memrec file")->required();
  cmd->callback([] {
    Snapshot s = import_pickle_file(in);
    write_file(s, out);
    fmt::print("imported {} events from {} into {}\n", s.events.size(), in, out);
  });
}

void add_export(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a snapshot as a pickle for pytorch.org/memory_viz");
  static std::string in, out, format = "pickle";
  cmd->add_option("input", in, ".memrec file (or pickle)")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", out, "output file")->required();
  cmd->add_option("--format", format, "output format")->check(CLI::IsMember({"pickle"}));
  cmd->callback([] {
    Snapshot s = load_snapshot(in);
    export_pickle_file(s, out);
    fmt::print("exported {} events from {} to {}\n", s.events.size(), in, out);
  });
}

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Summarize a snapshot: devices, duration, events, peaks");
  static std::string in;
  cmd->add_option("input", in, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  cmd->callback([] { fmt::print("{}", info_report(load_snapshot(in))); });
}

}  // namespace

void add_io_commands(CLI::App& app) {
  add_import(app);
  add_export(app);
  add_info(app);
}

}  // namespace memrec::cli
