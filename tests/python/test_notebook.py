#!/usr/bin/env python3
"""Executes a notebook that uses memrec's magics in a real IPython kernel (nbclient) and checks what it shows.

The kernel runs this interpreter, which must import memrec (the build tree's python/ on PYTHONPATH, or a pip install).
A %%memrec cell trains a small model; its output must show the timeline picture, the peak that `memrec stats --json`
and `memrec stats` give for the file it wrote (in the text and on the picture's peak mark), and the owners;
%memrec_report must show the report of that file, with the timeline drawn without a display.
"""
import html
import json
import os
import re
import subprocess
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

from memrec.__main__ import executable

CELLS = [
    "%load_ext memrec",
    """%%memrec
import torch
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
optimizer = torch.optim.Adam(model.parameters())
for _ in range(2):
    model(torch.randn(64, 256)).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()""",
    "%memrec_report",
]


def fail(message):
    sys.exit(f"test_notebook: {message}")


def html_of(cell):
    shown = [o["data"]["text/html"] for o in cell["outputs"] if "text/html" in o.get("data", {})]
    if len(shown) != 1:
        fail(f"expected one HTML output from {cell['source'].splitlines()[0]!r}, got: {cell['outputs']}")
    return shown[0]


def memrec(*args):
    return subprocess.run([executable(), *args], check=True, capture_output=True, text=True).stdout


def check_recording(shown):
    path = html.unescape(re.search(r"<code>(.*?)</code>", shown).group(1))
    peak = re.search(r'class="peak-allocated" title="(\d+) bytes">(.*?)</b> ([^;<]*)', shown)
    peak_bytes, value, when = peak.groups()
    peak_text = f"{value} {when}"
    stats = json.loads(memrec("stats", path, "--json"))["peak_allocated"]
    if int(peak_bytes) != stats["bytes"]:
        fail(f"the cell shows a peak of {peak_bytes} bytes, memrec stats --json says {stats['bytes']}")
    printed = re.search(r"^peak allocated +(.*?)  at \+(\S+ \S+)", memrec("stats", path), re.M).groups()
    if not peak_text.startswith(f"{printed[0]} at +{printed[1]}"):
        fail(f"the cell shows the peak as {peak_text!r}, memrec stats prints {printed}")
    svg = re.search(r"<svg .*?</svg>", shown, re.S)
    if not svg or '<path class="allocated"' not in svg.group(0):
        fail("no timeline picture in the cell's output")
    mark = re.search(r'<circle [^>]*data-bytes="(\d+)"', svg.group(0))
    label = re.search(r'class="peak-label"[^>]*>peak allocated (.*?)</text>', svg.group(0))
    if not mark or int(mark.group(1)) != stats["bytes"] or html.unescape(label.group(1)) != peak_text:
        fail(f"the picture's peak mark and label ({mark and mark.group(1)}, {label and label.group(1)!r}) are not "
             f"memrec stats's {stats['bytes']} bytes, {peak_text!r}")
    owners = json.loads(memrec("stats", path, "--by", "owner", "--json"))["live"]
    for owner in owners[:3]:
        if f'<td class="key">{html.escape(owner["key"])}</td>' not in shown:
            fail(f"owner {owner['key']} of memrec stats --by owner is not shown")
    if not any(o["key"] == "0.weight" for o in owners):
        fail(f"the model's parameters have no owner rows: {[o['key'] for o in owners]}")
    advice = memrec("advise", path)
    if f"<summary>What to change</summary><pre>{html.escape(advice)}</pre>" not in shown:
        fail(f"the cell does not show memrec advise's answer:\n{advice}")
    return path, peak_text


def check_report(shown, path, peak_text):
    page = html.unescape(re.search(r'srcdoc="(.*?)"', shown, re.S).group(1))
    if os.path.basename(path) not in page or peak_text.split(" at ")[0] not in page:
        fail(f"%memrec_report does not show the report of {path} with its peak {peak_text}")
    if "data:image/svg+xml;base64," not in page:
        fail("%memrec_report's page has no timeline drawn without a display")


def this_python_kernel(folder):
    """A kernel spec running this interpreter (Debian's python3 spec names /usr/bin/python3, not a venv's)."""
    spec = os.path.join(folder, "kernels", "this-python")
    os.makedirs(spec)
    with open(os.path.join(spec, "kernel.json"), "w") as f:
        json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "this Python", "language": "python"}, f)
    os.environ["JUPYTER_PATH"] = folder
    return "this-python"


def main():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    with tempfile.TemporaryDirectory(prefix="memrec-notebook-") as folder:
        kernel = this_python_kernel(folder)
        NotebookClient(nb, timeout=300, kernel_name=kernel, resources={"metadata": {"path": folder}}).execute()
        recorded = nb.cells[1]
        text = [o["data"]["text/plain"] for o in recorded["outputs"] if "text/plain" in o.get("data", {})]
        if not text or "peak allocated" not in text[0]:
            fail(f"no text form of the recording for terminals: {recorded['outputs']}")
        path, peak_text = check_recording(html_of(recorded))
        check_report(html_of(nb.cells[2]), path, peak_text)
    print(f"notebook ok: the %%memrec cell shows the peak {peak_text} of {path}, as memrec stats does")


if __name__ == "__main__":
    main()
