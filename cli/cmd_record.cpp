// `memrec record -- PROGRAM [ARGS...]`: runs a program unchanged and records every Python process in it that
// imports torch. No libtorch here: the recording happens inside those processes (memrec's Python module, found
// through a bootstrap put on PYTHONPATH); this command sets their environment, forwards signals, waits, and
// names and summarizes the files they wrote.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.h"
#include "memrec/info.h"
#include "memrec/load.h"
#include "memrec/replay.h"
#include "memrec/units.h"
#include "output.h"
#include "memrec/ranks.h"
#include "schedule.h"

namespace fs = std::filesystem;

namespace memrec::cli {
namespace {

struct RecordArgs {
  std::string output = "run.memrec";
  std::string pickle;
  std::string stacks = "all", kernels = "on", ops = "on", device_memory = "on";
  uint64_t max_events = 0;
  std::string window;  // wait=W,warmup=N,active=A
  bool force = false;
  bool cost = false;
};

// What goes on the program's PYTHONPATH so that its Python loads memrec's bootstrap and package. Layouts: pip's
// (the package is the prefix, <package>/bin/memrec: the program's Python imports memrec from its own site-packages,
// which stays out of PYTHONPATH so it cannot shadow the standard library), the CMake install (<prefix>/bin/memrec,
// <prefix>/lib/memrec/python), the build tree's python/; MEMREC_PYTHON_DIR names a folder holding the package.
std::vector<fs::path> python_path() {
  auto with_boot = [](const fs::path& dir) { return std::vector<fs::path>{dir / "memrec/_boot", dir}; };
  if (const char* dir = std::getenv("MEMREC_PYTHON_DIR")) return with_boot(dir);
  std::error_code ec;
  fs::path prefix = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (fs::exists(prefix / "_boot/sitecustomize.py", ec)) return {prefix / "_boot"};
  for (const fs::path& dir : {prefix / "lib/memrec/python", fs::path(MEMREC_PYTHON_BUILD_DIR)})
    if (!dir.empty() && fs::exists(dir / "memrec/_boot/sitecustomize.py", ec)) return with_boot(dir);
  throw Error("memrec record needs memrec's Python module, and this memrec was built without it "
              "(configure with -DMEMREC_WITH_PYTHON=ON and a Python that imports torch; docs/python.md)");
}

// The preload library and the recorder library it loads into libtorch C++ programs (preload.cpp), installed
// (<prefix>/lib/memrec) or in the build tree; none when memrec was built without libtorch.
std::optional<std::pair<fs::path, fs::path>> preload_libraries() {
  std::error_code ec;
  fs::path installed = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "lib/memrec";
  for (const fs::path& dir : {installed, fs::path(MEMREC_PRELOAD_BUILD_DIR)})
    if (!dir.empty() && fs::exists(dir / "libmemrec_preload.so", ec) && fs::exists(dir / "libmemrec_autorecord.so", ec))
      return std::pair{dir / "libmemrec_preload.so", dir / "libmemrec_autorecord.so"};
  return std::nullopt;
}

std::string prepend_path(const std::string& dirs, const char* existing) {
  return existing && *existing ? dirs + ":" + existing : dirs;
}

// Signals sent to memrec itself go on to the program. Those the terminal sends (Ctrl-C, Ctrl-\) already reach
// the whole foreground process group, the program included: forwarding them would deliver them twice.
std::atomic<pid_t> g_child{0};

extern "C" void forward_signal(int sig, siginfo_t* info, void*) {
  pid_t child = g_child.load();
  if (child > 0 && info->si_code != SI_KERNEL) kill(child, sig);
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// Signals the caller ignores (nohup's SIGHUP, a background job's SIGINT) stay ignored, for memrec and the program:
// an ignored disposition survives exec. Returns those.
std::vector<int> forward_signals() {
  std::vector<int> ignored;
  for (int sig : kForwarded) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) {
      ignored.push_back(sig);
      continue;
    }
    struct sigaction handler {};
    handler.sa_sigaction = forward_signal;
    handler.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&handler.sa_mask);
    sigaction(sig, &handler, nullptr);
  }
  return ignored;
}

