// Loaded into a libtorch program by memrec's preload library (preload.cpp): records it from main() until it
// exits, with the options `memrec record` put in the environment, into a file named as the Python bootstrap names
// its files (memrec/_autostart.py): run.rank{RANK}.memrec, else run.pid{PID}.memrec.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "memrec/recorder.h"

namespace {

std::string env(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string output_path(const std::string& base) {
  size_t slash = base.rfind('/'), dot = base.rfind('.');
  bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  std::string root = has_ext ? base.substr(0, dot) : base, ext = has_ext ? base.substr(dot) : "";
  std::string rank = env("RANK");
  bool numeric = !rank.empty() && rank.find_first_not_of("0123456789") == std::string::npos;
  return root + (numeric ? ".rank" + rank : ".pid" + std::to_string(getpid())) + ext;
}

void after_fork_in_child();

struct AutoRecord {
  std::unique_ptr<memrec::Recorder> recorder;

  AutoRecord() {
    std::string base = env("MEMREC_RECORD_OUTPUT");
    if (base.empty() || !env("MEMREC_RECORD_PARENT").empty()) return;
    setenv("MEMREC_RECORD_PARENT", std::to_string(getpid()).c_str(), 1);  // children are not recorded
    memrec::RecorderOptions options;
    options.output = output_path(base);
    std::string stacks = env("MEMREC_RECORD_STACKS", "all");
    options.stacks = stacks == "all" || stacks == "cpp";
    std::string kernels = env("MEMREC_RECORD_KERNELS", "on");
    options.kernels = kernels != "off";
    if (kernels == "all") options.kernel_every = 1;
    options.device_memory = env("MEMREC_RECORD_DEVICE_MEMORY", "on") == "on";
    options.max_events = std::strtoull(env("MEMREC_RECORD_MAX_EVENTS", "0").c_str(), nullptr, 10);
    options.cuda = env("MEMREC_RECORD_CUDA", "1") != "0";  // the preload library's finding, for this process only
    unsetenv("MEMREC_RECORD_CUDA");
    if (std::string session = env("MEMREC_RECORD_SESSION"); !session.empty())
      std::ofstream(session, std::ios::app) << options.output << "\n";
    try {
      recorder = std::make_unique<memrec::Recorder>(options);
      recorder->start();
      recorder->set_metadata("command", env("MEMREC_RECORD_COMMAND"));
      pthread_atfork(nullptr, nullptr, &after_fork_in_child);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "memrec: not recording this process: %s\n", e.what());
      recorder.reset();
    }
  }
};

// Destroyed at exit, which stops the recorder and writes the file: registered when the preload library loaded
// this one, so it runs before libtorch's own exit handlers.
AutoRecord g_record;

// A forked child is not recorded: the recorder's drain thread and file belong to the parent, so the child leaks it
// rather than stop it at exit.
void after_fork_in_child() {
  memrec::forget_recording_after_fork();
  (void)g_record.recorder.release();
}

}  // namespace
