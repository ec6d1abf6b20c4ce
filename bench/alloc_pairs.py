#!/usr/bin/env python3
"""Cost of one allocation/free pair from Python: times `torch.empty(256)` dropped at once, in a tight loop.

    python3 bench/alloc_pairs.py                                  # no recording
    python3 bench/alloc_pairs.py --torch-history python           # PyTorch's _record_memory_history (CUDA)
    memrec record -o pairs.memrec --stacks all -- python3 bench/alloc_pairs.py
    python3 bench/alloc_pairs.py --depth 25   # the loop 25 calls deep in a 400-line function, as in a model
    python3 bench/alloc_pairs.py --owners-rounds 5   # memrec.start(owners=True) against owners=False, in turns

On CUDA the small block comes from the caching allocator's cache after the warm-up, so the time is Python, the
allocator and a recorder's hook. Prints `ns per pair X`, then `end_ns T` (time.time_ns()) as its last statement,
for bench/python_record.sh to measure the time from the program's end to memrec's complete files.
"""
import argparse
import os
import statistics
import tempfile
import time

import torch


def nested(depth, run):
    """run() called `depth` calls deep in a function of 400 lines: each Python frame a recorder reads has a long line
    table, as a model's forward has."""
    filler = "\n".join(f"    v{i} = {i}" for i in range(400))
    scope = {}
    exec(compile(f"def nest(depth, run):\n{filler}\n    return nest(depth - 1, run) if depth else run()\n",
                 "alloc_pairs_nest", "exec"), scope)
    return scope["nest"](depth, run)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=200_000)
    p.add_argument("--warmup", type=int, default=10_000)
    p.add_argument("--depth", type=int, default=0, help="run the loop this many calls deep (see nested())")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--torch-history", choices=("python", "all"),
                   help="record with PyTorch's _record_memory_history(stacks=...), to compare costs")
    p.add_argument("--owners-rounds", type=int, default=0,
                   help="time pairs under memrec with owners on and off, in turns, this many rounds each")
    p.add_argument("--stacks", default="all", help="memrec's stacks for --owners-rounds")
    a = p.parse_args()
    if a.torch_history:  # room for every entry, as memrec keeps every event
        torch.cuda.memory._record_memory_history(max_entries=10_000_000, stacks=a.torch_history)
    device = torch.device(a.device)

    def pairs():
        for _ in range(a.warmup):
            torch.empty(256, device=device)
        start = time.perf_counter_ns()
        for _ in range(a.pairs):
            torch.empty(256, device=device)
        return time.perf_counter_ns() - start

    if a.owners_rounds:
        owners_on_off(a, device, pairs)
        return
    elapsed = nested(a.depth, pairs) if a.depth else pairs()
    print(f"ns per pair {elapsed / a.pairs:.1f}", flush=True)
    print(f"end_ns {time.time_ns()}", flush=True)


def owners_on_off(a, device, pairs):
    """Pairs under memrec.start(owners=True) and owners=False in turns (ABBA, so neither always runs first), each
    recording after one training step of a model with AdamW (whose parameters, gradients and state the owner scans
    send), so the recorder holds owner rows while the pairs run. Also times the owner scans themselves."""
    import memrec
    from memrec import _owners
    scans = timed_scans(_owners)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 6).to(device)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(4, 64, 256, device=device)
    times = {True: [], False: []}
    scan_us = {"first": [], "later": []}  # a recording's first step sends everything, later ones what is new
    with tempfile.TemporaryDirectory() as out:
        for r in range(a.owners_rounds):
            for owners in (True, False) if r % 2 == 0 else (False, True):
                memrec.start(os.path.join(out, f"owners-{owners}.memrec"), stacks=a.stacks, owners=owners)
                for step in range(3):
                    before = sum(scans.values())
                    model(x).pow(2).mean().backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    if owners:
                        scan_us["later" if step else "first"].append(1e6 * (sum(scans.values()) - before))
                times[owners].append(pairs() / a.pairs)
                memrec.stop()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    fast_on, fast_off = min(times[True]), min(times[False])
    params = sum(1 for _ in model.parameters())
    print(f"ns per pair, owners on {on:.1f}, off {off:.1f}: {100 * (on / off - 1):+.2f}% (fastest recording "
          f"{fast_on:.1f} and {fast_off:.1f}: {100 * (fast_on / fast_off - 1):+.2f}%; {a.owners_rounds} rounds, "
          f"stacks={a.stacks}, {device}, torch {torch.__version__})", flush=True)
    print(f"owner scans per training step ({params} parameters), median: a recording's first step "
          f"{statistics.median(scan_us['first']):.0f} us, later steps {statistics.median(scan_us['later']):.0f} us",
          flush=True)


def timed_scans(owners):
    """Wraps the owner scans (looked up on the module at each call) to add up their time, in seconds."""
    spent = {}
    for name in ("on_forward", "on_backward_end", "on_step"):
        spent[name] = 0.0

        def timed(*args, _scan=getattr(owners, name), _name=name):
            t = time.perf_counter()
            try:
                return _scan(*args)
            finally:
                spent[_name] += time.perf_counter() - t
        setattr(owners, name, timed)
    return spent


if __name__ == "__main__":
    main()
