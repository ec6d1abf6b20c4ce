// The terminal loop of `memrec top`: draws top_lines(), turns keys into TopState, and with --follow re-reads the
// file whenever it changed (checked four times a second).
#include "memrec/top.h"

#include <curses.h>
#include <langinfo.h>
#include <unistd.h>

#include <clocale>
#include <cstring>

#include "memrec/load.h"
#include "memrec/snapshot.h"
#include "top_view.h"

namespace memrec::terminal {
namespace {

constexpr int kTickMs = 250;

// The terminal in curses mode for the life of the object: an exception on the way out still restores it.
class Curses {
 public:
  Curses() {
    std::setlocale(LC_ALL, "");  // UTF-8 output where the terminal's locale says so
    screen_ = newterm(nullptr, stdout, stdin);
    if (!screen_) throw Error("memrec top: this terminal (TERM) is unknown to curses; try TERM=xterm");
    cbreak(), noecho(), keypad(stdscr, TRUE), curs_set(0), timeout(kTickMs);
  }
  ~Curses() {
    endwin();
    delscreen(screen_);
  }
  Curses(const Curses&) = delete;
  Curses& operator=(const Curses&) = delete;

  void draw(const std::vector<std::string>& lines) {
    erase();
    for (size_t i = 0; i < lines.size(); ++i) mvaddstr(static_cast<int>(i), 0, lines[i].c_str());
    refresh();
  }
  Screen screen() const {
    return {getmaxx(stdscr), getmaxy(stdscr), std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0};
  }

 private:
  SCREEN* screen_ = nullptr;
};

// The document and what is derived from it for the current screen width, reloaded as the file grows.
class Tail {
 public:
  explicit Tail(const TopOptions& o) : options_(o) { reload(); }

  // Reads the file again when it changed; a read that fails keeps what was shown and says why.
  void reload() {
    FileStamp now = file_stamp(options_.file);
    if (stamp_ && now == *stamp_) return;
    stamp_ = now;
    try {
      doc_ = load_document(options_.file, options_.device, options_.follow);
      series_width_ = -1;
      why_.clear();
    } catch (const Error& e) {
      if (!options_.follow) throw;
      why_ = e.what();
    }
  }

  std::vector<std::string> lines(const TopState& state, const Screen& screen) {
    Header header{options_.file, options_.follow};
    if (!doc_) return waiting_lines(header, why_, screen);
    if (series_width_ != screen.width) series_ = series(*doc_->replay, chart_axis(*doc_, screen)), series_width_ = screen.width;
    return top_lines(*doc_, series_, state, screen, header);
  }

  int columns(const Screen& screen) const { return doc_ ? chart_axis(*doc_, screen).columns : 1; }
  // The column the allocated peak falls in, where stepping from the peak starts.
  int peak_column(const Screen& screen) const {
    if (!doc_) return 0;
    const Replay& r = *doc_->replay;
    return chart_axis(*doc_, screen).column_of(r.time_of(r.peak_allocated().step) - r.time_of(kNoEvent));
  }

 private:
  TopOptions options_;
  std::optional<FileStamp> stamp_;  // of the file when last read
  std::optional<TopDocument> doc_;
  std::string why_;
  Series series_;
  int series_width_ = -1;
};

// Applies a key; false when it quits.
bool apply_key(int key, TopState& state, const Tail& tail, const Screen& screen) {
  int last = tail.columns(screen) - 1;
  int at = std::min(state.column.value_or(tail.peak_column(screen)), last);
  switch (key) {
    case 'q': case 'Q': return false;
    case KEY_LEFT: state.column = std::max(at - 1, 0); break;
    case KEY_RIGHT: state.column = std::min(at + 1, last); break;
    case KEY_HOME: state.column = 0; break;
    case KEY_END: state.column = last; break;
    case 'p': case 'P': state.column.reset(); break;
    case 'g': case '\t': state.grouping = (state.grouping + 1) % std::size(kGroupings); break;
    default:
      for (size_t i = 0; i < std::size(kGroupings); ++i)
        if (key == kGroupings[i].key) state.grouping = i;
  }
  return true;
}

}  // namespace

void run_top(const TopOptions& options) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
    throw Error("memrec top draws in a terminal: run it in one (over SSH: ssh -t HOST memrec top FILE)");
  Tail tail(options);
  Curses curses;
  TopState state;
  for (;;) {
    Screen screen = curses.screen();
    if (state.column) state.column = std::min(*state.column, tail.columns(screen) - 1);  // after a resize
    curses.draw(tail.lines(state, screen));
    int key = getch();
    if (key != ERR && !apply_key(key, state, tail, screen)) return;
    if (options.follow) tail.reload();
  }
}

}  // namespace memrec::terminal
