#!/usr/bin/env python3
"""Each mode's cost over a base mode, each repetition against the base's repetitions run next to it.

  paired_cost.py RUN.json [--base BM_AllocPair/0/]

RUN.json comes from bench_recorder with --benchmark_enable_random_interleaving=true --benchmark_repetitions=N
--benchmark_out=RUN.json --benchmark_out_format=json. Interleaving shuffles every repetition of every mode into one
order, which each repetition records in its `order` counter. The machine's speed moves from one repetition to the
next by more than the costs measured (on the H100 host one mode's repetitions spread by 20-30%), so each repetition
is compared with the base's repetitions that ran just before and just after it (their mean, or the one there is),
and the median of those differences is reported, beside each mode's own median and fastest repetition.
"""
import argparse
import bisect
import json
import statistics
import sys


def repetitions(runs):
    """Mode name -> [(order, real time per iteration)] in run order, each mode's label, the time unit, and the
    modes whose repetitions failed."""
    by_mode, labels, units, failed = {}, {}, set(), set()
    for r in runs:
        if r["run_type"] != "iteration":
            continue
        name = r["run_name"]
        labels[name] = r.get("label") or name
        if r.get("error_occurred"):
            failed.add(name)
            continue
        if "order" not in r:
            raise ValueError(f"{name} has no order counter: its run order is unknown")
        by_mode.setdefault(name, []).append((float(r["order"]), float(r["real_time"])))
        units.add(r["time_unit"])
    if len(units) > 1:
        raise ValueError(f"modes in different time units: {sorted(units)}")
    for reps in by_mode.values():
        reps.sort()
    return by_mode, labels, units.pop() if units else "ns", failed - set(by_mode)


def differences(reps, base):
    """Each repetition's time minus the mean of the base repetitions next to it in run order."""
    orders = [o for o, _ in base]
    out = []
    for order, t in reps:
        i = bisect.bisect_left(orders, order)
        near = [base[j][1] for j in (i - 1, i) if 0 <= j < len(base)]
        out.append(t - statistics.fmean(near))
    return out


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def table(by_mode, labels, unit, base_name):
    base = by_mode[base_name]
    base_median = statistics.median(t for _, t in base)
    digits = 0 if unit == "ns" else 2
    lines = [f"{'mode':<34} {'runs':>5} {'median':>9} {'fastest':>9} {'vs base (median of neighbours)':>31} "
             f"{'quartiles':>17}   ({unit})"]
    for name in [base_name] + [m for m in by_mode if m != base_name]:
        times = [t for _, t in by_mode[name]]
        line = f"{labels[name]:<34} {len(times):>5} {statistics.median(times):>9.{digits}f} {min(times):>9.{digits}f}"
        if name != base_name:
            diffs = differences(by_mode[name], base)
            lo, hi = quartiles(diffs)
            d = statistics.median(diffs)
            line += (f" {d:>+21.{digits}f} {100 * d / base_median:>+8.2f}% "
                     f"{lo:>+8.{digits}f}..{hi:<+8.{digits}f}")
        lines.append(line)
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--base", default="BM_AllocPair/0/", help="the mode the others are compared with (a name prefix)")
    a = p.parse_args()
    try:
        with open(a.run) as f:
            by_mode, labels, unit, failed = repetitions(json.load(f)["benchmarks"])
        base = [m for m in by_mode if m.startswith(a.base)]
        if len(base) != 1:
            raise ValueError(f"{len(base)} modes named {a.base}* ran, need one")
        lines = table(by_mode, labels, unit, base[0])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"paired_cost: cannot use {a.run}: {e}")
    print("\n".join(lines))
    for name in sorted(failed):
        print(f"{labels[name]:<34} every repetition failed ({name})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
