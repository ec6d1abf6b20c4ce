// Running the memrec binary (or python3) from tests and capturing what it printed.
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "memrec/format.h"

// Set when the tests are built with AddressSanitizer, whose shadow memory defeats memory limits and RSS checks.
#if defined(__SANITIZE_ADDRESS__)
#define MEMREC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMREC_TEST_ASAN 1
#endif
#endif

namespace memrec::test {

struct CommandResult {
  int exit_code = -1;  // -1 when the process did not exit normally (crashed)
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

#ifdef MEMREC_BINARY
// The memrec binary under test with `args` (paths in them already quoted).
inline CommandResult memrec(const std::string& args) { return run_command(quote(MEMREC_BINARY) + " " + args); }

// The same after bash ran `limits` (ulimit, trap) in the process that memrec then replaces.
inline CommandResult memrec_limited(const std::string& args, const std::string& limits) {
  return run_command("bash -c " + quote(limits + " exec " + quote(MEMREC_BINARY) + " " + args));
}
#endif

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A process the test signals while it runs; stdout and stderr go to `log`. Killed if still running at the end.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    int rc = posix_spawn(&pid_, args[0], &files, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  void signal(int sig) const { ::kill(pid_, sig); }
  // The exit code, 128 + N when killed by signal N, or -1 while still running after `timeout`.
  int wait(std::chrono::duration<double> timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  pid_t pid_ = -1;
};

// A fresh folder under the system temp dir, removed by the destructor. Removal goes through POSIX nftw rather
// than std::filesystem::remove_all, which crashed test binaries linked with pip's libtorch 2.11.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "memrec-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path = tmpl;
  }
  ~TempDir() {
    auto remove_entry = [](const char* name, const struct stat*, int, struct FTW*) { return ::remove(name); };
    nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Until a process's recording (the file whose name starts with `stem`; it gets the name the user gave when the
// program ends) holds at least `events` allocator events on disk: a loaded machine can take longer than the
// recorder's 0.5 s flush period, and a first flush can hold scopes alone.
inline void wait_for_events_on_disk(const std::filesystem::path& dir, const std::string& stem, size_t events) {
  for (int i = 0; i < 600; ++i) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.path().filename().string().starts_with(stem + ".")) continue;
      try {
        if (read_file(entry.path().string()).events.size() >= events) return;
      } catch (const std::exception&) {  // not yet a whole chunk
      }
    }
    usleep(50'000);
  }
  throw std::runtime_error("fewer than " + std::to_string(events) + " events on disk in " + stem + ".* after 30 s");
}

}  // namespace memrec::test
