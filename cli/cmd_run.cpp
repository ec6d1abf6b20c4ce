// `memrec run <workload>`: build a libtorch workload, record it, write the snapshot, print where memory went.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "schedule.h"
#include "output.h"
#include "memrec/pickle.h"
#include "memrec/recorder.h"
#include "memrec/run_summary.h"
#include "memrec/workloads.h"

namespace memrec::cli {
namespace {

struct RunArgs {
  workloads::Config config;
  std::string device;  // empty = auto
  std::string output = "run.memrec";
  std::string pickle;
  std::string checkpoint;  // "all" or "0,3"
  std::string record;      // "wait=2,warmup=1,active=3"; empty = record everything
  std::string stacks = "on", kernels = "on", capture = "auto";
  bool free_stacks = false;
  uint64_t max_events = 0;  // 0 = no cap
  double buffer_mb = 0;     // 0 = the recorder's default
  std::vector<std::pair<CLI::Option*, int workloads::Config::*>> sizes;  // options whose CPU defaults differ
  CLI::Option* heads = nullptr;  // to refuse it for the mlp, which has no attention
};

// The sizes whose defaults differ by device: CUDA's are a real model, CPU's finish in seconds on two cores.
struct SizeFlag {
  const char* flag;
  int workloads::Config::*field;
  const char* help;
};
constexpr SizeFlag kSizeFlags[] = {
    {"--d-model", &workloads::Config::d_model, "width of each layer's input and output (hidden size)"},
    {"--heads", &workloads::Config::heads, "attention heads, dividing --d-model (transformer only)"},
    {"--ff", &workloads::Config::ff, "hidden width of each layer's feed-forward part"},
    {"--seq", &workloads::Config::seq, "tokens per sequence (the mlp's rows are --seq times --batch)"},
    {"--batch", &workloads::Config::batch, "sequences per step"},
    {"--steps", &workloads::Config::steps, "measured steps, after --warmup"},
};

// The steps a --record schedule records (indices as printed, warmup steps included).
struct Window {
  int first = 0, last = 0;
};

Window parse_window(const std::string& spec, int total_steps) {
  Schedule w = parse_schedule(spec);
  if (w.last() >= total_steps)
    throw Error(fmt::format("--record '{}': needs {} steps but the run has {} (--warmup plus --steps)", spec,
                            w.last() + 1, total_steps));
  return {w.first(), w.last()};
}

constexpr StackCapture kCaptures[] = {StackCapture::automatic, StackCapture::unwind_backtrace, StackCapture::boost,
                                      StackCapture::torch_unwind, StackCapture::libunwind};

std::vector<std::string> capture_names() {
  std::vector<std::string> names;
  for (StackCapture c : kCaptures) names.emplace_back(to_string(c));
  return names;
}

StackCapture parse_capture(const std::string& s) {
  for (StackCapture c : kCaptures)
    if (to_string(c) == s) return c;
  throw Error(fmt::format("unknown --capture '{}'", s));
}

// Device auto-selection, and the small CPU defaults for every size the user did not set.
workloads::Config resolve_config(const RunArgs& a) {
  workloads::Config c = a.config;
  if (c.model == "mlp" && a.heads->count() > 0) throw Error("--heads is for the transformer: the mlp has no attention");
  c.device = a.device.empty() ? (workloads::cuda_available() ? "cuda" : "cpu") : a.device;
  if (c.device == "cpu") {
    workloads::Config small = workloads::cpu_defaults(c);
    bool shrunk = false;
    for (auto [option, field] : a.sizes) {
      if (option->count() > 0) continue;
      shrunk |= c.*field != small.*field;
      c.*field = small.*field;
    }
    if (shrunk)
      fmt::print("note: running on CPU, so the sizes you did not set shrink to finish in seconds "
                 "(d_model {}, heads {}, ff {}, seq {}, batch {}, steps {}); set them to override\n",
                 c.d_model, c.heads, c.ff, c.seq, c.batch, c.steps);
  }
  if (!a.checkpoint.empty()) c.checkpoint = workloads::parse_layer_list(a.checkpoint, c.layers);
  workloads::validate(c);
  return c;
}

RecorderCounts counts_of(const RecorderStats& st) {
  return {.dropped = st.dropped, .dropped_buffer_full = st.dropped_buffer_full, .dropped_over_cap = st.dropped_over_cap,
          .cpu_unwrapped = st.cpu_unwrapped, .scopes_dropped = st.scopes_dropped, .kernels_dropped = st.kernels_dropped,
          .unique_frames = st.unique_frames, .cpu_zero_allocs = st.cpu_zero_allocs, .symbolize_ms = st.symbolize_ms};
}

void finish(const RunArgs& a, const Recorder& rec, const std::vector<double>& times) {
  RunFacts run{.recorder = counts_of(rec.stats()), .step_ms = times, .output = a.output,
               .output_bytes = std::filesystem::file_size(a.output)};
  fmt::print("{}", run_summary_text(rec.snapshot(), run));
  if (a.pickle.empty()) return;
  export_pickle_file(rec.snapshot(), a.pickle);
  fmt::print("{}", pickle_written_text(a.pickle));
}

// SIGINT and SIGTERM end a recording cleanly: the running step finishes, then the file is closed and the summary
// printed. A second signal quits at once, which leaves the file as a SIGKILL would: readable up to the last flush.
// Signals the parent set to be ignored (a shell's background job and SIGINT) stay ignored, as in Python.
std::atomic<int> g_signal{0};
std::string g_first_notice, g_second_notice;  // formatted in advance: the handler may only write()

extern "C" void on_interrupt(int sig) {
  const std::string& notice = g_signal.exchange(sig) ? g_second_notice : g_first_notice;
  ssize_t ignored = write(STDERR_FILENO, notice.data(), notice.size());
  (void)ignored;
  if (&notice == &g_second_notice) _exit(128 + sig);
}

void catch_interrupts(const std::string& output) {
  g_first_notice = fmt::format("memrec: interrupted: finishing this step, then writing {} (again to quit at once)\n",
                               output);
  g_second_notice = fmt::format("memrec: interrupted again: quitting now; {} holds what was flushed\n", output);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0 || current.sa_handler == SIG_IGN) continue;
    struct sigaction handler {};
    handler.sa_handler = on_interrupt;
    sigemptyset(&handler.sa_mask);
    handler.sa_flags = SA_RESTART;
    sigaction(sig, &handler, nullptr);
  }
}

