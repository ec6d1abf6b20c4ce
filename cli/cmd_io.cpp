// memrec import / export / info: moving snapshots between formats and summarizing them.
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "commands.h"
#include "output.h"
#include "queries.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/pickle.h"
#include "memrec/ranks.h"

namespace memrec::cli {
namespace {

namespace fs = std::filesystem;

struct Paths {
  std::string in, out, format;
  RangeFlags part;
};

void add_import(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", "Convert a PyTorch snapshot pickle (protocol 2-5) to .memrec");
  auto p = std::make_shared<Paths>();
  cmd->add_option("input", p->in, "pickle written by torch.cuda.memory._dump_snapshot")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", p->out, "output .memrec file")->required();
  cmd->callback([p] {
    check_outputs({p->in}, {{"-o", p->out}});
    if (is_memrec_file(p->in))
      throw Error(fmt::format("{} is a .memrec file already: import reads PyTorch snapshot pickles; every other "
                              "command reads .memrec files as they are", p->in));
    Snapshot s = import_pickle_file(p->in);
    print_warnings(s, stderr);
    write_output(p->out, [&](const std::string& path) { write_file(s, path); });
    if (fs::is_regular_file(p->out)) write_summary(s, p->out);
    fmt::print("imported {} events from {} into {}\n", s.events.size(), p->in, p->out);
  });
}

void add_export(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "export", "Write a snapshot for pytorch.org/memory_viz (pickle), Perfetto (JSON) or SQL queries (SQLite)");
  auto p = std::make_shared<Paths>();
  cmd->add_option("input", p->in, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", p->out, "output file")->required();
  cmd->add_option("--format", p->format,
                  "pickle (memory_viz), perfetto (Chrome trace JSON) or sqlite (tables: docs/sql.md); default: from "
                  "-o's extension")
      ->check(CLI::IsMember({"pickle", "perfetto", "sqlite"}));
  add_range_options(cmd, p->part);
  cmd->callback([p] {
    check_outputs({p->in}, {{"-o", p->out}});
    const std::string format = export_format(p->out, p->format);
    std::optional<Range> part = p->part.parsed();
    Snapshot s = load_snapshot(p->in, stderr, part);
    export_file(s, format, p->out);
    fmt::print("exported {} events from {} to {} ({})\n", s.events.size(), p->in, p->out, format);
  });
}

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Summarize a snapshot: devices, duration, events, peaks");
  struct Options {
    std::string in;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("input", o->in, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  add_internal_option(cmd);
  cmd->add_flag("--json", o->json, "print JSON for scripts");
  cmd->callback([o] { print_answer(info_answer(o->in), o->json); });
}

}  // namespace

void add_io_commands(CLI::App& app) {
  add_import(app);
  add_export(app);
  add_info(app);
}

}  // namespace memrec::cli
