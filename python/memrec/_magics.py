"""IPython magics, registered by `%load_ext memrec`.

`%%memrec [PATH]` records the cell in this kernel (memrec.start/stop around it) and shows the timeline, the peak
and the top owners; `%memrec_report [PATH]` shows the last recording's `memrec report` page. What they show comes
from the memrec command's own results (`stats --by owner --json`, the Perfetto export's counters), so it is what
`memrec stats` says about the same file; the timeline is an SVG, drawn without a display.
"""
import html
import json
import os
import subprocess
import tempfile

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import HTML, display

from .__main__ import executable

_TOP_OWNERS = 10
_WIDTH, _HEIGHT, _MARGIN = 760, 200, 70  # the timeline picture, in pixels; the margin holds the axis labels


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
    """A recorded cell: HTML (timeline, peak, owners) in a notebook, text in a terminal."""

    def __init__(self, path):
        self.path = path
        self.stats = json.loads(run_memrec("stats", path, "--by", "owner", "--json"))
        self.samples = counters(path, self.stats["device"])

    def peak(self):
        p = self.stats["peak_allocated"]
        step = f", {p['training_step']}" if p.get("training_step") else ""
        return p["bytes"], f"{format_bytes(p['bytes'])} at +{format_duration(p['time_ns'])}{step}"

    def owners(self):
        return self.stats["live"][:_TOP_OWNERS]

    def __repr__(self):
        lines = [f"{self.path}: peak allocated {self.peak()[1]}, by owner:"]
        lines += [f"  {format_bytes(o['bytes']):>12} {100 * o['share']:5.1f}% {o['count']:6}x  {o['key']}"
                  for o in self.owners()]
        return "\n".join(lines)

    def _repr_html_(self):
        peak_bytes, peak_text = self.peak()
        right = "style='text-align:right;padding-right:1em'"
        rows = "".join(f"<tr><td {right} title='{o['bytes']} bytes'>{format_bytes(o['bytes'])}</td>"
                       f"<td {right}>{100 * o['share']:.1f}%</td><td {right}>{o['count']}</td>"
                       f"<td style='text-align:left'>{html.escape(o['key'])}</td></tr>" for o in self.owners())
        return (f"<div class='memrec'><p><code>{html.escape(self.path)}</code>: peak allocated "
                f"<b class='memrec-peak' title='{peak_bytes} bytes'>{peak_text}</b></p>"
                f"{timeline_svg(self.samples, peak_bytes)}"
                f"<table class='memrec-owners'><tr><th>bytes</th><th>share</th><th>blocks</th>"
                f"<th>owner at the peak</th></tr>{rows}</table></div>")


class Report:
    """`memrec report`'s page, in an iframe: its styles stay its own."""

    def __init__(self, path):
        with tempfile.TemporaryDirectory(prefix="memrec-report-") as folder:
            out = os.path.join(folder, "report.html")
            run_memrec("report", path, "-o", out)
            with open(out, encoding="utf-8") as f:
                self.page = f.read()
        self.path = path

    def __repr__(self):
        return f"memrec report of {self.path} ({len(self.page)} bytes of HTML: shown in a notebook)"

    def _repr_html_(self):
        return (f"<iframe class='memrec-report' srcdoc=\"{html.escape(self.page, quote=True)}\" "
                "style='width:100%;height:800px;border:0'></iframe>")


def counters(path, device):
    """(time in us, allocated, reserved) after each event of `device`, from the Perfetto export's counters."""
    with tempfile.TemporaryDirectory(prefix="memrec-counters-") as folder:
        out = os.path.join(folder, "trace.json")
        run_memrec("export", path, "--format", "perfetto", "-o", out)
        with open(out) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [(e["ts"], e["args"]["allocated"], e["args"]["reserved"])
            for e in events if e.get("ph") == "C" and e.get("pid") == device]


def columns(samples, width):
    """Per pixel column, the highest allocated and reserved over the states in force during it (as the viewer's
    levels of detail): a column with no event keeps the state before it."""
    t0, t1 = samples[0][0], samples[-1][0]
    span = (t1 - t0) or 1
    top = [None] * width
    for t, allocated, reserved in samples:
        c = min(width - 1, int((t - t0) / span * width))
        a, r = top[c] or (0, 0)
        top[c] = (max(a, allocated), max(r, reserved))
    for c in range(1, width):
        top[c] = top[c] or top[c - 1]
    return top


def timeline_svg(samples, peak_bytes):
    """Allocated (filled) and reserved (line) over the recording, the peak marked; self-contained SVG."""
    if not samples:
        return "<p>no events on this device</p>"
    plot = _WIDTH - _MARGIN
    tops = columns(samples, plot)
    high = max(max(r, a) for a, r in tops) or 1
    y = lambda v: round(_HEIGHT - 20 - v / high * (_HEIGHT - 30), 1)
    allocated = " ".join(f"{_MARGIN + c},{y(a)}" for c, (a, _) in enumerate(tops))
    reserved = " ".join(f"{_MARGIN + c},{y(r)}" for c, (_, r) in enumerate(tops))
    peak_x = _MARGIN + next(c for c, (a, _) in enumerate(tops) if a >= peak_bytes)
    base = y(0)
    duration = format_duration(round((samples[-1][0] - samples[0][0]) * 1000))
    legend = "<tspan fill='#4c78a8'>allocated</tspan>"
    reserved_line = ""
    if any(r for _, r in tops):  # a CPU recording reserves nothing
        legend += "  <tspan fill='#e45756'>reserved</tspan>"
        reserved_line = f"<polyline points='{reserved}' fill='none' stroke='#e45756' stroke-width='1.5'/>"
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='memrec-timeline' width='{_WIDTH}' height='{_HEIGHT}' "
            f"font-family='sans-serif' font-size='11'>"
            f"<polygon points='{_MARGIN},{base} {allocated} {_WIDTH - 1},{base}' fill='#4c78a8' fill-opacity='0.6'/>"
            f"{reserved_line}<line x1='{peak_x}' y1='10' x2='{peak_x}' y2='{base}' stroke='black' stroke-dasharray='3,3'/>"
            f"<text x='{peak_x + 4}' y='20'>peak {format_bytes(peak_bytes)}</text>"
            f"<line x1='{_MARGIN}' y1='{base}' x2='{_WIDTH}' y2='{base}' stroke='#888'/>"
            f"<text x='{_MARGIN - 4}' y='{y(high) + 4}' text-anchor='end'>{format_bytes(high)}</text>"
            f"<text x='{_MARGIN - 4}' y='{base}' text-anchor='end'>0</text>"
            f"<text x='{_MARGIN}' y='{_HEIGHT - 4}'>0</text>"
            f"<text x='{_WIDTH}' y='{_HEIGHT - 4}' text-anchor='end'>+{duration}</text>"
            f"<text x='{_MARGIN + plot // 2}' y='{_HEIGHT - 4}' text-anchor='middle'>{legend}</text></svg>")


# The CLI's units (report/src/units.cpp), so the bytes read the same here as in `memrec stats`; the notebook test
# compares them.
def format_bytes(n):
    units, v, u = ("B", "KiB", "MiB", "GiB", "TiB", "PiB"), float(n), 0
    while v >= 1024 and u + 1 < len(units):
        v, u = v / 1024, u + 1
    return f"{n} B" if u == 0 else f"{v:.2f} {units[u]}"


def format_duration(ns):
    if abs(ns) < 1e3:
        return f"{ns} ns"
    if abs(ns) < 1e6:
        return f"{ns / 1e3:.1f} us"
    if abs(ns) < 1e9:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.3f} s"
