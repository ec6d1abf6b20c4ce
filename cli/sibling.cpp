#include "sibling.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/core.h>

#include "memrec/snapshot.h"

namespace memrec::cli {

void add_sibling_command(CLI::App& app, const std::string& name, const std::string& description,
                         const std::string& executable, char** argv) {
  auto* cmd = app.add_subcommand(name, description);
  cmd->prefix_command();  // everything after the name goes to the sibling as it was typed
  cmd->set_help_flag();   // `memrec NAME --help` too: the sibling knows the command's options
  cmd->callback([name, executable, argv] {
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
    std::filesystem::path sibling = self.parent_path() / executable;
    execv(sibling.c_str(), argv);
    throw Error(fmt::format("'memrec {}' needs {} beside {}: {}", name, sibling.string(), self.filename().string(),
                            std::strerror(errno)));
  });
}

}  // namespace memrec::cli
