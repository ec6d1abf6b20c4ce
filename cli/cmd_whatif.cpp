// memrec whatif: predict the peak under another memory policy (activation checkpointing, allocator settings) or at
// another size.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "memrec/allocator_output.h"
#include "memrec/checkpoint_output.h"
#include "memrec/devices.h"
#include "memrec/load.h"
#include "memrec/scale_output.h"
#include "memrec/stats_output.h"
#include "memrec/whatif.h"

namespace memrec::cli {
namespace {

// "a,b,c" -> {"a", "b", "c"}; an empty item (",,", a trailing comma) is the error `error`.
std::vector<std::string> split_list(const std::string& text, const std::string& error) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw Error(error);
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> split_layers(const std::string& text) {
  if (text == "all") return {};
  return split_list(text, "--layers: expected 'all' or a list like 0,3,5, got '" + text + "'");
}

// "2,4,8" for --sizes and --predict: whole numbers from 1.
std::vector<uint64_t> parse_sizes(const std::string& text, const std::string& flag) {
  std::string error = flag + ": expected sizes like 2,4,8 (whole numbers from 1), got '" + text + "'";
  std::vector<uint64_t> out;
  for (const std::string& item : split_list(text, error)) {
    if (item.size() > 18 || item.find_first_not_of("0123456789") != std::string::npos) throw Error(error);
    out.push_back(std::stoull(item));
    if (out.back() == 0) throw Error(error);
  }
  return out;
}

void add_checkpoint(CLI::App* cmd) {
  auto* checkpoint = cmd->add_subcommand("checkpoint", "Predict the allocated peak with activation checkpointing");
  struct Options {
    std::string file, layers = "all";
    std::optional<uint8_t> device;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  checkpoint->add_option("input", o->file, "a run recorded without checkpointing")->required()->check(CLI::ExistingFile);
  checkpoint->add_option("--layers", o->layers, "'all' or layers as stats --by layer names them: layers.3, or 0,3,5");
  add_device_option(checkpoint, o->device);
  checkpoint->add_flag("--json", o->json, "print JSON for scripts");
  checkpoint->callback([o] {
    Snapshot s = load_snapshot(o->file, stderr);
    auto p = predict_checkpoint(s, choose_device(s, o->device), split_layers(o->layers));
    fmt::print("{}", o->json ? checkpoint_json(p, s.warnings).dump(2) + "\n" : checkpoint_text(p));
  });
}

// "80GiB", "81559N" bytes, "40GB": a byte count with an optional unit (KiB/MiB/GiB/TiB, KB/MB/GB/TB, B).
uint64_t parse_memory(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  for (const auto& [name, scale] : kUnits)
    if (used > 0 && unit == name && value > 0 && value * scale < 0x1p63) return static_cast<uint64_t>(value * scale);
  throw Error("--device-memory: expected a size like 80GiB or 85899345920, got '" + text + "'");
}

void add_allocator(CLI::App* cmd) {
  auto* alloc = cmd->add_subcommand(
      "allocator", "Predict reserved memory under other PYTORCH_CUDA_ALLOC_CONF settings by replaying the run's requests");
  struct Options {
    std::string file, device_memory;
    std::optional<std::string> conf;
    std::optional<uint8_t> device;
    bool json = false, sweep = false;
  };
  auto o = std::make_shared<Options>();
  alloc->add_option("input", o->file, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  alloc->add_option("--alloc-conf", o->conf,
                    "settings in PYTORCH_CUDA_ALLOC_CONF's syntax (default: those the run was recorded with)");
  alloc->add_option("--device-memory", o->device_memory,
                    "the device's memory, e.g. 80GiB (default: the recording's, and an OOM's free bytes)");
  alloc->add_flag("--sweep", o->sweep, "also predict the common settings, best first");
  add_device_option(alloc, o->device);
  alloc->add_flag("--json", o->json, "print JSON for scripts");
  alloc->callback([o] {
    Snapshot s = load_snapshot(o->file, stderr);
    uint8_t device = choose_device(s, o->device);
    AllocatorWhatifOptions w{.conf = o->conf, .device_memory = std::nullopt, .sweep = o->sweep};
    if (!o->device_memory.empty()) w.device_memory = parse_memory(o->device_memory);
    AllocatorWhatif result = allocator_whatif(s, device, w);
    fmt::print("{}", o->json ? allocator_whatif_json(result).dump(2) + "\n" : allocator_whatif_text(result));
  });
}

void add_scale(CLI::App* cmd) {
  auto* scale = cmd->add_subcommand(
      "scale", "Predict the peaks at another batch size or sequence length from runs at two or three sizes, and the "
               "largest size that fits");
  struct Options {
    std::vector<std::string> files;
    std::string sizes, predict, device_memory;
    std::optional<std::string> conf;
    std::optional<uint8_t> device;
    bool fit = false, json = false;
  };
  auto o = std::make_shared<Options>();
  scale->add_option("runs", o->files, "two or three recordings of one program at different sizes")
      ->required()
      ->check(CLI::ExistingFile);
  scale->add_option("--sizes", o->sizes, "each run's size (batch or sequence length), in the runs' order: 2,4")->required();
  scale->add_option("--predict", o->predict, "the sizes to predict: 8 or 8,12,16");
  scale->add_flag("--fit", o->fit, "find the largest size that does not run out of the device's memory");
  scale->add_option("--device-memory", o->device_memory,
                    "the device's memory, e.g. 80GiB (default: the recording's, less what NVML saw outside the allocator)");
  scale->add_option("--alloc-conf", o->conf,
                    "allocator settings in PYTORCH_CUDA_ALLOC_CONF's syntax (default: those the run was recorded with)");
  add_device_option(scale, o->device);
  scale->add_flag("--json", o->json, "print JSON for scripts");
  scale->callback([o] {
    std::vector<uint64_t> sizes = parse_sizes(o->sizes, "--sizes");
    if (sizes.size() != o->files.size())
      throw Error(fmt::format("--sizes gives {} size{} for {} runs: give one size per run, in the runs' order",
                              sizes.size(), sizes.size() == 1 ? "" : "s", o->files.size()));
    if (o->predict.empty() && !o->fit) throw Error("give the sizes to predict with --predict 8,16, or --fit for the largest size that fits");
    ScaleWhatifOptions w{.predict = {}, .fit = o->fit, .conf = o->conf, .device_memory = std::nullopt};
    if (!o->predict.empty()) w.predict = parse_sizes(o->predict, "--predict");
    if (!o->device_memory.empty()) w.device_memory = parse_memory(o->device_memory);
    std::vector<Snapshot> snapshots;
    for (const std::string& file : o->files) snapshots.push_back(load_snapshot(file, stderr));
    std::vector<ScaleRun> runs;
    for (size_t i = 0; i < snapshots.size(); ++i)
      runs.push_back({o->files[i], &snapshots[i], choose_device(snapshots[i], o->device), sizes[i]});
    ScaleWhatif result = scale_whatif(runs, w);
    fmt::print("{}", o->json ? scale_whatif_json(result).dump(2) + "\n" : scale_whatif_text(result));
  });
}

}  // namespace

void add_whatif_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("whatif", "Predict the peak under another memory policy");
  cmd->require_subcommand(1);
  add_checkpoint(cmd);
  add_allocator(cmd);
  add_scale(cmd);
}

}  // namespace memrec::cli
