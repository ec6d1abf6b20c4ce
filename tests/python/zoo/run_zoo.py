#!/usr/bin/env python3
"""Runs each zoo program without and with `memrec record` and says what differed.

    run_zoo.py --memrec build/cli/memrec --python /usr/bin/python3 [--device cpu|cuda] [--only a,b] [--out DIR]
               [--jobs N]

Compared per program: the exit status, stdout byte for byte (the losses, printed exactly), and the program's own
stderr byte for byte (recorded as `sh -c 'exec python prog.py 2>prog.err'`, so memrec's summary stays apart).
Checked on each recording: the file is complete with events, and its module scopes include the modules the
program names on a `# zoo-modules:` line. On CUDA, each JSON line a program prints last (its memory_stats) must
equal memrec's own counts from the file of the same rank: allocations (alloc events), segments (segment_alloc
and segment_map events), the peak of requested bytes (memrec's peak allocated) and the reserved peak. A program
with a `# zoo-varies:` line names memory_stats keys that change from run to run (left out of the stdout
comparison, still compared with the recording). A program with a `# zoo: module-api` line records itself through
`import memrec` (ZOO_MEMREC_OUT) instead, one with `# zoo: both` is recorded both ways. A recording with notes
(memrec's hooks meeting internal errors among them) differs, but for those a `# zoo-notes-DEVICE:` line expects on
that device (each must be there: a window memrec lent CUPTI to the program's profiler). Log lines' time, process and
thread stamps (glog, Kineto) are left out of the stderr comparison.
Exit status 1 when any program differs or fails without memrec (exits non-zero; it is not recorded then); a program
that needs what is missing is reported as skipped.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
TIMEOUT = 600


def programs(only):
    names = sorted(f[:-3] for f in os.listdir(HERE) if f.endswith(".py") and not f.startswith(("_", "run_")))
    if not only:
        return names
    wanted = only.split(",")
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        sys.exit(f"run_zoo.py: no zoo program named {', '.join(unknown)} (have {', '.join(names)})")
    return wanted


def source_lines(name, prefix):
    with open(os.path.join(HERE, name + ".py")) as f:
        return [line[len(prefix):].split() for line in f if line.startswith(prefix)]


def run(argv, env=None, stderr_to=None):
    start = time.monotonic()
    r = subprocess.run(argv, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    err = r.stderr
    if stderr_to:  # the program's own stderr went to a file
        with open(stderr_to, "rb") as f:
            err = f.read()
    return r.returncode, r.stdout, err, r.stderr, time.monotonic() - start


def memrec_json(memrec, *args):
    r = subprocess.run([memrec, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError(f"memrec {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def recording_facts(memrec, path):
    """What the zoo checks in one file: completeness, events, action counts, peaks, module scope names."""
    stats = json.loads(memrec_json(memrec, "stats", path, "--json"))
    counts = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^\s+(\w+)\s+(\d+)$", memrec_json(memrec, "info", path), re.M)}
    trace = path + ".json"
    memrec_json(memrec, "export", path, "-o", trace)
    with open(trace) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    return dict(complete=stats["complete"], events=stats["events"], warnings=stats["warnings"],
                allocations=counts.get("alloc", 0),
                segments=counts.get("segment_alloc", 0) + counts.get("segment_map", 0),
                peak_allocated=stats["peak_allocated"]["bytes"], peak_reserved=stats["peak_reserved"]["bytes"],
                modules={e["name"] for e in events if e.get("cat") == "module"})


def check_recordings(memrec, files, name, stdout, device):
    problems = []
    if not files:
        return ["no recording written"]
    facts = [recording_facts(memrec, f) for f in files]
    expected = [" ".join(words) for words in source_lines(name, f"# zoo-notes-{device}:")]
    for path, fact in zip(files, facts):
        base = os.path.basename(path)
        if not fact["complete"] or not fact["events"]:
            problems.append(f"{base}: complete={fact['complete']} events={fact['events']}")
        notes = [w for w in fact["warnings"] if not any(e in w for e in expected)]
        if notes:
            problems.append(f"{base}: notes: {'; '.join(notes)}")
        missing_notes = [e for e in expected if not any(e in w for w in fact["warnings"])]
        if missing_notes:
            problems.append(f"{base}: no note saying {'; '.join(missing_notes)!r}")
        missing = {m for words in source_lines(name, "# zoo-modules:") for m in words} - fact["modules"]
        if missing:
            problems.append(f"{base}: no module scope {', '.join(sorted(missing))} "
                            f"(has {', '.join(sorted(fact['modules'])[:12])})")
    if device == "cuda":
        problems += compare_memory_stats(files, facts, stdout)
    return problems


def compare_memory_stats(files, facts, stdout):
    """The program's memory_stats lines (one per rank, in rank order) against memrec's counts of its file."""
    printed = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
    if len(printed) != len(files):
        return [f"{len(printed)} memory_stats lines for {len(files)} recordings"]
    pairs = [("allocations", "allocation.all.allocated"), ("segments", "segment.all.allocated"),
             ("peak_allocated", "requested_bytes.all.peak"), ("peak_reserved", "reserved_bytes.all.peak")]
    return [f"{os.path.basename(path)}: memrec {ours} {fact[ours]} != memory_stats {theirs} {stats[theirs]}"
            for path, fact, stats in zip(files, facts, printed) for ours, theirs in pairs
            if fact[ours] != stats[theirs]]


def recordings(out, name, rest=""):
    """The files `record -o OUT/NAME.memrec` wrote (NAME.memrec, NAME.pidN.memrec, NAME.rankN.memrec), not those of
    another program whose name starts with NAME."""
    pattern = re.escape(name) + r"(\.(pid|rank)\d+)?\.memrec" + rest
    return sorted(os.path.join(out, f) for f in os.listdir(out) if re.fullmatch(pattern, f))


def without_keys(result, keys):
    """A run's result with `keys` left out of its memory_stats lines: values that change from run to run whether
    recorded or not (a program names them on a `# zoo-varies:` line); they are still compared with the recording."""
    if not keys:
        return result
    lines = [json.dumps({k: v for k, v in json.loads(line).items() if k not in keys}, sort_keys=True).encode()
             if line.startswith(b"{") else line for line in result[1].splitlines()]
    return (result[0], b"\n".join(lines), *result[2:])


# The time, process and thread stamps that glog (c10's warnings) and Kineto put before each of their lines.
_LOG_STAMPS = [(re.compile(rb"^([IWEF])\d{8} \d\d:\d\d:\d\d\.\d+ +\d+ ", re.M), rb"\1<time> <thread> "),
               (re.compile(rb"^([A-Z]+):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ ", re.M), rb"\1:<time> <pid>:<tid> ")]


def unstamped(err):
    for pattern, replacement in _LOG_STAMPS:
        err = pattern.sub(replacement, err)
    return err


def differences(plain, recorded):
    out = []
    for what, a, b in (("exit", plain[0], recorded[0]), ("stdout", plain[1], recorded[1]),
                       ("stderr", unstamped(plain[2]), unstamped(recorded[2]))):
        if a != b:
            out.append(f"{what} differs:\n{diff_text(a, b)}")
    return out


def diff_text(a, b):
    if isinstance(a, int):
        return f"    without memrec {a}, with memrec {b}"
    la, lb = a.decode(errors="replace").splitlines(), b.decode(errors="replace").splitlines()
    i = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
    show = lambda lines: lines[i] if i < len(lines) else "<end>"  # noqa: E731
    return f"    line {i + 1}: without memrec: {show(la)!r}\n    line {i + 1}:    with memrec: {show(lb)!r}"


def modes(name):
    """How a program is recorded: `memrec record` (the default), `import memrec` (a `# zoo: module-api` line: it
    records itself into ZOO_MEMREC_OUT), or both in turn (`# zoo: both`)."""
    marks = {word for words in source_lines(name, "# zoo:") for word in words}
    if "both" in marks:
        return ["record", "module-api"]
    return ["module-api"] if "module-api" in marks else ["record"]


def record_one(name, prog, mode, args, out):
    """The program recorded one way: its result and the files it wrote (named NAME.api... under `import memrec`
    when the program is recorded both ways)."""
    label = name + ".api" if mode == "module-api" and len(modes(name)) > 1 else name
    base = os.path.join(out, label + ".memrec")
    for old in recordings(out, label, r"(\.[^/]*)?"):
        os.remove(old)
    if mode == "module-api":
        recorded = run(prog, env=dict(os.environ, ZOO_MEMREC_OUT=base, PYTHONPATH=args.python_dir))
    else:
        err = os.path.join(out, label + ".err")
        recorded = run([args.memrec, "record", "-o", base, "--", "sh", "-c", 'err=$1; shift; exec "$@" 2>"$err"',
                        "sh", err, *prog], stderr_to=err)
    keep_stdout(out, label, recorded)
    return recorded, recordings(out, label)


def keep_stdout(out, label, result):
    """The run's stdout beside its recordings (NAME.plain.out, NAME.out, NAME.api.out): what was compared."""
    with open(os.path.join(out, label + ".out"), "wb") as f:
        f.write(result[1])


