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
#include "memrec/load.h"
#include "memrec/pickle.h"
#include "memrec/replay.h"
#include "memrec/summary.h"
#include "output.h"
#include "schedule.h"

namespace fs = std::filesystem;

namespace memrec::cli {
namespace {

struct RecordArgs {
  std::string output = "run.memrec";
  std::string pickle;
  std::string stacks = "all", kernels = "on";
  uint64_t max_events = 0;
  std::string window;  // wait=W,warmup=N,active=A
};

// The installed layout (<prefix>/bin/memrec, <prefix>/lib/memrec/python), else the build tree's python/.
fs::path python_dir() {
  if (const char* dir = std::getenv("MEMREC_PYTHON_DIR")) return dir;
  std::error_code ec;
  fs::path installed = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "lib/memrec/python";
  for (const fs::path& dir : {installed, fs::path(MEMREC_PYTHON_BUILD_DIR)})
    if (!dir.empty() && fs::exists(dir / "memrec/_boot/sitecustomize.py", ec)) return dir;
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

// The files the recording processes announced, in order, without repeats.
std::vector<std::string> recorded_files(const std::string& session) {
  std::vector<std::string> files;
  std::ifstream in(session);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && std::find(files.begin(), files.end(), line) == files.end()) files.push_back(line);
  return files;
}

// run.rank0.memrec -> run.rank0.pickle when --pickle run.pickle names several files' pickles.
std::string pickle_for(const std::string& file, const std::string& output, const std::string& pickle, size_t n) {
  if (n == 1) return pickle;
  std::string stem = fs::path(file).stem().string();                   // run.rank0
  std::string tag = stem.substr(fs::path(output).stem().string().size());  // .rank0
  fs::path p(pickle);
  return (p.parent_path() / (p.stem().string() + tag + p.extension().string())).string();
}

void summarize(const std::string& file, const std::string& pickle) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    fmt::print(stderr, "{}: not written (the process ended before it recorded anything?)\n", file);
    return;
  }
  try {
    Snapshot s = load_snapshot(file);
    Replay replay(s, 0);
    fmt::print(stderr, "wrote {} ({}): {} events, peak allocated {}{}\n", file, format_bytes(fs::file_size(file)),
               s.events.size(), format_bytes(replay.peak_allocated().bytes),
               s.metadata.count("device.0.type") ? " on " + s.metadata.at("device.0.type") : "");
    if (!pickle.empty()) {
      export_pickle_file(s, pickle);
      fmt::print(stderr, "wrote {} (open in pytorch.org/memory_viz)\n", pickle);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: unreadable: {}\n", file, e.what());
  }
}

int record(const RecordArgs& a, const std::vector<std::string>& program) {
  if (program.empty() || program.front().empty()) throw Error("memrec record: no program to run (memrec record [options] -- PROGRAM [ARGS...])");
  std::vector<Output> outputs{{"-o", a.output}};
  if (!a.pickle.empty()) outputs.push_back({"--pickle", a.pickle});
  check_outputs({}, outputs);
  if (!a.window.empty()) parse_schedule(a.window);  // refused before the program starts
  fs::path dir = python_dir();
  std::string output = fs::absolute(a.output).string();

  char session[] = "/tmp/memrec-record-XXXXXX";
  int fd = mkstemp(session);
  if (fd < 0) throw Error(fmt::format("cannot create a file in /tmp: {}", std::strerror(errno)));
  close(fd);
  std::string command;
  for (const std::string& p : program) command += (command.empty() ? "" : " ") + p;
  setenv("PYTHONPATH", prepend_path((dir / "memrec/_boot").string() + ":" + dir.string(), getenv("PYTHONPATH")).c_str(), 1);
  setenv("MEMREC_RECORD_OUTPUT", output.c_str(), 1);
  setenv("MEMREC_RECORD_SESSION", session, 1);
  setenv("MEMREC_RECORD_STACKS", a.stacks.c_str(), 1);
  setenv("MEMREC_RECORD_KERNELS", a.kernels.c_str(), 1);
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

  int status = run_program(program);
  std::vector<std::string> files = recorded_files(session);
  unlink(session);
  std::error_code ec;
  if (files.size() == 1 && files[0] != output && fs::exists(files[0], ec)) {
    fs::rename(files[0], output, ec);
    if (!ec) files[0] = output;
  }
  if (files.empty()) fmt::print(stderr, "memrec: no process imported torch: nothing recorded\n");
  for (const std::string& f : files) summarize(f, a.pickle.empty() ? "" : pickle_for(f, output, a.pickle, files.size()));
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
  cmd->add_option("-o,--output", args->output, "the .memrec file")->capture_default_str();
  cmd->add_option("--pickle", args->pickle, "also write PyTorch's snapshot pickle (memory_viz)");
  cmd->add_option("--stacks", args->stacks, "frames per allocation: all (Python and C++), python, cpp, off")
      ->capture_default_str()->check(CLI::IsMember({"all", "python", "cpp", "off"}));
  cmd->add_option("--kernels", args->kernels, "CUPTI kernel timeline (CUDA)")->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--max-events", args->max_events, "keep at most this many allocator events per process (0 = no cap)")
      ->capture_default_str();
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
