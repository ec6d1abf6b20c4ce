#!/usr/bin/env python3
"""Each mode's cost over a base mode, round by round, from one Google Benchmark run with random interleaving.

  pair_rounds.py RUN.json [--base BM_AllocPair/0/]

RUN.json comes from --benchmark_enable_random_interleaving=true --benchmark_repetitions=N --benchmark_out=RUN.json
--benchmark_out_format=json. With interleaving, repetition i of every mode runs in round i, in a random order, within
a second or two of the others; the machine's speed moves between rounds by more than the costs measured (the H100
host's no-recording pair took 1,071 to 1,934 ns in one run), so each round's difference to the base is taken first
and its median reported, beside each mode's own median and fastest repetition.
"""
import argparse
import json
import statistics
import sys

def rounds(runs):
    """Mode name -> {repetition index: real time per iteration}, each mode's label, and the time unit."""
    by_mode, labels, units = {}, {}, set()
    for r in runs:
        if r.get("run_type") != "iteration" or r.get("error_occurred"):
            continue
        name = r["run_name"]
        by_mode.setdefault(name, {})[r.get("repetition_index", 0)] = r["real_time"]
        labels[name] = r.get("label", "")
        units.add(r.get("time_unit", "ns"))
    if len(units) > 1:
        raise ValueError(f"modes in different time units: {sorted(units)}")
    return by_mode, labels, units.pop() if units else "ns"


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--base", default="BM_AllocPair/0/", help="the mode the others are compared with (a name prefix)")
    a = p.parse_args()
    try:
        with open(a.run) as f:
            by_mode, labels, unit = rounds(json.load(f).get("benchmarks", []))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"pair_rounds: cannot read {a.run}: {e}")
    base = [m for m in by_mode if m.startswith(a.base)]
    if len(base) != 1:
        sys.exit(f"pair_rounds: {len(base)} modes named {a.base}* in {a.run}, need one")
    base = by_mode[base[0]]
    base_median = statistics.median(base.values())
    digits = 0 if unit == "ns" else 2
    print(f"{'mode':<34} {'rounds':>6} {'median':>9} {'fastest':>9} {'vs base (median of rounds)':>27} "
          f"{'quartiles':>17}   ({unit})")
    for name, reps in by_mode.items():
        diffs = [reps[i] - base[i] for i in reps if i in base]
        if not diffs:
            print(f"{labels[name]:<34} no round in common with the base")
            continue
        lo, hi = quartiles(diffs)
        d = statistics.median(diffs)
        print(f"{labels[name]:<34} {len(reps):>6} {statistics.median(reps.values()):>9.{digits}f} "
              f"{min(reps.values()):>9.{digits}f} {d:>+17.{digits}f} {100 * d / base_median:>+8.2f}% "
              f"{lo:>+8.{digits}f}..{hi:<+8.{digits}f}")


if __name__ == "__main__":
    main()
