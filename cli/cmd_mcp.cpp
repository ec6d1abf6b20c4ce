// memrec mcp: the analysis commands as Model Context Protocol tools over stdio. Each tool fills the query its
// command fills from flags and returns the JSON the command prints with --json (queries.h).
#include <csignal>
#include <iostream>

#include "commands.h"
#include "memrec/analysis.h"
#include "memrec/mcp.h"
#include "queries.h"

namespace memrec::cli {
namespace {

using nlohmann::json;

// Sets `field` from the argument `name` when the client gave it; the query's own default stays otherwise. The
// server checked the argument's type against the schema already.
template <class T> void read(const json& args, const char* name, T& field) {
  if (args.contains(name)) field = args[name].get<T>();
}
template <class T> void read(const json& args, const char* name, std::optional<T>& field) {
  if (args.contains(name)) field = args[name].get<T>();
}

json string_arg(const std::string& description) { return {{"type", "string"}, {"description", description}}; }
json flag_arg(const std::string& description) { return {{"type", "boolean"}, {"description", description}}; }
json device_arg() {
  return {{"type", "integer"}, {"minimum", 0}, {"maximum", 255},
          {"description", "device index (default: the first device with events)"}};
}
json top_arg(size_t fallback) {
  return {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxTop}, {"default", fallback}, {"description", "rows per table"}};
}
json by_arg() {
  return {{"type", "string"}, {"enum", group_by_names()}, {"default", "stack"},
          {"description", "group live memory by call site (stack), op, module, phase, category, layer, pool or owner"}};
}
json file_arg() { return string_arg("path of a .memrec file or a PyTorch snapshot pickle"); }
// The part of the recording to read (--range, --steps): the tool's arguments `range` and `steps`.
json range_args(json properties) {
  properties["range"] = string_arg("read only the times T1..T2 after the start, e.g. 10s..20s");
  properties["steps"] = string_arg("read only the training steps A..B (scopes named 'step N'), e.g. 3..5");
  return properties;
}
void read_part(const json& args, RangeFlags& part) { read(args, "range", part.range), read(args, "steps", part.steps); }

json object_schema(json properties, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)},
          {"additionalProperties", false}};
}

// A tool whose answer is `answer(args)`: memrec's errors (a missing file, a bad --at) are the request's fault.
mcp::Tool tool(std::string name, std::string description, json schema, std::function<Answer(const json&)> answer) {
  auto call = [answer](const json& args) {
    try {
      return answer(args).json;
    } catch (const Error& e) {
      throw mcp::InvalidParams(e.what());
    }
  };
  return {std::move(name), std::move(description), std::move(schema), call};
}

mcp::Tool info_tool() {
  return tool("info", "What a recording holds: metadata, counts, and per device the peaks, OOMs and largest live blocks "
              "(memrec info --json)",
              object_schema({{"file", file_arg()}}, {"file"}),
              [](const json& a) { return info_answer(a["file"]); });
}

mcp::Tool stats_tool() {
  json properties = {{"file", file_arg()},
                     {"at", string_arg("'peak' (default) or a time since the start: 1.5s, 250ms, 40us")},
                     {"by", by_arg()},
                     {"top", top_arg(StatsQuery{}.top)},
                     {"device", device_arg()},
                     {"kernels", flag_arg("add the top kernels by GPU time")},
                     {"full_stack", flag_arg("with by=stack: each row's whole stack")}};
  properties = range_args(std::move(properties));
  return tool("stats", "Peaks, what was live at the peak or at a time grouped as asked, top sites, sizes, "
              "fragmentation, OOMs (memrec stats --json)",
              object_schema(std::move(properties), {"file"}), [](const json& a) {
                StatsQuery q;
                q.files = {a["file"].get<std::string>()};
                read(a, "at", q.at), read(a, "by", q.by), read(a, "top", q.top);
                read(a, "device", q.device), read(a, "kernels", q.kernels), read(a, "full_stack", q.full_stack);
                read_part(a, q.part);
                return stats_answer(q);
              });
}

mcp::Tool diff_tool() {
  json properties = range_args({{"a", file_arg()}, {"b", file_arg()}, {"by", by_arg()}, {"top", top_arg(DiffQuery{}.top)},
                                {"device", device_arg()}});
  return tool("diff", "Compare the peaks of two runs and what was live at each (memrec diff --json)",
              object_schema(std::move(properties), {"a", "b"}), [](const json& a) {
                DiffQuery q;
                read(a, "a", q.a), read(a, "b", q.b), read(a, "by", q.by), read(a, "top", q.top), read(a, "device", q.device);
                read_part(a, q.part);
                return diff_answer(q);
              });
}

mcp::Tool ranks_tool() {
  json files = {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1},
                {"description", "one recording per rank of a data-parallel run"}};
  return tool("ranks", "Compare the ranks of one run at their peaks (memrec stats --by rank --json)",
              object_schema({{"files", files}, {"top", top_arg(RanksQuery{}.top)}, {"device", device_arg()}}, {"files"}),
              [](const json& a) {
                RanksQuery q;
                read(a, "files", q.files), read(a, "top", q.top), read(a, "device", q.device);
                return ranks_answer(q);
              });
}