RecorderOptions recorder_options(const RunArgs& a, const workloads::Config& c) {
  RecorderOptions opt;
  opt.output = a.output;
  opt.stacks = a.stacks == "on";
  opt.free_stacks = a.free_stacks;
  opt.kernels = a.kernels != "off";
  if (a.kernels == "all") opt.kernel_every = 1;
  opt.capture = parse_capture(a.capture);
  opt.cuda = c.device == "cuda";
  opt.max_events = a.max_events;
  if (a.buffer_mb > 0) opt.buffer_events = buffer_events_for_bytes(static_cast<size_t>(a.buffer_mb * (1 << 20)));
  return opt;
}

// How the steps ended, when not all ran.
struct Ending {
  std::string oom;  // the allocator's message
  int signal = 0;
  int step = -1;    // the step that ran out of memory, or the last one finished before the signal
};

void run(const RunArgs& a, const std::string& command_line) {
  check_outputs({}, {{"-o", a.output}, {"--pickle", a.pickle}});
  workloads::Config c = resolve_config(a);
  catch_interrupts(a.output);
  RecorderOptions opt = recorder_options(a, c);

  const int total = c.warmup + c.steps;
  const bool windowed = !a.record.empty();
  const Window window = windowed ? parse_window(a.record, total) : Window{0, total - 1};
  fmt::print("config: {} steps={} warmup={}\n", workloads::describe(c), c.steps, c.warmup);
  if (windowed && c.device == "cpu")
    fmt::print("note: recording steps {}-{} only; the CPU allocator has no state to read, so memory allocated before "
               "them (parameters, optimizer state) is not in the recording\n", window.first, window.last);
  Recorder rec(opt);
  bool started = false;
  auto begin = [&] {
    try {
      rec.start();
    } catch (const std::bad_alloc&) {
      std::error_code ignored;
      std::filesystem::remove(a.output, ignored);  // opened, but nothing recorded
      std::string asked = a.buffer_mb > 0 ? fmt::format("--buffer-mb {:g}", a.buffer_mb) : "the default, about 40 MB";
      throw Error(fmt::format("not enough host memory for the recorder's event buffer ({}): ask for less with "
                              "--buffer-mb", asked));
    }
    started = true;
    rec.set_metadata("command", command_line);
    rec.set_metadata("workload", workloads::describe(c));
    rec.set_metadata("record.steps", windowed ? fmt::format("{}-{} ({})", window.first, window.last, a.record)
                                              : "all, with the model's setup and teardown");
  };
  if (!windowed) begin();
  std::unique_ptr<workloads::Workload> w;
  std::vector<double> times;
  Ending end;
  try {
    w = workloads::Workload::create(c);
    fmt::print("parameters: {:.1f} M\n", w->parameters() / 1e6);
    for (int i = 0; i < total && !(end.signal = g_signal.load()); ++i) {
      if (windowed && i == window.first) begin();
      end.step = i;
      double ms = w->step(i);
      bool recorded = i >= window.first && i <= window.last;
      fmt::print("step {:>3}: {:8.1f} ms{}{}\n", i, ms, i < c.warmup ? "  (warmup)" : "",
                 windowed && recorded ? "  (recorded)" : "");
      if (i >= c.warmup) times.push_back(ms);
      if (windowed && i == window.last) rec.stop();
    }
  } catch (const workloads::OutOfMemory& e) {
    end.oom = e.what();
  }
  w.reset();  // without a window, parameters and optimizer state are freed inside the recording
  rec.stop();
  if (started) finish(a, rec, times);
  if (!end.oom.empty())
    throw Error(fmt::format("out of memory {}: {}\nthe recording up to the failure is complete in {}: "
                            "`memrec stats {}` shows what held the memory",
                            end.step < 0 ? "while building the model" : fmt::format("in step {}", end.step), end.oom,
                            a.output, a.output));
  if (end.signal) {
    fmt::print(stderr, "memrec: stopped by {} {}; {}\n", strsignal(end.signal),
               end.step < 0 ? "before the first step" : fmt::format("after step {}", end.step),
               started ? a.output + " is complete" : "nothing was recorded");
    throw CLI::RuntimeError(128 + end.signal);
  }
}