def zoo_one(name, args, out):
    """The program once plain and once per way of recording it, each compared with the plain run. A recording's
    notes fail it too: memrec's hooks meeting internal errors (`notes.hooks`, `notes.owners`) among them."""
    prog = [args.python, os.path.join(HERE, name + ".py"), "--device", args.device]
    plain = run(prog)
    keep_stdout(out, name + ".plain", plain)
    if plain[0] == SKIP:
        return "skipped", [plain[1].decode().strip()], plain[4], 0.0
    if plain[0]:  # the same failure under memrec would compare equal
        tail = plain[2].decode(errors="replace").strip().splitlines()[-1:]
        return "fails", [f"exits {plain[0]} without memrec: {' '.join(tail)}"], plain[4], 0.0
    varies = {key for words in source_lines(name, "# zoo-varies:") for key in words}
    problems, t_rec = [], 0.0
    for mode in modes(name):
        recorded, files = record_one(name, prog, mode, args, out)
        found = differences(without_keys(plain, varies), without_keys(recorded, varies))
        if recorded[0] != SKIP:
            found += check_recordings(args.memrec, files, name, recorded[1], args.device)
        if found and recorded[3] and recorded[3] != recorded[2]:
            found.append("memrec said:\n    " + recorded[3].decode(errors="replace").strip().replace("\n", "\n    "))
        problems += [f"{mode}: {p}" if len(modes(name)) > 1 else p for p in found]
        t_rec += recorded[4]
    return ("differs" if problems else "identical"), problems, plain[4], t_rec


