#!/usr/bin/env python3
"""Runs the README's CPU walkthrough and checks that its pasted output is what the current code prints.

Every ```console block in the README section whose heading starts with "## Walkthrough" (up to the next
heading) is a list of `$ command` lines, each followed by the output it shows. The commands run one after the
other in one temporary folder, on the CPU (CUDA_VISIBLE_DEVICES is emptied) with one intra-op thread
(OMP_NUM_THREADS=1), with the --bin folders first on PATH, so `$ memrec ...` runs the built binary. A line that
is only `...` stands for output lines the README leaves out. Every other line must equal the real output, except for wall-clock values, which differ from run to
run: durations ("14500.2 ms", "+3.754 s") and the size of the written .memrec file (its timestamps compress
differently each run). Byte counts, percentages, event and block counts and parameter counts must match exactly:
they are the same on every run with the same number of intra-op threads (checked with five runs).

  readme_walkthrough.py --bin build/cli            check; on drift print a diff and exit 1
  readme_walkthrough.py --bin build/cli --update   rewrite the blocks in README.md from the real output,
                                                   keeping the `...` elisions where the lines still line up
"""
import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

ELISION = "..."
# Values that vary between runs of the same code, replaced by a placeholder before comparing.
VARYING = [
    # with the padding before it: a step of 1000 ms or more takes one space less ("step   1:   1077.3 ms")
    (re.compile(r" *[-+]?\d+(?:\.\d+)? (?:ns|us|ms|s)\b"), " <duration>"),
    (re.compile(r"(wrote \S+\.memrec \()\d+(?:\.\d+)? (?:B|KiB|MiB)\)"), r"\1<file size>)"),
]
# Numbers that are not part of a name, for lining up README lines with output lines whose numbers changed.
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")


def normalize(line):
    for pattern, placeholder in VARYING:
        line = pattern.sub(placeholder, line)
    return line.rstrip()


def shape(line):
    return NUMBER.sub("#", normalize(line))


class Block:
    """One ```console block: its line range in the README and its commands with the output lines shown."""

    def __init__(self, first, last):
        self.first, self.last = first, last  # README line indexes of the first and last line inside the fences
        self.commands = []  # [command, [expected lines]]


def walkthrough_blocks(lines):
    blocks, in_section, fence, block = [], False, False, None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
            if fence and in_section and line.strip() == "```console":
                block = Block(i + 1, None)
            elif not fence and block is not None:
                block.last = i - 1
                blocks.append(block)
                block = None
        elif block is not None:
            if line.startswith("$ "):
                block.commands.append([line[2:], []])
            elif block.commands:
                block.commands[-1][1].append(line)
            else:
                sys.exit(f"README line {i + 1}: a console block must start with a `$ command` line")
        elif not fence and line.startswith("#"):
            in_section = line.startswith("## Walkthrough")
    if not blocks:
        sys.exit("no ```console blocks under a '## Walkthrough' heading in the README")
    return blocks


def run(command, folder, bins):
    # One intra-op thread: with two or more, libtorch's parallel ops add a few small allocations (29,667 events
    # instead of 29,655 for the 12-layer run), so the counts would depend on the machine's cores.
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    env["PATH"] = os.pathsep.join([os.path.abspath(b) for b in bins] + [env.get("PATH", "")])
    p = subprocess.run(command, shell=True, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"`{command}` failed with exit status {p.returncode}:\n{p.stdout}")
    return p.stdout.rstrip("\n").split("\n")


def segments(expected):
    """The README's lines between elisions, with the elision lines themselves (None where there is none)."""
    parts = [[None, []]]
    for line in expected:
        if line.strip() == ELISION:
            parts.append([line, []])
        else:
            parts[-1][1].append(line)
    return parts


def find(actual, start, wanted, anchored, key):
    """Where the lines `wanted` occur consecutively in actual[start:], compared by key; -1 if nowhere."""
    keys = [key(w) for w in wanted]
    last = start if anchored else len(actual) - len(wanted)
    for i in range(start, last + 1):
        if [key(a) for a in actual[i:i + len(wanted)]] == keys:
            return i
    return -1


def fresh(expected, actual):
    """The real output in the README's shape: the lines the README shows (taken from the output, lined up by
    their text without numbers), with the README's elisions, and True; the whole output and False when the lines
    do not line up."""
    parts = segments(expected)
    out, pos = [], 0
    for elision, wanted in parts:
        if elision is not None:
            out.append(elision)
        at = find(actual, pos, wanted, elision is None, shape)
        if at < 0:
            return actual, False
        out += actual[at:at + len(wanted)]
        pos = at + len(wanted)
    if parts[-1][1] and pos != len(actual):
        return actual, False  # no elision at the end, so the README must show the output to its last line
    return out, True


def without_time_noise(expected, got):
    """`got` with the README's own text on the lines that differ from it only in wall-clock values, so that a diff
    shows only what drifted."""
    matcher = difflib.SequenceMatcher(None, [normalize(l) for l in expected], [normalize(l) for l in got],
                                      autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out += expected[i1:i2] if tag == "equal" else got[j1:j2]
    return out


def check(readme, bins, update):
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = walkthrough_blocks(lines)
    drifted, new_lines, copied = [], [], 0
    with tempfile.TemporaryDirectory(prefix="readme_walkthrough.") as folder:
        for block in blocks:
            body = []
            for command, expected in block.commands:
                print(f"$ {command}", flush=True)
                got, lined_up = fresh(expected, run(command, folder, bins))
                if update and not lined_up:
                    print(f"  its lines no longer line up with the README's: pasted the whole output; put back the "
                          f"`...` elisions by hand")
                if [normalize(l) for l in got] != [normalize(l) for l in expected]:
                    drifted.append((command, expected, got))
                body += [f"$ {command}"] + without_time_noise(expected, got)
            new_lines += lines[copied:block.first] + body
            copied = block.last + 1
    new_lines += lines[copied:]
    if update:
        with open(readme, "w", encoding="utf-8") as f:
            f.write("\n".join(new_lines))
        print(f"rewrote {len(blocks)} blocks of {readme} ({len(drifted)} had drifted)")
        return 0
    for command, expected, got in drifted:
        print(f"\nREADME output of `{command}` drifted from the real output (- README, + real):")
        sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in expected],
                                                   [l + "\n" for l in without_time_noise(expected, got)], "README",
                                                   "real", n=2))
    if drifted:
        print(f"\n{len(drifted)} outputs drifted; after checking the new numbers, paste them with --update")
        return 1
    print(f"README walkthrough: {sum(len(b.commands) for b in blocks)} commands, output as shown")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readme", default=os.path.join(os.path.dirname(__file__), "..", "..", "README.md"))
    parser.add_argument("--bin", action="append", required=True, help="folder with the memrec binaries (repeatable)")
    parser.add_argument("--update", action="store_true", help="rewrite the README's blocks from the real output")
    args = parser.parse_args()
    return check(args.readme, args.bin, args.update)


if __name__ == "__main__":
    sys.exit(main())