// Runs the program; returns its exit status as a shell reports it (128 + signal when killed).
int run_program(const std::vector<std::string>& program) {
  std::vector<char*> argv;
  for (const std::string& a : program) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<int> ignored = forward_signals();
  // Held from fork until the child's pid is known here (and its own dispositions are set there): a signal in
  // between is delivered then, not lost.
  sigset_t forwarded, before;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  sigprocmask(SIG_BLOCK, &forwarded, &before);
  pid_t child = fork();
  if (child == 0) {
    for (int sig : kForwarded)
      if (std::find(ignored.begin(), ignored.end(), sig) == ignored.end()) signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    execvp(argv[0], argv.data());
    fmt::print(stderr, "memrec: cannot run {}: {}\n", program[0], std::strerror(errno));
    _exit(127);
  }
  int fork_error = errno;
  if (child > 0) g_child = child;
  sigprocmask(SIG_SETMASK, &before, nullptr);
  if (child < 0) throw Error(fmt::format("cannot start {}: {}", program[0], std::strerror(fork_error)));
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) throw Error(fmt::format("waiting for {}: {}", program[0], std::strerror(errno)));
  g_child = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What the processes wrote into the session file: the files they record into (in order, without repeats), and
// notes (lines starting with '!') that memrec prints for them rather than into the program's stderr.
struct Session {
  std::vector<std::string> files, notes;
};

Session read_session(const std::string& path) {
  Session s;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("!")) s.notes.push_back(line.substr(1));
    else if (!line.empty() && std::find(s.files.begin(), s.files.end(), line) == s.files.end()) s.files.push_back(line);
  }
  return s;
}

// run.memrec + ".rank0" -> run.rank0.memrec
fs::path tagged(const fs::path& p, const std::string& tag) {
  return p.parent_path() / (p.stem().string() + tag + p.extension().string());
}

// The tag a process added to the name it was given (".rank0", ".pid123"; "" for the name itself).
std::string tag_of(const fs::path& file, const fs::path& base) {
  return file.stem().string().substr(base.stem().string().size());
}

// Where the processes write: the .memrec files themselves, or, for an output in another format, .memrec files in a
// folder of their own beside it, converted when the program has ended.
struct Destination {
  fs::path output;     // what the user named
  std::string format;  // "memrec", "pickle" or "perfetto"
  fs::path staging;    // empty when the processes write the outputs themselves

  fs::path recorded() const { return staging.empty() ? output : staging / (output.stem().string() + ".memrec"); }
  fs::path final_name(const fs::path& file, size_t files) const {
    return files == 1 ? output : tagged(output, tag_of(file, recorded()));
  }
};

std::string record_format(const std::string& output) {
  std::string ext = fs::path(output).extension().string();
  if (ext == ".memrec") return "memrec";
  if (ext == ".pickle" || ext == ".pkl" || ext == ".json") return export_format(output, "");
  throw Error(fmt::format("-o {}: give an output ending in .memrec, .pickle or .pkl (memory_viz) or .json (Perfetto)",
                          output));
}

// An output, or a rank's file named after it, that exists already: refused unless --force.
void refuse_existing(const std::vector<Output>& outputs) {
  std::error_code ec;
  for (const Output& o : outputs) {
    if (o.path.empty()) continue;
    if (fs::exists(o.path, ec))
      throw Error(fmt::format("{} {} exists: give another name, or --force to replace it", o.flag, o.path));
    fs::path p = fs::absolute(o.path, ec);
    for (const auto& entry : fs::directory_iterator(p.parent_path(), ec)) {
      const fs::path& f = entry.path();
      if (f.extension() != p.extension() || !f.stem().string().starts_with(p.stem().string())) continue;
      std::string tag = tag_of(f, p);
      if (tag.starts_with(".rank") && tag.size() > 5 && tag.find_first_not_of("0123456789", 5) == std::string::npos)
        throw Error(fmt::format("{} {}: {} exists from an earlier run: give another name, or --force to replace "
                                "the ranks' files", o.flag, o.path, f.string()));
    }
  }
}

// A Python option that keeps memrec's bootstrap out of the program: -E and -I ignore PYTHONPATH, -S skips site.
std::string python_option_without_bootstrap(const std::vector<std::string>& program) {
  if (!fs::path(program[0]).filename().string().starts_with("python")) return "";
  for (size_t i = 1; i < program.size(); ++i) {
    const std::string& arg = program[i];
    if (arg.size() < 2 || arg[0] != '-' || arg[1] == '-') return "";  // the script, or a long option
    for (size_t k = 1; k < arg.size(); ++k) {
      char c = arg[k];
      if (c == 'E' || c == 'I' || c == 'S') return std::string("-") + c;
      if (c == 'c' || c == 'm') return "";
      if (c == 'W' || c == 'X') {  // takes a value: the rest of this argument or the next one
        i += k + 1 == arg.size();
        break;
      }
    }
  }
  return "";
}

