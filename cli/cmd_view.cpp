// `memrec view FILE... [--screenshot out.png] [--view timeline|flame|segments|modules] [--at TIME|peak]
//  [--range T1..T2 | --steps A..B] [--group-by KEY] [--size WxH] [--device N] [--follow]
//  [--scale-with RUN --sizes A,B --predict N]`
#include <memory>

#include "commands.h"
#include "output.h"
#include "memrec/scale.h"
#include "memrec/snapshot.h"
#include "memrec/viewer.h"

namespace memrec::cli {

void add_view_command(CLI::App& app) {
  auto opts = std::make_shared<viewer::Options>();
  auto size = std::make_shared<std::string>();
  auto files = std::make_shared<std::vector<std::string>>();
  auto ghost = std::make_shared<GhostFlags>();
  auto* cmd = app.add_subcommand("view", "Open a .memrec file or a PyTorch snapshot pickle in the viewer");
  // Checked in the callback: --follow waits for a file not created yet.
  cmd->add_option("file", *files, "Recording to open (.memrec or .pickle); several: the ranks of one run side by side")
      ->required();
  cmd->add_option("--screenshot", opts->screenshot, "Render off-screen, write this PNG and exit");
  cmd->add_option("--at", opts->at, "Instant to analyze: 'peak' (default) or a time after the start, e.g. 12ms");
  cmd->add_option("--view", opts->view, "The view the screenshot shows: timeline (default), flame, segments, modules, growth or advise");
  cmd->add_option("--range", opts->range,
                  "T1..T2, e.g. 10ms..25ms: the timeline zoomed to it (--view timeline), else the flame graph or "
                  "module view of the bytes allocated in it");
  cmd->add_option("--steps", opts->steps,
                  "Read only the training steps A..B (scopes named 'step N'), e.g. 3..5; without --view, the flame "
                  "graph of the bytes allocated in them");
  cmd->add_option("--group-by", opts->group_by,
                  "stack, stack-bottom-up, op, module, phase, site, category, layer or pool (default: "
                  "site in the attribution panel, stack in the flame graph)");
  cmd->add_flag("--every-frame", opts->every_frame,
               "Stack trees keep every frame (default: the interpreter, libc and dispatcher frames are folded)");
  cmd->add_option("--size", *size, "Window or screenshot size, WxH (default 1600x900)");
  cmd->add_flag("--follow", opts->follow,
                "Show the file while it is written: reloaded as it grows (checked four times a second); waits for a "
                "file not created yet");
  add_device_option(cmd, opts->device);
  add_ghost_options(cmd, *ghost);
  cmd->callback([opts, size, files, ghost] {
    if (!opts->follow)
      for (std::string& f : *files)
        if (std::string why = CLI::ExistingFile(f); !why.empty()) throw CLI::ValidationError("file", why);
    opts->path = files->front();
    if (files->size() > 1) opts->ranks = *files;
    check_outputs(*files, {{"--screenshot", opts->screenshot}});
    if (ghost->given() && files->size() > 1) throw Error("--scale-with draws over one run, not over several ranks");
    if (ghost->given() && opts->follow)
      throw Error("--follow shows a recording as it grows and --scale-with a finished one: drop one of them");
    if (!size->empty()) {
      auto wh = viewer::parse_size(*size);
      if (!wh) throw Error("--size wants WxH between 320x240 and 8192x8192, got " + *size);
      opts->width = wh->first;
      opts->height = wh->second;
    }
    if (ghost->given())
      opts->ghost = std::make_shared<const ScaleWhatif>(ghost_prediction(*ghost, opts->path, opts->device));
    int rc = viewer::run(*opts);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace memrec::cli
