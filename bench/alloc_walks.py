"""What each stack mode costs one allocation and its free, on the CPU allocator or the CUDA caching allocator: 1,000
torch.empty(64) a run, at the top of the stack (shallow_alloc) or 20 Python frames deep (deep_alloc), and the same
20-deep calls without an allocation (deep_noalloc, which no mode should move), under no recording and memrec's
stacks "off", "python", "cpp" and "all" (kernels, scopes, owners, ops and device memory off). The modes take turns
15 times in one process (every other round in reverse); each cell is the median ns per iteration, wall and the
thread's CPU time.
Usage: PYTHONPATH=build/python python3 bench/alloc_walks.py [cpu|cuda]"""
import gc
import statistics
import sys
import time

import torch

import memrec

N, ROUNDS = 1000, 15
BARE = dict(stacks="off", kernels=False, ops=False, device_memory=False, scopes=False, owners=False)
MODES = {"none": None, "bare": BARE, "python": {**BARE, "stacks": "python"}, "cpp": {**BARE, "stacks": "cpp"},
         "all": {**BARE, "stacks": "all"}}


def loops(device):
    def deep(n, alloc):
        return deep(n - 1, alloc) if n else (torch.empty(64, device=device) if alloc else None)
    return {"shallow_alloc": lambda: [torch.empty(64, device=device) for _ in range(N)],
            "deep_alloc": lambda: [deep(18, True) for _ in range(N)],
            "deep_noalloc": lambda: [deep(18, False) for _ in range(N)]}


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    if device == "cuda":
        torch.empty(1, device=device)  # CUDA initialized first: each recording is of its caching allocator
    torch.set_num_threads(1)
    runs = loops(device)
    times = {}
    gc.disable()
    for r in range(ROUNDS):
        for mode in list(MODES)[::1 if r % 2 == 0 else -1]:
            if MODES[mode] is not None:
                memrec.start(f"/tmp/alloc_walks_{mode}.memrec", **MODES[mode])
            for name, run in runs.items():
                run()
                wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
                run()
                cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
                times.setdefault((mode, name), []).append((wall / N, cpu / N))
            if MODES[mode] is not None:
                memrec.stop()
    print(f"device {device}, torch {torch.__version__}, Python {sys.version.split()[0]}")
    print("| mode | loop | wall ns | thread CPU ns |")
    print("|---|---|---:|---:|")
    for (mode, name), v in times.items():
        print(f"| {mode} | {name} | {statistics.median(x[0] for x in v):.0f} | {statistics.median(x[1] for x in v):.0f} |")


if __name__ == "__main__":
    main()