void say_nothing_recorded(const std::vector<std::string>& program) {
  std::string option = python_option_without_bootstrap(program);
  if (option.empty()) {
    fmt::print(stderr, "memrec: no process imported torch: nothing recorded\n");
    return;
  }
  fmt::print(stderr, "memrec: nothing recorded: {} {} keeps Python from loading memrec ({}); run it without {}, or "
             "record from inside the program with `import memrec` (docs/python.md)\n", program[0], option,
             option == "-S" ? "it skips site, which loads memrec's bootstrap" : "it ignores PYTHONPATH", option);
}

// Reports one process's recording and writes what the user asked for from it. A recording with no allocations
// leaves no file; one cut short (os._exit, a signal) says so and how much it kept.
void finish(const fs::path& file, const fs::path& out, const Destination& d, const std::string& pickle, bool cost) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    fmt::print(stderr, "{}: not written (the process ended before it recorded anything?)\n", out.string());
    return;
  }
  try {
    Snapshot s = load_snapshot(file.string());
    std::string cut = s.complete ? "" : ", cut short";
    if (s.events.empty()) {
      fs::remove(file, ec);
      fmt::print(stderr, "{}: not written: the process recorded no allocations{}\n", out.string(), cut);
      return;
    }
    if (d.staging.empty()) fs::rename(file, out, ec);
    else export_file(s, d.format, out.string());
    if (d.staging.empty() && s.complete) write_summary(s, out.string());  // and out.summary.json beside it
    Replay replay(s, 0);
    fmt::print(stderr, "wrote {} ({}{}): {} events{}, peak allocated {}{}\n", out.string(),
               format_bytes(fs::file_size(out, ec)), cut, s.events.size(),
               s.complete ? "" : " kept (the process ended before memrec finished its file)",
               format_bytes(replay.peak_allocated().bytes),
               s.metadata.count("device.0.type") ? " on " + s.metadata.at("device.0.type") : "");
    if (std::optional<RecordingCost> c = cost ? recording_cost(s) : std::nullopt)
      fmt::print(stderr, "{}", cost_text(*c));
    for (const auto& [key, note] : s.metadata)  // what the recorder repaired in the process (metadata notes.*)
      if (key.starts_with("notes.")) fmt::print(stderr, "memrec: note: {}: {}\n", out.string(), note);
    if (auto kernels = s.metadata.find("recorder.kernels"); kernels != s.metadata.end() && kernels->second.starts_with("off: "))
      fmt::print(stderr, "memrec: recording without kernels and device memory activity in {}: {}\n", out.string(),
                 kernels->second.substr(5));
    if (!pickle.empty()) {
      export_file(s, "pickle", pickle);
      fmt::print(stderr, "wrote {} (open in pytorch.org/memory_viz)\n", pickle);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: unreadable: {}\n", file.string(), e.what());
  }
}

// A folder beside the output for the processes' .memrec files when the output is in another format.
fs::path make_staging(const fs::path& output) {
  std::string dir = (output.parent_path() / ".memrec-record-XXXXXX").string();
  if (!mkdtemp(dir.data())) throw Error(fmt::format("cannot create a folder beside {}: {}", output.string(), std::strerror(errno)));
  return dir;
}

void set_environment(const RecordArgs& a, const fs::path& recorded, const std::string& session,
                     const std::vector<std::string>& program) {
  std::string command, pythonpath;
  for (const std::string& p : program) command += (command.empty() ? "" : " ") + p;
  for (const fs::path& dir : python_path()) pythonpath += (pythonpath.empty() ? "" : ":") + dir.string();
  setenv("PYTHONPATH", prepend_path(pythonpath, getenv("PYTHONPATH")).c_str(), 1);
  setenv("MEMREC_RECORD_OUTPUT", recorded.c_str(), 1);
  setenv("MEMREC_RECORD_SESSION", session.c_str(), 1);
  setenv("MEMREC_RECORD_STACKS", a.stacks.c_str(), 1);
  setenv("MEMREC_RECORD_KERNELS", a.kernels.c_str(), 1);
  setenv("MEMREC_RECORD_OPS", a.ops.c_str(), 1);
  setenv("MEMREC_RECORD_DEVICE_MEMORY", a.device_memory.c_str(), 1);
  setenv("MEMREC_RECORD_MAX_EVENTS", std::to_string(a.max_events).c_str(), 1);
  setenv("MEMREC_RECORD_COMMAND", command.c_str(), 1);
  if (a.window.empty()) unsetenv("MEMREC_RECORD_WINDOW");  // not one an outer memrec record left behind
  else setenv("MEMREC_RECORD_WINDOW", a.window.c_str(), 1);
  if (auto libs = preload_libraries()) {
    const char* preload = getenv("LD_PRELOAD");
    setenv("LD_PRELOAD", (libs->first.string() + (preload && *preload ? std::string(":") + preload : "")).c_str(), 1);
    setenv("MEMREC_RECORD_LIBRARY", libs->second.c_str(), 1);
  }
  unsetenv("MEMREC_RECORD_PARENT");
}