// Registers the size flags; their defaults in --help are the ones this machine uses when --device is left out.
void add_size_flags(CLI::App* cmd, RunArgs& args) {
  const bool cuda = workloads::cuda_available();
  const workloads::Config small = workloads::cpu_defaults(args.config);
  for (const SizeFlag& s : kSizeFlags) {
    int& value = args.config.*s.field;
    CLI::Option* o = cmd->add_option(s.flag, value, fmt::format("{} (CUDA {}, CPU {})", s.help, value, small.*s.field))
                         ->default_str(std::to_string(cuda ? value : small.*s.field))
                         ->check(CLI::PositiveNumber);
    args.sizes.emplace_back(o, s.field);
    if (s.field == &workloads::Config::heads) args.heads = o;
  }
  cmd->footer(fmt::format("The sizes' defaults (after =) are this machine's, where the auto device is {}; CPU runs "
                          "use small sizes to finish in seconds.",
                          cuda ? "CUDA" : "the CPU"));
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", kRunDescription);
  auto& c = args->config;
  cmd->add_option("workload", c.model, "transformer | mlp")->required()->check(CLI::IsMember({"transformer", "mlp"}));
  cmd->add_option("-o,--output", args->output, "the .memrec file to write")->capture_default_str();
  cmd->add_option("--pickle", args->pickle, "also export a PyTorch snapshot pickle (memory_viz)");
  cmd->add_option("--layers", c.layers, "layers (blocks) in the model")->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_size_flags(cmd, *args);
  cmd->add_option("--warmup", c.warmup, "steps before the measured ones")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--checkpoint", args->checkpoint,
                  "activation checkpointing of these layers: all | N,M,... (recomputed in backward)");
  cmd->add_option("--record", args->record,
                  "record only these steps, as torch.profiler's schedule: wait=W,warmup=N,active=A "
                  "(steps counted from the first, --warmup steps included)");
  cmd->add_option("--dtype", c.dtype)->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--optimizer", c.optimizer)->capture_default_str()->check(CLI::IsMember({"adam", "sgd"}));
  cmd->add_option("--device", args->device, "cuda | cpu (default: cuda when available)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--stacks", args->stacks, "C++ stack per allocation")->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_flag("--free-stacks", args->free_stacks, "also a stack per free");
  cmd->add_option("--kernels", args->kernels,
                  "CUPTI kernel timeline (CUDA): on = the first 3 steps, then every 10th; all = every step")
      ->capture_default_str()->check(CLI::IsMember({"on", "all", "off"}));
  cmd->add_option("--max-events", args->max_events,
                  "keep at most this many allocator events; later events, scopes and kernels are dropped and counted "
                  "(caps the recorder's memory; 0 = no cap)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--buffer-mb", args->buffer_mb,
                  "memory for events waiting to be written (default: 64k events, about 40 MB); more in one 0.5 s "
                  "interval are dropped and counted")->check(CLI::PositiveNumber);
  cmd->add_option("--capture", args->capture, fmt::format("stack capture: {}", fmt::join(capture_names(), " | ")))
      ->capture_default_str()->check(CLI::IsMember(capture_names()));
  cmd->callback([args, cmd] {
    std::string line = "memrec run";
    for (const auto& s : cmd->remaining(true)) line += " " + s;
    for (CLI::Option* o : cmd->get_options())
      if (o->count() > 0 && !o->get_lnames().empty())
        for (const auto& r : o->results()) line += fmt::format(" --{} {}", o->get_lnames()[0], r);
    run(*args, line + " " + args->config.model);
  });
}

}  // namespace memrec::cli
