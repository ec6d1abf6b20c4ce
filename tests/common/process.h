// Running the memrec binary (or python3) from tests and capturing what it printed.
#pragma once

#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace memrec::testing {

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

}  // namespace memrec::testing
