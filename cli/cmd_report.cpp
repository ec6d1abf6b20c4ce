// `memrec report FILE -o OUT [--format html|summary|svg] [--screenshot PNG | --no-screenshot] [--device N] [--top N]
//  [--scale-with RUN --sizes A,B --predict N]`
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "commands.h"
#include "output.h"
#include "memrec/load.h"
#include "memrec/devices.h"
#include "memrec/report.h"
#include "memrec/timeline_svg.h"
#include "memrec/units.h"

extern char** environ;

namespace memrec::cli {
namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::string input, output, screenshot, format = "html";
  bool no_screenshot = false;
  std::optional<uint8_t> device;  // chosen from the file before the picture is drawn
  size_t top = 15;
  RangeFlags part;
  GhostFlags ghost;
};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct Picture {
  std::string png;
  std::string missing;  // why there is none: the page draws the timeline itself and says why
};

#ifdef MEMREC_HAS_VIEW
std::optional<std::string> find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((fs::path(dir) / name).c_str(), X_OK) == 0) return (fs::path(dir) / name).string();
  return std::nullopt;
}

// A private folder for the screenshot and the viewer's log, gone when the report is written.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "memrec-report-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw Error("cannot create a temporary folder in " + fs::temp_directory_path().string());
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Runs argv with its output into `log`; in its own process group so that a hung X server and viewer
// are killed together at the timeout. Returns the exit code, or -1 when it could not run or was killed.
int run_process(const std::vector<std::string>& args, const fs::path& log, std::chrono::seconds timeout) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int err = posix_spawn(&pid, argv[0], &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (err != 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The last non-empty line the viewer printed: usually the reason it failed.
std::string last_line(const std::string& text) {
  std::istringstream lines(text);
  std::string last;
  for (std::string line; std::getline(lines, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last.empty() ? "no output" : last;
}
#endif

// Renders the timeline with this same binary's `memrec view --screenshot`, under a virtual X server when
// there is no display, since the viewer needs one.
Picture render_timeline([[maybe_unused]] const ReportArgs& a) {
#ifndef MEMREC_HAS_VIEW
  return {"", "this memrec was built without the viewer (MEMREC_WITH_VIEWER=OFF)"};
#else
  ScratchDir dir;
  fs::path png = dir.path / "timeline.png", log = dir.path / "view.log";
  std::vector<std::string> args = {fs::read_symlink("/proc/self/exe").string(), "view", a.input, "--screenshot",
                                   png.string(), "--size", "1600x700", "--view", "timeline", "--at", "peak",
                                   "--device", std::to_string(*a.device)};
  if (!a.part.range.empty()) args.insert(args.end(), {"--range", a.part.range});
  if (!a.part.steps.empty()) args.insert(args.end(), {"--steps", a.part.steps});
  std::vector<std::string> ghost = a.ghost.given() ? a.ghost.args() : std::vector<std::string>{};
  args.insert(args.end(), ghost.begin(), ghost.end());
  auto xvfb = find_in_path("xvfb-run");
  if (!std::getenv("DISPLAY") && xvfb) args.insert(args.begin(), {*xvfb, "-a"});
  int rc = run_process(args, log, std::chrono::seconds(120));
  std::string bytes = read_bytes(png);
  if (rc == 0 && is_png(bytes)) return {bytes, ""};
  std::string why = rc == -1 ? "it did not finish" : fmt::format("exit code {}", rc);
  if (!std::getenv("DISPLAY") && !xvfb) why += ", no $DISPLAY and no xvfb-run";
  return {"", fmt::format("memrec view --screenshot failed ({}): {}", why, last_line(read_bytes(log)))};
#endif
}

Picture picture(const ReportArgs& a) {
  if (a.no_screenshot) return {"", "--no-screenshot was given"};
  if (a.screenshot.empty()) return render_timeline(a);
  std::string bytes = read_bytes(a.screenshot);
  if (!is_png(bytes)) throw Error("--screenshot: " + a.screenshot + " is not a PNG file");
  return {bytes, ""};
}

ReportOptions options(const ReportArgs& a, const ScaleWhatif* scale, Picture pic = {}) {
  return {.file_name = fs::path(a.input).filename().string(),
          .device = *a.device,
          .top = a.top,
          .png = std::move(pic.png),
          .missing_png = std::move(pic.missing),
          .scale = scale};
}

std::string page(const ReportArgs& a, const Snapshot& s, const ScaleWhatif* scale) {
  Picture pic = picture(a);
  if (pic.png.empty() && !a.no_screenshot)
    fmt::print(stderr, "memrec report: no viewer screenshot: {}; drawing the timeline without a display\n",
               pic.missing);
  return report_html(s, options(a, scale, std::move(pic)));
}

void write_report(ReportArgs a) {
  std::vector<std::string> inputs = {a.input, a.screenshot};
  inputs.insert(inputs.end(), a.ghost.with.begin(), a.ghost.with.end());
  check_outputs(inputs, {{"-o", a.output}});
  if (a.format != "html" && (a.no_screenshot || !a.screenshot.empty()))
    throw Error("--screenshot and --no-screenshot choose the HTML page's picture; --format " + a.format +
                " always draws the timeline without a display");
  if (a.format != "html" && a.ghost.given())
    throw Error("--scale-with adds a section and a ghost line to the HTML page: leave out --format " + a.format);
  std::optional<Range> part = a.part.parsed();
  if (part && a.ghost.given())
    throw Error(fmt::format("--scale-with predicts from whole runs: leave out {}", part->flag));
  Snapshot s = load_snapshot(a.input, stderr, part);  // bad input fails here, before the viewer runs
  a.device = choose_device(s, a.device);  // the picture and the tables show the same device
  std::optional<ScaleWhatif> scale;
  if (a.ghost.given()) scale = ghost_prediction(a.ghost, a.input, a.device);
  std::string text = a.format == "svg"       ? timeline_svg(s, *a.device)
                     : a.format == "summary" ? summary_html(s, options(a, nullptr))
                                             : page(a, s, scale ? &*scale : nullptr);
  write_output(a.output, [&](const std::string& path) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.close();
    if (!out) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  });
  fmt::print("wrote {} ({})\n", a.output, format_bytes(text.size()));
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Write one self-contained HTML page (timeline, peaks, owners, layers, "
                                           "what-if, sites), or its summary or timeline alone");
  cmd->add_option("input", a->input, ".memrec file or PyTorch pickle")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", a->output, "file to write")->required();
  cmd->add_option("--format", a->format,
                  "html: the page; summary: the peaks, the timeline and the top owners as an HTML fragment (what a "
                  "notebook's %%memrec shows); svg: the timeline picture alone, drawn without a display")
      ->capture_default_str()
      ->check(CLI::IsMember({"html", "summary", "svg"}));
  auto* shot = cmd->add_option("--screenshot", a->screenshot, "use this PNG as the timeline picture, not the viewer's")
                   ->check(CLI::ExistingFile);
  cmd->add_flag("--no-screenshot", a->no_screenshot, "draw the timeline without the viewer (no display needed)")
      ->excludes(shot);
  add_device_option(cmd, a->device);
  add_internal_option(cmd);
  cmd->add_option("--top", a->top, "rows per table")->check(CLI::Range(1, 100000));
  add_range_options(cmd, a->part);
  add_ghost_options(cmd, a->ghost);
  cmd->callback([a] { write_report(*a); });
}

}  // namespace memrec::cli