int record(const RecordArgs& a, const std::vector<std::string>& program) {
  if (program.empty() || program.front().empty()) throw Error("memrec record: no program to run (memrec record [options] -- PROGRAM [ARGS...])");
  std::vector<Output> outputs{{"-o", a.output}};
  if (!a.pickle.empty()) outputs.push_back({"--pickle", a.pickle});
  check_outputs({}, outputs);
  if (!a.force) refuse_existing(outputs);
  if (!a.window.empty()) parse_schedule(a.window);  // refused before the program starts
  Destination d{fs::absolute(a.output), record_format(a.output), {}};
  python_path();  // a build without the Python module says so before the program runs
  if (d.format != "memrec") d.staging = make_staging(d.output);

  char session[] = "/tmp/memrec-record-XXXXXX";
  int fd = mkstemp(session);
  if (fd < 0) throw Error(fmt::format("cannot create a file in /tmp: {}", std::strerror(errno)));
  close(fd);
  set_environment(a, d.recorded(), session, program);
  int status = run_program(program);
  auto [files, notes] = read_session(session);
  unlink(session);
  for (const std::string& note : notes) fmt::print(stderr, "memrec: {}\n", note);
  if (files.empty()) say_nothing_recorded(program);
  for (const std::string& f : files) {
    fs::path out = d.final_name(f, files.size());
    std::string pickle = a.pickle.empty() ? "" : tagged(a.pickle, files.size() == 1 ? "" : tag_of(f, d.recorded())).string();
    finish(f, out, d, pickle, a.cost);
  }
  std::error_code ec;
  if (!d.staging.empty()) fs::remove_all(d.staging, ec);
  if (status != 0) fmt::print(stderr, "memrec: {} exited with status {}\n", program[0], status);
  return status;
}

}  // namespace

void add_record_command(CLI::App& app) {
  auto args = std::make_shared<RecordArgs>();
  auto* cmd = app.add_subcommand("record", "Run a program unchanged and record every process in it that uses PyTorch");
  cmd->prefix_command();  // everything from the program's name on is the program's
  cmd->footer("One file per process: OUT with one process, else OUT with .rank{RANK} (or .pid{PID}) before its "
              "extension. Exits with the program's exit status. docs/python.md");
  cmd->add_option("-o,--output", args->output,
                  "the recording: .memrec, or .pickle/.pkl (memory_viz) or .json (Perfetto) converted at the end")
      ->capture_default_str();
  cmd->add_flag("--force", args->force, "replace outputs that exist");
  cmd->add_flag("--cost", args->cost, "say what recording cost the program: its events, memrec's time a step and "
                "that time's share of the step");
  cmd->add_option("--pickle", args->pickle, "also write PyTorch's snapshot pickle (memory_viz)");
  cmd->add_option("--stacks", args->stacks, "frames per allocation: all (Python and C++), python, cpp, off")
      ->capture_default_str()->check(CLI::IsMember({"all", "python", "cpp", "off"}));
  cmd->add_option("--kernels", args->kernels,
                  "CUPTI kernel timeline (CUDA): on = the first 3 steps, then every 10th; all = every step")
      ->capture_default_str()->check(CLI::IsMember({"on", "all", "off"}));
  cmd->add_option("--ops", args->ops,
                  "aten op and record_function scopes: on = on the kernels' steps (elsewhere the C++ frames name "
                  "the op), all = every op of every step (torch's per-op cost on each)")
      ->capture_default_str()->check(CLI::IsMember({"on", "all", "off"}));
  cmd->add_option("--device-memory", args->device_memory,
                  "device memory outside the caching allocator (CUDA: CUPTI memory calls, NVML); with --kernels off, "
                  "off starts no CUPTI in the program")
      ->capture_default_str()->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--max-events", args->max_events, "keep at most this many allocator events per process (0 = no cap)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--record", args->window,
                  "record only these optimizer steps of the program, as torch.profiler's schedule: "
                  "wait=W,warmup=N,active=A");
  cmd->allow_extras();
  auto program = std::make_shared<std::string>();
  cmd->add_option("program", *program, "PROGRAM [ARGS...], after -- or from the first word that is no option");
  cmd->callback([args, cmd, program] {
    std::vector<std::string> line{*program}, rest = cmd->remaining();
    size_t skip = !rest.empty() && rest.front() == "--";  // CLI11 passes on the "--" that ended our options
    line.insert(line.end(), rest.begin() + skip, rest.end());
    int status = record(*args, line);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace memrec::cli