mcp::Tool checkpoint_tool() {
  json properties = {{"file", file_arg()},
                     {"layers", string_arg("'all' (default) or layers as stats by=layer names them: layers.3, or 0,3,5")},
                     {"device", device_arg()}};
  return tool("whatif_checkpoint", "Predict the allocated peak with activation checkpointing (memrec whatif checkpoint --json)",
              object_schema(std::move(properties), {"file"}), [](const json& a) {
                CheckpointQuery q;
                read(a, "file", q.file), read(a, "layers", q.layers), read(a, "device", q.device);
                return checkpoint_answer(q);
              });
}

mcp::Tool allocator_tool() {
  json properties = {{"file", file_arg()},
                     {"alloc_conf", string_arg("PYTORCH_CUDA_ALLOC_CONF settings (default: the recording's)")},
                     {"device_memory", string_arg("the device's memory, e.g. 80GiB (default: the recording's)")},
                     {"sweep", flag_arg("also predict the common settings, best first")},
                     {"device", device_arg()}};
  return tool("whatif_allocator", "Predict reserved memory under other allocator settings (memrec whatif allocator --json)",
              object_schema(std::move(properties), {"file"}), [](const json& a) {
                AllocatorQuery q;
                read(a, "file", q.file), read(a, "alloc_conf", q.conf), read(a, "device_memory", q.device_memory);
                read(a, "sweep", q.sweep), read(a, "device", q.device);
                return allocator_answer(q);
              });
}

mcp::Tool scale_tool() {
  json files = {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 2}, {"maxItems", 3},
                {"description", "two or three recordings of one program at different sizes"}};
  json properties = {{"files", files},
                     {"sizes", string_arg("each run's size (batch or sequence length), in the files' order: 2,4")},
                     {"predict", string_arg("the sizes to predict: 8 or 8,12,16")},
                     {"fit", flag_arg("find the largest size that does not run out of the device's memory")},
                     {"device_memory", string_arg("the device's memory, e.g. 80GiB (default: the recording's)")},
                     {"alloc_conf", string_arg("PYTORCH_CUDA_ALLOC_CONF settings (default: the recording's)")},
                     {"device", device_arg()}};
  return tool("whatif_scale", "Predict the peaks at another batch size or sequence length, and the largest that fits "
              "(memrec whatif scale --json)",
              object_schema(std::move(properties), {"files", "sizes"}), [](const json& a) {
                ScaleQuery q;
                read(a, "files", q.files), read(a, "sizes", q.sizes), read(a, "predict", q.predict), read(a, "fit", q.fit);
                read(a, "device_memory", q.device_memory), read(a, "alloc_conf", q.conf), read(a, "device", q.device);
                return scale_answer(q);
              });
}

mcp::Tool advise_tool() {
  json with = {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1}, {"maxItems", 2},
               {"description", "recordings of the same program at other sizes (with sizes)"}};
  json properties = {{"file", file_arg()},
                     {"scale_with", with},
                     {"sizes", string_arg("with scale_with: this run's size, then each other run's: 4,2")},
                     {"device_memory", string_arg("the device's memory, e.g. 80GiB (default: the recording's)")},
                     {"device", device_arg()}};
  return tool("advise", "What to change in the program to lower its peak, ranked by the bytes each change saves "
              "(memrec advise --json)",
              object_schema(std::move(properties), {"file"}), [](const json& a) {
                AdviseQuery q;
                read(a, "file", q.file), read(a, "scale_with", q.scale_with), read(a, "sizes", q.sizes);
                read(a, "device_memory", q.device_memory), read(a, "device", q.device);
                return advise_answer(q);
              });
}

mcp::Tool growth_tool() {
  json properties = {{"file", file_arg()},
                     {"steps", string_arg("compare only the training steps A..B, e.g. 3..50")},
                     {"device_memory", string_arg("the memory to project against, e.g. 80GiB (default: the recording's)")},
                     {"device", device_arg()}};
  return tool("growth", "Memory that grows step over step: each step's start, the slope after the warm-up, the lines "
              "that grow and the step at which the device is full (memrec growth --json)",
              object_schema(std::move(properties), {"file"}), [](const json& a) {
                GrowthQuery q;
                read(a, "file", q.file), read(a, "steps", q.steps), read(a, "device_memory", q.device_memory);
                read(a, "device", q.device);
                return growth_answer(q);
              });
}

}  // namespace

void add_mcp_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("mcp", "Serve info, stats, diff, ranks, growth, the what-ifs and advise to agents: the "
                                        "Model Context Protocol over stdin/stdout");
  cmd->callback([] {
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up ends the session at the next read, not by a signal
    mcp::Server server("memrec", "0.1.0",
                       {info_tool(), stats_tool(), diff_tool(), ranks_tool(), checkpoint_tool(), allocator_tool(),
                        scale_tool(), growth_tool(), advise_tool()});
    server.serve(std::cin, std::cout);
  });
}

}  // namespace memrec::cli
