#!/usr/bin/env python3
"""Times Python's own pickle on a memory snapshot pickle, to quote beside bench_pickle's numbers.

  MEMREC_BENCH_PICKLE=/tmp/synthetic.pickle build/bench/bench_pickle --benchmark_filter=WritePickle
  python3 bench/python_pickle.py /tmp/synthetic.pickle [repeats] [--unshared OUT.pickle]

Reports pickle.loads and pickle.dumps (protocol 4, as memory_viz needs) in trace entries per second, the best of
`repeats` runs, and the size Python writes for the same data. With --unshared, also writes OUT.pickle: the same
history with one frame list per entry, as PyTorch writes when stacks do not repeat exactly, for
MEMREC_BENCH_IMPORT=OUT.pickle bench_pickle --benchmark_filter=ImportPickleFile.
"""
import gc
import pickle
import sys
import time


def best_of(repeats, fn):
    best = float("inf")
    result = None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def write_unshared(snapshot, path):
    for trace in snapshot["device_traces"]:
        for e in trace:
            e["frames"] = list(e["frames"])
    with open(path, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)


def main():
    args = sys.argv[1:]
    unshared = None
    if "--unshared" in args:
        at = args.index("--unshared")
        unshared = args[at + 1]
        del args[at:at + 2]
    path = args[0]
    repeats = int(args[1]) if len(args) > 1 else 3
    with open(path, "rb") as f:
        data = f.read()
    gc.disable()  # as a fair baseline: the collector would otherwise walk millions of new dicts
    load_s, snapshot = best_of(repeats, lambda: pickle.loads(data))
    entries = sum(len(t) for t in snapshot["device_traces"])
    dump_s, dumped = best_of(repeats, lambda: pickle.dumps(snapshot, protocol=4))
    print(f"python {sys.version.split()[0]}, {entries} entries, input {len(data)} bytes "
          f"({len(data) / entries:.1f} bytes/entry)")
    print(f"pickle.loads: {load_s * 1000:.0f} ms, {entries / load_s / 1e6:.2f}M entries/s")
    print(f"pickle.dumps: {dump_s * 1000:.0f} ms, {entries / dump_s / 1e6:.2f}M entries/s, "
          f"{len(dumped)} bytes ({len(dumped) / entries:.1f} bytes/entry)")
    if unshared:
        write_unshared(snapshot, unshared)


if __name__ == "__main__":
    main()
