// memrec whatif: predict the peak under another memory policy (activation checkpointing, allocator settings).
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "memrec/allocator_output.h"
#include "memrec/checkpoint_output.h"
#include "memrec/devices.h"
#include "memrec/load.h"
#include "memrec/stats_output.h"
#include "memrec/whatif.h"

namespace memrec::cli {
namespace {

std::vector<std::string> split_layers(const std::string& text) {
  std::vector<std::string> out;
  if (text == "all") return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw Error("--layers: expected 'all' or a list like 0,3,5, got '" + text + "'");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
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

}  // namespace

void add_whatif_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("whatif", "Predict the peak under another memory policy");
  cmd->require_subcommand(1);
  add_checkpoint(cmd);
  add_allocator(cmd);
}

}  // namespace memrec::cli
