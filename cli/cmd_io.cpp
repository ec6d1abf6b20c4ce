// memrec import / export / info: moving snapshots between formats and summarizing them.
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "commands.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/perfetto.h"
#include "memrec/pickle.h"
#include "memrec/summary.h"

namespace memrec::cli {
namespace {

struct Paths {
  std::string in, out, format = "pickle";
};

// Writes through a temporary file next to `out`, renamed over it only once complete: a failed write (full disk,
// bad path) leaves no partial file that could pass for a finished one, and an existing `out` stays as it was.
// Devices and pipes (/dev/stdout) are written directly: there is nothing to rename, nor to remove.
void write_output(const std::string& out, const std::function<void(const std::string&)>& write) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(out, ec);
  if (fs::is_directory(st)) throw Error(fmt::format("cannot write {}: it is a directory", out));
  if (fs::exists(st) && !fs::is_regular_file(st)) return write(out);
  std::string partial = fmt::format("{}.partial-{}", out, getpid());
  try {
    write(partial);
    fs::rename(partial, out);
  } catch (...) {
    fs::remove(partial, ec);
    throw;
  }
}

void add_import(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", "Convert a PyTorch snapshot pickle (protocol 2-5) to .memrec");
  auto p = std::make_shared<Paths>();
  cmd->add_option("input", p->in, "pickle written by torch.cuda.memory._dump_snapshot")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", p->out, "output .memrec file")->required();
  cmd->callback([p] {
    Snapshot s = import_pickle_file(p->in);
    write_output(p->out, [&](const std::string& path) { write_file(s, path); });
    fmt::print("imported {} events from {} into {}\n", s.events.size(), p->in, p->out);
  });
}

void add_export(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a snapshot for pytorch.org/memory_viz (pickle) or Perfetto (JSON)");
  auto p = std::make_shared<Paths>();
  cmd->add_option("input", p->in, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", p->out, "output file")->required();
  cmd->add_option("--format", p->format, "pickle (memory_viz) or perfetto (Chrome trace JSON)")
      ->check(CLI::IsMember({"pickle", "perfetto"}));
  cmd->callback([p] {
    Snapshot s = load_snapshot(p->in);
    write_output(p->out, [&](const std::string& path) {
      if (p->format == "perfetto") export_perfetto_file(s, path);
      else export_pickle_file(s, path);
    });
    fmt::print("exported {} events from {} to {} ({})\n", s.events.size(), p->in, p->out, p->format);
  });
}

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Summarize a snapshot: devices, duration, events, peaks");
  auto p = std::make_shared<Paths>();
  cmd->add_option("input", p->in, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  cmd->callback([p] { fmt::print("{}", info_report(load_snapshot(p->in))); });
}

}  // namespace

void add_io_commands(CLI::App& app) {
  add_import(app);
  add_export(app);
  add_info(app);
}

}  // namespace memrec::cli
