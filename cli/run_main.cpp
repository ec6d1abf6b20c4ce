// memrec-run: the libtorch half of memrec. `memrec run ARGS` execs it with the same argv, so it answers as
// `memrec run` (usage lines included) while `memrec` itself starts without loading libtorch.
#include "app.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"memrec: where your GPU memory goes"};
  app.require_subcommand(1);
  memrec::cli::add_run_command(app);
  return memrec::cli::run_app(app, argc, argv);
}
