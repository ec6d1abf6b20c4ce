// memrec stats / diff: what was live at the peak, grouped, and how two runs differ.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "memrec/analysis.h"
#include "queries.h"

namespace memrec::cli {
namespace {

// stats' and diff's shared flags: --by (with `rank` for stats), --top, --device, --internal, --range/--steps, --json.
void add_common(CLI::App* cmd, std::string& by, size_t& top, std::optional<uint8_t>& device, RangeFlags& part,
                bool& json, bool ranks) {
  std::vector<std::string> names = group_by_names();
  if (ranks) names.push_back("rank");
  std::string list = fmt::format("{}", fmt::join(group_by_names(), "|"));
  cmd->add_option("--by", by, ranks ? "group live memory by " + list + ", or compare the files as ranks of one run (rank)"
                                    : "group live memory by " + list)
      ->check(CLI::IsMember(names));
  cmd->add_option("--top", top, "rows per table")->check(CLI::Range(size_t{1}, kMaxTop));
  add_device_option(cmd, device);
  add_internal_option(cmd);
  add_range_options(cmd, part);
  cmd->add_flag("--json", json, "print JSON for scripts");
}

void add_stats(CLI::App& app) {
  auto* cmd = app.add_subcommand("stats", "Peaks, what was live then, top sites, sizes, fragmentation, OOMs");
  struct Options {
    StatsQuery q;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("input", o->q.files, ".memrec file or PyTorch pickle (one per rank with --by rank)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--at", o->q.at, "'peak' (default) or a time since the start: 1.5s, 250ms, 40us");
  cmd->add_flag("--kernels", o->q.kernels, "add the top kernels by GPU time");
  cmd->add_flag("--full-stack", o->q.full_stack, "with --by stack: print each row's whole stack, frames marked site, user or internal");
  add_common(cmd, o->q.by, o->q.top, o->q.device, o->q.part, o->json, true);
  cmd->callback([o] { print_answer(stats_answer(o->q), o->json); });
}

void add_diff(CLI::App& app) {
  auto* cmd = app.add_subcommand("diff", "Compare the peaks of two runs and what was live at each");
  struct Options {
    DiffQuery q;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("a", o->q.a, "first run")->required()->check(CLI::ExistingFile);
  cmd->add_option("b", o->q.b, "second run")->required()->check(CLI::ExistingFile);
  add_common(cmd, o->q.by, o->q.top, o->q.device, o->q.part, o->json, false);
  cmd->callback([o] { print_answer(diff_answer(o->q), o->json); });
}

}  // namespace

void add_analysis_commands(CLI::App& app) {
  add_stats(app);
  add_diff(app);
}

}  // namespace memrec::cli
