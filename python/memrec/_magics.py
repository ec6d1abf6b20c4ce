"""IPython magics, registered by `%load_ext memrec`.

`%%memrec [PATH]` records the cell in this kernel (memrec.start/stop around it) and shows the peaks, the timeline
and the top owners; `%memrec_report [PATH]` shows the last recording's `memrec report` page. Both are drawn by the
memrec command (`memrec report --format summary`, `memrec report --no-screenshot`), without a display, so they show
what `memrec stats` says about the same file in the same units.
"""
import html
import os
import subprocess
import tempfile

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from .__main__ import executable

_TOP_OWNERS = "10"


def register(ipython):
    ipython.register_magics(MemrecMagics)


class MemrecError(Exception):
    pass


def run_memrec(*args):
    """Runs the memrec command; returns its stdout. Its error message, when it fails, becomes a MemrecError."""
    done = subprocess.run([executable(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise MemrecError(done.stderr.strip() or f"memrec {args[0]} exited with status {done.returncode}")
    return done.stdout


def report_text(path, *options):
    """What `memrec report PATH -o FILE OPTIONS` writes, read back from a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="memrec-report-") as folder:
        out = os.path.join(folder, "out")
        run_memrec("report", path, "-o", out, *options)
        with open(out, encoding="utf-8") as f:
            return f.read()


@magics_class
class MemrecMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        self.last = None    # the last recording's path
        self.folder = None  # where cells' recordings go unless the magic names a file

    @cell_magic
    def memrec(self, line, cell):
        """%%memrec [PATH]: records this cell into PATH (default: a temporary file named after the cell)."""
        from . import _recording  # imports torch: only once a cell is recorded
        path = line.strip() or self._cell_path()
        _recording.start(path)
        try:
            self.shell.run_cell(cell)
        finally:
            _recording.stop()
        self.last = path
        show(lambda: Recording(path))

    @line_magic
    def memrec_report(self, line):
        """%memrec_report [PATH]: the `memrec report` page of PATH (default: the last %%memrec cell's recording)."""
        path = line.strip() or self.last
        if not path:
            print("memrec: no recording yet: record a cell with %%memrec first, or name a file")
            return
        show(lambda: Report(path))

    def _cell_path(self):
        self.folder = self.folder or tempfile.mkdtemp(prefix="memrec-")
        return os.path.join(self.folder, f"cell{self.shell.execution_count}.memrec")


def show(make):
    """Displays what make() returns, or memrec's own message when the command refused (no allocations, ...)."""
    try:
        display(make())
    except MemrecError as e:
        print(f"memrec: {e}")


class Recording:
    """A recorded cell: `memrec report --format summary` in a notebook, `memrec stats --by owner` in a terminal; both
    followed by `memrec advise` (what to change)."""

    def __init__(self, path):
        self.path = path
        self.summary = report_text(path, "--format", "summary", "--top", _TOP_OWNERS)
        self.stats = run_memrec("stats", path, "--by", "owner", "--top", _TOP_OWNERS)
        self.advice = run_memrec("advise", path)

    def __repr__(self):
        return f"{self.path}:\n{self.stats}\nWhat to change:\n{self.advice}"

    def _repr_html_(self):
        return (f"<div class='memrec'><p>Recorded into <code>{html.escape(self.path)}</code></p>{self.summary}"
                f"<details open><summary>What to change</summary><pre>{html.escape(self.advice)}</pre></details></div>")


class Report:
    """`memrec report`'s page, in an iframe: its styles stay its own. Drawn without a display, as kernels often
    run on machines that have none."""

    def __init__(self, path):
        self.page = report_text(path, "--no-screenshot")
        self.path = path

    def __repr__(self):
        return f"memrec report of {self.path} ({len(self.page)} bytes of HTML: shown in a notebook)"

    def _repr_html_(self):
        return (f"<iframe class='memrec-report' srcdoc=\"{html.escape(self.page, quote=True)}\" "
                "style='width:100%;height:800px;border:0'></iframe>")
