#!/usr/bin/env python3
"""memrec leaves the program's allocations as they are: the same sizes allocated and freed in the same order with and
without recording, so the caching allocator, whose layout follows that order alone (and the addresses it is given),
lays memory out as it would without memrec.

Each zoo program runs several times in this process, each under torch.profiler's memory events (the CPU allocator's
allocations and frees, with sizes, in order): once to warm up, once plain, once under memrec.start() in each mode
(every feature on; every feature off), and once with a global hook of the test's own that keeps each module's last
output alive: that run must differ, or the comparison could not see what it looks for.

    alloc_order.py [--programs kv_generate,checkpoint]   (PYTHONPATH: the built memrec package)
"""
import argparse
import contextlib
import io
import os
import runpy
import sys
import tempfile

import torch

ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo")
MODES = {"every feature on": {},
         "every feature off": dict(stacks="off", kernels=False, device_memory=False, scopes=False, owners=False,
                                   ops=False)}


def sequence(program):
    """The program's allocations (+bytes) and frees (-bytes) on the CPU allocator, in order."""
    sys.argv = [program]
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof, \
            contextlib.redirect_stdout(io.StringIO()):
        runpy.run_path(os.path.join(ZOO, program + ".py"), run_name="__main__")
    return [e.nbytes() for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]


def recorded(program, options, path):
    import memrec
    memrec.start(path, **options)
    try:
        return sequence(program)
    finally:
        memrec.stop()


def kept_outputs(program):
    """A hook that changes lifetimes, as a recorder must not: each module's output lives until its next call."""
    kept = {}
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, args, out: kept.__setitem__(id(m), out))
    try:
        return sequence(program)
    finally:
        handle.remove()
        kept.clear()


def first_difference(a, b):
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"event {i} of {len(a)} (plain {len(b)}): {a[max(0, i - 2):i + 4]} where plain has {b[max(0, i - 2):i + 4]}"


def check(program, out_dir):
    sequence(program)  # warm-up: one-time allocations (caches, lazy initialization) happen here
    plain = sequence(program)
    failures = []
    for name, options in MODES.items():
        seq = recorded(program, options, os.path.join(out_dir, f"{program}.memrec"))
        same = seq == plain
        print(f"{program}: {name}: {len(seq)} events, {'the same as' if same else 'NOT the same as'} plain")
        if not same:
            failures.append(f"{program} ({name}): {first_difference(seq, plain)}")
    control = kept_outputs(program)
    print(f"{program}: control (outputs kept): {'differs, as it must' if control != plain else 'SAME'}")
    if control == plain:
        failures.append(f"{program}: the control run that keeps outputs alive has plain's sequence: the check is blind")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--programs", default="kv_generate,checkpoint")
    args = parser.parse_args()
    sys.path.insert(0, ZOO)
    with tempfile.TemporaryDirectory() as out_dir:
        failures = [f for p in args.programs.split(",") for f in check(p, out_dir)]
    for f in failures:
        print("FAIL " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
