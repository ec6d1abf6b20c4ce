"""Where a GPU-bound step waits for the CPU. A recording's kernels (CUPTI) and its scopes are on one clock: each step
is marked where it starts and where its final synchronize returns, and between the two marks the GPU is idle
- before the step's first kernel (lead: the CPU's start of the step, up to its first launch),
- between kernels (gaps: the CPU launched the next kernel after the GPU finished the last),
- after its last kernel (tail: the synchronize returning).
The recordings alternate, all with kernels on every step, so that CUPTI's own cost is the same in each:
"bare" records the allocator alone (no stacks, op scopes, scope hooks, owner scans or device memory); "full" is
start(stacks="all", kernels="all"), memrec's default with every step's kernels. What full's idle has over bare's is
where memrec's CPU work reaches the step's time; the largest gaps are listed by the kernel that ended them.
Usage: python3 bench/gpu_idle.py MEMREC [--rounds 4] [--steps 10] [--settle 3] [--out /tmp/gpu-idle]
                                 [--model gpt2|encoder|chain --batch 8 --seq 1024] [--modes bare,full]
--modes picks among bare, hooks, ops, cpp and python (the bare recording with one part of memrec's on), full and
no-ops (full without op scopes). MEMREC is the memrec command (for `memrec export --format perfetto`)."""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time

import torch

import memrec
from step_modes import MODELS, sync, train_step

BARE = dict(stacks="off", kernels="all", ops=False, scopes=False, owners=False, device_memory=False)
MODES = {
    "bare": BARE,
    "hooks": {**BARE, "scopes": True, "owners": True},  # module, phase and step scopes, owner scans
    "ops": {**BARE, "ops": True},                        # op scopes
    "cpp": {**BARE, "stacks": "cpp"},
    "python": {**BARE, "stacks": "python"},
    "full": dict(stacks="all", kernels="all"),
    "no-ops": dict(stacks="all", kernels="all", ops=False),
}
GAP_US = 5  # a gap shorter than this is the launch path itself, not the CPU falling behind


def marked_steps(loss_of, opt, steps):
    """Runs `steps` steps, each between a "idle start" and an "idle end" mark; returns each step's wall ms."""
    times = []
    for _ in range(steps):
        sync()
        t = time.perf_counter()
        memrec.mark("idle start")
        train_step(loss_of, opt)
        sync()
        memrec.mark("idle end")
        times.append((time.perf_counter() - t) * 1e3)
    return times


def windows(trace):
    def marks(name):
        return sorted(e["ts"] for e in trace if e.get("cat") == "annotation" and e["name"] == name)
    return list(zip(marks("idle start"), marks("idle end")))


def idle_of(kernels, start, end):
    """(lead, gaps, tail, busy) in µs over [start, end), and the gaps as (µs, name of the kernel that ended it)."""
    inside = [k for k in kernels if start <= k[0] < end]
    if not inside:
        return end - start, 0, 0, 0, []
    lead, busy, gaps, reach = inside[0][0] - start, 0, [], inside[0][0]
    for k_start, k_end, name in inside:
        if k_start - reach >= GAP_US:
            gaps.append((k_start - reach, name))
        busy += max(0, k_end - max(k_start, reach))
        reach = max(reach, k_end)
    return lead, sum(g for g, _ in gaps), max(0, end - reach), busy, gaps


def analyse(memrec_cmd, path, settle):
    """The idle of each step after the first `settle`, from the recording's Perfetto export (µs)."""
    trace_path = path[: -len(".memrec")] + ".json"
    subprocess.run([memrec_cmd, "export", path, "-o", trace_path, "--format", "perfetto"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(trace_path) as f:
        trace = json.load(f)["traceEvents"]
    os.remove(trace_path)
    kernels = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in trace
                     if e.get("ph") == "X" and e.get("pid") == 0 and e.get("cat") in ("kernel", "memcpy", "memset"))
    return [idle_of(kernels, s, e) for s, e in windows(trace)[settle:]]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("memrec")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--settle", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--model", choices=MODELS, default="gpt2")
    p.add_argument("--out", default="/tmp/gpu-idle")
    p.add_argument("--modes", default="bare,full", help=f"of {', '.join(MODES)}")
    a = p.parse_args()
    modes = a.modes.split(",")
    if not set(modes) <= set(MODES):
        sys.exit(f"gpu_idle.py: the modes are {', '.join(MODES)}")
    if not torch.cuda.is_available():
        sys.exit("gpu_idle.py: no CUDA device here")
    os.makedirs(a.out, exist_ok=True)
    model, loss_of = MODELS[a.model](a.batch, a.seq, "cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    marked_steps(loss_of, opt, 3)  # warm-up, not recorded
    step_ms = collections.defaultdict(list)
    idle = collections.defaultdict(list)
    for i in range(a.rounds):
        for mode in (modes if i % 2 == 0 else modes[::-1]):
            path = os.path.join(a.out, f"{mode}.memrec")
            memrec.start(path, **MODES[mode])
            step_ms[mode] += marked_steps(loss_of, opt, a.settle + a.steps)[a.settle:]
            memrec.stop()
            idle[mode] += analyse(a.memrec, path, a.settle)
    report(step_ms, idle, a)


def report(step_ms, idle, a):
    print(f"| mode | step ms | lead µs | gaps µs | gaps | tail µs | GPU busy ms |  ({torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, {a.model}, batch {a.batch} x {a.seq}, {a.rounds} rounds x {a.steps} steps, "
          f"medians over steps; gaps of {GAP_US} µs and more)")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, rows in idle.items():
        def med(i):
            return statistics.median(r[i] for r in rows)
        count = statistics.median(len(r[4]) for r in rows)
        print(f"| {mode} | {statistics.median(step_ms[mode]):.2f} | {med(0):.1f} | {med(1):.1f} | "
              f"{count:.0f} | {med(2):.1f} | {med(3) / 1e3:.2f} |")
    for mode, rows in idle.items():
        by_kernel = collections.Counter()
        for r in rows:
            for us, name in r[4]:
                by_kernel[name[:90]] += us
        print(f"{mode}: the gaps by the kernel after them, µs per step")
        for name, us in by_kernel.most_common(8):
            print(f"  {us / len(rows):8.1f}  {name}")


if __name__ == "__main__":
    main()
