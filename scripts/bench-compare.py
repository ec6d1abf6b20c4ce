#!/usr/bin/env python3
"""Compares benchmark results with the last recorded ones and flags every benchmark more than 10% slower.

  bench-compare.py RECORDED.json NEW.json [NEW.json ...] [--threshold 0.10] [--save PATH]

RECORDED and NEW are Google Benchmark JSON (--benchmark_format=json, or --benchmark_out with
--benchmark_out_format=json); the NEW files of several binaries are taken together. A benchmark is compared by its
real time per iteration: the median of its repetitions where the run reports aggregates, else the mean of its runs.
Prints one line per benchmark (recorded, now, change) and the machines of both; exits 1 when any benchmark is more than
the threshold slower, 2 on unreadable input, else 0. Benchmarks in only one of the two are listed, never flagged; with
no RECORDED file yet there is nothing to compare and it says so. --save writes the NEW results as one file, to record
them (bench/recorded/, docs/benchmarks.md).
"""
import argparse
import json
import os
import sys

NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(paths):
    """The benchmarks of the files, each run as a dict, and the first file's context."""
    runs, context = [], None
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        runs += data.get("benchmarks", [])
    return runs, context or {}


def times(runs):
    """Benchmark name -> real time per iteration in ns (median of repetitions, else mean of runs)."""
    medians, plain = {}, {}
    for r in runs:
        if r.get("error_occurred"):
            continue
        name = r.get("run_name", r["name"])
        ns = r["real_time"] * NS[r.get("time_unit", "ns")]
        if r.get("run_type") == "aggregate":
            if r.get("aggregate_name") == "median":
                medians[name] = ns
        else:
            plain.setdefault(name, []).append(ns)
    out = {name: sum(v) / len(v) for name, v in plain.items()}
    out.update(medians)
    return out


def machine(context):
    return "{} CPUs at {} MHz, {} build, {}".format(context.get("num_cpus", "?"), context.get("mhz_per_cpu", "?"),
                                                   context.get("library_build_type", "?"),
                                                   context.get("host_name", "?"))


def compare(recorded, now, threshold):
    """Lines to print, and the names of the benchmarks slower by more than the threshold."""
    lines, slower = [], []
    width = max((len(n) for n in recorded.keys() | now.keys()), default=10)
    for name in sorted(recorded.keys() | now.keys()):
        if name not in now:
            lines.append(f"{name:<{width}}  {recorded[name] / 1e6:12.3f} ms  (not run now)")
            continue
        if name not in recorded:
            lines.append(f"{name:<{width}}  {'(new)':>15}  {now[name] / 1e6:12.3f} ms")
            continue
        change = now[name] / recorded[name] - 1
        flag = "  SLOWER" if change > threshold else ""
        if flag:
            slower.append(name)
        lines.append(f"{name:<{width}}  {recorded[name] / 1e6:12.3f} ms  {now[name] / 1e6:12.3f} ms  "
                     f"{change:+7.1%}{flag}")
    return lines, slower


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("recorded")
    p.add_argument("new", nargs="+")
    p.add_argument("--threshold", type=float, default=0.10, help="slowdown flagged, as a fraction (default 0.10)")
    p.add_argument("--save", help="write the new results here as one file")
    args = p.parse_args(argv)
    try:
        runs, context = load(args.new)
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"context": context, "benchmarks": runs}, f, indent=1)
        if not os.path.exists(args.recorded):
            print(f"no recorded results at {args.recorded}: nothing to compare with")
            return 0
        old_runs, old_context = load([args.recorded])
    except (OSError, ValueError, KeyError) as e:
        print(f"bench-compare: {e}", file=sys.stderr)
        return 2
    print(f"recorded: {machine(old_context)}, {old_context.get('date', '?')}")
    print(f"now:      {machine(context)}, {context.get('date', '?')}")
    lines, slower = compare(times(old_runs), times(runs), args.threshold)
    print("\n".join(lines))
    if slower:
        print(f"{len(slower)} benchmark(s) more than {args.threshold:.0%} slower than recorded: {', '.join(slower)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
