"""What memrec's Python stacks cost per allocation: torch.empty(16) in a loop --depth Python frames deep, without
recording, recorded with stacks="off" and with stacks="python" (kernels, scopes, owners, ops and device memory off).
Each --package (NAME=DIR, DIR a built memrec package such as build/python) runs in processes of its own, the packages
in turns, every other round in reverse; prints each mode's median ns per call over the rounds, and the load average.
With --instructions (needs valgrind): callgrind's instructions per call on the program's thread instead (a figure a
shared machine's other work leaves alone); python minus off is what one captured stack costs.
Usage: python3 bench/python_frames.py [--package NAME=DIR ...] [--rounds 7] [--depth 30] [--instructions]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import callgrind_runs

MODES = ("none", "off", "python")


def child(mode, depth, calls, instructions):
    import torch
    import memrec

    def deep(n, f):
        return deep(n - 1, f) if n else f()

    def loop():
        for _ in range(calls):
            torch.empty(16)

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        results = {}
        for m in MODES if mode == "all" else (mode,):
            if m != "none":
                memrec.start(os.path.join(out, "frames.memrec"), stacks=m, kernels=False, scopes=False, owners=False,
                             ops=False, device_memory=False)
            deep(depth, loop)  # warms torch's and memrec's caches
            if instructions:
                callgrind_runs.collect(True)
            start = time.perf_counter()
            deep(depth, loop)
            results[m] = (time.perf_counter() - start) / calls * 1e9
            if instructions:
                callgrind_runs.collect(False)
            if m != "none":
                memrec.stop()
    print(json.dumps(results))


def child_args(args, mode, instrument=False):
    return ["--child", mode, "--depth", str(args.depth), "--calls", str(args.calls),
            *(["--instrument"] if instrument else [])]


def run_child(package, args, mode):
    return subprocess.run([sys.executable, os.path.abspath(__file__), *child_args(args, mode)],
                          env=dict(os.environ, PYTHONPATH=package), stdout=subprocess.PIPE, check=True, text=True)


def instructions_per_call(package, args, mode, out):
    profile = os.path.join(out, f"callgrind.{mode}")
    own, _ = callgrind_runs.instructions_of(__file__, child_args(args, mode, True), profile,
                                            env=dict(os.environ, PYTHONPATH=package))
    return own / args.calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--package", action="append", default=[], help="NAME=DIR (default: this=build/python)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--depth", type=int, default=30)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--instructions", action="store_true")
    p.add_argument("--child", choices=("all", *MODES), help=argparse.SUPPRESS)
    p.add_argument("--instrument", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args.child, args.depth, args.calls, args.instrument)
    packages = dict(spec.split("=", 1) for spec in args.package or ["this=build/python"])
    if args.instructions:
        with tempfile.TemporaryDirectory() as out:
            for name, package in packages.items():
                i = {m: instructions_per_call(package, args, m, out) for m in MODES}
                print(f"{name}: instructions per call at depth {args.depth}: none {i['none']:,.0f}, off "
                      f"{i['off']:,.0f}, python {i['python']:,.0f}; Python stack {i['python'] - i['off']:,.0f}")
        return
    ns = {name: {m: [] for m in MODES} for name in packages}
    for r in range(args.rounds):
        for name in list(packages)[:: 1 if r % 2 == 0 else -1]:
            for m, v in json.loads(run_child(packages[name], args, "all").stdout).items():
                ns[name][m].append(v)
    print(f"ns per torch.empty(16) at depth {args.depth}, median of {args.rounds} rounds (load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}):")
    for name, modes in ns.items():
        med = {m: statistics.median(v) for m, v in modes.items()}
        print(f"  {name}: " + ", ".join(f"{m} {med[m]:,.0f} ({min(modes[m]):,.0f}..{max(modes[m]):,.0f})"
                                        for m in MODES) + f"; Python stack {med['python'] - med['off']:,.0f}")


if __name__ == "__main__":
    main()