def python_dir(memrec):
    """The memrec package beside the binary: build/python in a build tree (build/cli/memrec), lib/memrec/python
    when installed (bin/memrec)."""
    bindir = os.path.dirname(os.path.abspath(memrec))
    for d in (os.path.join(bindir, "..", "python"), os.path.join(bindir, "..", "lib", "memrec", "python")):
        if os.path.isdir(os.path.join(d, "memrec")):
            return os.path.abspath(d)
    return ""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--memrec", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--device", default="cpu")
    p.add_argument("--only", default="")
    p.add_argument("--out", default="")
    p.add_argument("--jobs", type=int, default=os.cpu_count(), help="programs run at once (each uses one thread)")
    args = p.parse_args()
    args.memrec = os.path.abspath(args.memrec)
    args.python_dir = python_dir(args.memrec)
    out = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="memrec-zoo-")
    os.makedirs(out, exist_ok=True)
    start = time.monotonic()
    names = programs(args.only)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        runs = [pool.submit(zoo_one, name, args, out) for name in names]
        rows = []
        for name, done in zip(names, runs):  # in the zoo's order, each as soon as it and those before are done
            status, problems, t_plain, t_rec = done.result()
            rows.append((name, status))
            print(f"{name:<24} {status:<10} {t_plain:6.1f} s {t_rec:6.1f} s", flush=True)
            for problem in problems:
                print("    " + problem.replace("\n", "\n    "), flush=True)
    counts = {s: sum(r[1] == s for r in rows) for s in ("identical", "differs", "fails", "skipped")}
    print(f"zoo on {args.device}: {counts['identical']} identical, {counts['differs']} differ, "
          f"{counts['fails']} fail without memrec, {counts['skipped']} skipped, {time.monotonic() - start:.0f} s; "
          f"recordings in {out}")
    return 1 if counts["differs"] or counts["fails"] else 0


if __name__ == "__main__":
    sys.exit(main())
