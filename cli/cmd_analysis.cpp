// memrec stats / diff: what was live at the peak, grouped, and how two runs differ.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cmd_ranks.h"
#include "commands.h"
#include "memrec/devices.h"
#include "memrec/load.h"
#include "memrec/stats_output.h"

namespace memrec::cli {
namespace {

struct AnalysisOptions {
  std::string a, b, at = "peak", by = "stack";
  size_t top = 15;
  std::optional<uint8_t> device;
  bool json = false;
  bool kernels = false;
  bool full_stack = false;
  RangeFlags part;

  StatsOptions stats() const {
    return {.at_ns = parse_at(at), .by = *group_by_from_string(by), .top = top, .device = device, .kernels = kernels,
            .full_stack = full_stack};
  }
};

void add_common(CLI::App* cmd, AnalysisOptions& o, bool ranks = false) {
  std::vector<std::string> by = {"stack", "op", "module", "phase", "category", "layer", "pool", "owner"};
  if (ranks) by.push_back("rank");
  cmd->add_option("--by", o.by, ranks ? "group live memory by stack|op|module|phase|category|layer|pool|owner, or "
                                        "compare the files as ranks of one run (rank)"
                                      : "group live memory by stack|op|module|phase|category|layer|pool|owner")
      ->check(CLI::IsMember(by));
  cmd->add_option("--top", o.top, "rows per table")->check(CLI::Range(1, 100000));
  add_device_option(cmd, o.device);
  add_internal_option(cmd);
  add_range_options(cmd, o.part);
  cmd->add_flag("--json", o.json, "print JSON for scripts");
}

template <class Result>
void print(const Result& r, bool as_json, nlohmann::json (*json_of)(const Result&), std::string (*text_of)(const Result&)) {
  fmt::print("{}", as_json ? json_of(r).dump(2) + "\n" : text_of(r));
}

void add_stats(CLI::App& app) {
  auto* cmd = app.add_subcommand("stats", "Peaks, what was live then, top sites, sizes, fragmentation, OOMs");
  auto o = std::make_shared<AnalysisOptions>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  cmd->add_option("input", *inputs, ".memrec file or PyTorch pickle (one per rank with --by rank)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--at", o->at, "'peak' (default) or a time since the start: 1.5s, 250ms, 40us");
  cmd->add_flag("--kernels", o->kernels, "add the top kernels by GPU time");
  cmd->add_flag("--full-stack", o->full_stack, "with --by stack: print each row's whole stack, frames marked site, user or internal");
  add_common(cmd, *o, true);
  cmd->callback([o, inputs] {
    if (o->full_stack && o->by != "stack") throw Error(fmt::format("--full-stack goes with --by stack, not --by {}", o->by));
    std::optional<Range> part = o->part.parsed();
    if (o->by == "rank") {
      if (part) throw Error(fmt::format("{} reads a part of one file; --by rank compares the ranks' whole runs", part->flag));
      return print_rank_stats(*inputs, o->at, o->kernels, o->device, o->top, o->json);
    }
    if (inputs->size() > 1) throw Error(fmt::format("stats reads one file ({} given); several only with --by rank", inputs->size()));
    StatsOptions options = o->stats();
    print(stats(load_snapshot(inputs->front(), stderr, part), options), o->json, stats_json, stats_text);
  });
}

void add_diff(CLI::App& app) {
  auto* cmd = app.add_subcommand("diff", "Compare the peaks of two runs and what was live at each");
  auto o = std::make_shared<AnalysisOptions>();
  cmd->add_option("a", o->a, "first run")->required()->check(CLI::ExistingFile);
  cmd->add_option("b", o->b, "second run")->required()->check(CLI::ExistingFile);
  add_common(cmd, *o);
  cmd->callback([o] {
    std::optional<Range> part = o->part.parsed();
    StatsOptions options = o->stats();
    Snapshot a = load_snapshot(o->a, stderr, part), b = load_snapshot(o->b, stderr, part);
    DiffResult d = diff(a, b, options);
    d.ranks = different_ranks(a, o->a, b, o->b);
    print(d, o->json, diff_json, diff_text);
  });
}

}  // namespace

void add_analysis_commands(CLI::App& app) {
  add_stats(app);
  add_diff(app);
}

}  // namespace memrec::cli
