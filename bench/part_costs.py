"""Instructions each part of memrec's recording costs the program's thread, per unit of work, counted by callgrind
on small fixed CPU loops in one process (figures a machine's other work leaves alone):
  event        an allocation and its free recorded with no stack (torch.empty(64), 3 events), over no recording
  python_walk  the Python frames of one allocation, 20 frames deep (stacks="python" over stacks="off")
  cpp_walk     the C++ frames of one allocation (stacks="cpp" over stacks="off")
  op_scope     one RecordFunction call (aten op) with op scopes on (x.t(): 3 calls, no allocation), over ops=False
  op_idle      one RecordFunction call with op scopes off and the scope hooks on (their callback is on backward
               nodes only), over no recording: what memrec does per op when ops are off
  module_scope one module call, forward and backward (the scope hooks: a chain of 20 one-op modules), over
               scopes=False
  module_floor the same call with two global module hooks that do nothing (memrec's own, nothing recording), over
               none: torch's cost once any global module hook exists, which module_scope includes
  owner_scan   one tensor named by the owner scans (parameters, gradients, AdamW state of a 4-layer MLP, a
               training step), over owners=False
Each loop runs twice uninstrumented, then 3 times with instrumentation on (tests/programs/callgrind_marks.cpp dumps
each run), and the fewest instructions of the 3 outside glibc's malloc count (see dumps()).
--check compares with bench/part_costs.json and fails when a part costs more than 10% over it (plus 20
instructions, for parts near zero); --write puts this run's counts there. Update the file with --write when a
change is meant to cost more (or less), and say so in the commit.
--time times the same loops instead (no valgrind): ns per unit on this machine, the median of 31 runs of each (each
run the loop 10 times), one a round, the modes taking turns; --device cuda allocates on the GPU in the allocation loop.
Usage: python3 bench/part_costs.py --marks build/tests/libmemrec_callgrind_marks.so [--check | --write]
                                   [--out /tmp/part-costs]   (needs valgrind; PYTHONPATH with memrec)
       python3 bench/part_costs.py --time [--device cpu|cuda] [--out /tmp/part-costs]"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "part_costs.json")
ALLOCS, T_CALLS, STEPS, CHAIN, DEPTH, REPEATS, TIMED_ROUNDS, TIMED_INNER = 1000, 500, 5, 20, 20, 3, 31, 10
TOLERANCE, SLACK = 0.10, 20
UPDATE = ("on Debian 12 with Debian's PyTorch 1.13 and Python 3.11: PYTHONPATH=build/python python3 "
          "bench/part_costs.py --marks build/tests/libmemrec_callgrind_marks.so --write")
BARE = dict(stacks="off", kernels=False, ops=False, device_memory=False, scopes=False, owners=False)
# part -> (measured loop, mode, mode it is counted over, unit)
PARTS = {
    "event": ("alloc", "bare", "none", "allocation and free"),
    "python_walk": ("alloc", "python", "bare", "allocation"),
    "cpp_walk": ("alloc", "cpp", "bare", "allocation"),
    "op_scope": ("ops", "ops", "bare", "RecordFunction call"),
    "op_idle": ("ops", "hooks", "none", "RecordFunction call"),
    "module_scope": ("modules", "hooks", "bare", "module call (forward and backward)"),
    "module_floor": ("modules", "idle_hooks", "none", "module call (forward and backward)"),
    "owner_scan": ("step", "owners", "hooks", "tensor scanned"),
}
MODES = {  # mode -> (start options or None, loops measured in it)
    "none": (None, ("alloc", "ops", "modules", "step")),
    "idle_hooks": (None, ("modules",)),  # before any start(): memrec's hooks return at once
    "bare": (BARE, ("alloc", "ops", "modules")),
    "python": ({**BARE, "stacks": "python"}, ("alloc",)),
    "cpp": ({**BARE, "stacks": "cpp"}, ("alloc",)),
    "ops": ({**BARE, "ops": True}, ("ops",)),
    "hooks": ({**BARE, "scopes": True}, ("ops", "modules", "step")),
    "owners": ({**BARE, "scopes": True, "owners": True}, ("step",)),
}


def workloads(device="cpu"):
    """loop name -> (run once, units in one run). `device` is the allocation loop's: on "cuda" memrec records the CUDA
    caching allocator (the other loops allocate on the CPU, which it then leaves alone)."""
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if device == "cuda":
        torch.empty(1, device=device)  # CUDA initialized before any recording starts: each records the CUDA allocator

    def deep(n):
        return deep(n - 1) if n else torch.empty(64, device=device)

    def allocs():
        for _ in range(ALLOCS):
            deep(DEPTH - 2)

    x = torch.randn(4, 4)

    def ops():
        for _ in range(T_CALLS):
            x.t()

    class One(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, v):
            return v * self.w

    chain = torch.nn.Sequential(*[One() for _ in range(CHAIN - 1)])
    v = torch.randn(2, 4)

    def modules():
        for _ in range(STEPS):
            chain(v).sum().backward()
            chain.zero_grad(set_to_none=True)

    mlp = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3)
    u = torch.randn(8, 16)

    def step():
        mlp(u).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    params = len(list(mlp.parameters()))
    with torch.autograd.profiler.profile() as prof:
        ops()
    return {"alloc": (allocs, ALLOCS), "ops": (ops, len(prof.function_events)),
            "modules": (modules, STEPS * CHAIN), "step": (step, params * 4)}  # parameter, gradient, 2 states


def idle_hooks():
    """memrec's global forward hooks registered with nothing recording: each returns at once."""
    import torch
    from memrec import _C
    modules = torch.nn.modules.module
    return [modules.register_module_forward_pre_hook(_C.module_pre_hook),
            modules.register_module_forward_hook(_C.module_post_hook)]


class Clock:
    """The marks' stand-in for --time: each measured run's wall time on this thread, in ns, by its label."""

    def __init__(self):
        self.ns, self.started = {}, 0

    def memrec_marks_on(self):
        self.started = time.perf_counter_ns()

    def memrec_marks_off(self, label):
        self.ns[label.decode()] = time.perf_counter_ns() - self.started


def turns(rounds):
    """(round, mode, (options, loops)) in the order they run: `rounds` times through the modes, every other round in reverse (a drift of the
    machine's speed cancels out); those with scope hooks after all the others' rounds, as the hooks stay installed
    once a recording with scopes has started, and would be in every later module call of the others."""
    hooked = [m for m in MODES.items() if m[1][0] and m[1][0].get("scopes")]
    for group in ([m for m in MODES.items() if m not in hooked], hooked):
        for r in range(rounds):
            for mode, entry in group[::1 if r % 2 == 0 else -1]:
                yield r, mode, entry


def child(out, marks, repeats=REPEATS, rounds=1, inner=1, device="cpu"):
    """Runs every loop in every mode between marks.memrec_marks_on() and memrec_marks_off(label): `rounds` times
    through the modes (turns()), `repeats` measured runs of each loop in each, each run the loop `inner` times."""
    import gc
    import memrec
    loops = workloads(device)
    gc.disable()
    for r, mode, (options, measured) in turns(rounds):
        if options is not None:
            memrec.start(os.path.join(out, f"{mode}.memrec"), **options)
        idle = idle_hooks() if mode == "idle_hooks" else []
        for loop in measured:
            run = loops[loop][0]
            run()
            run()
            for i in range(repeats):
                gc.collect()
                marks.memrec_marks_on()
                for _ in range(inner):
                    run()
                marks.memrec_marks_off(f"{loop}.{mode}.{r * repeats + i}".encode())
        if options is not None:
            memrec.stop()
        for handle in idle:
            handle.remove()
    with open(os.path.join(out, "units.json"), "w") as f:
        json.dump({k: n for k, (_, n) in loops.items()}, f)
    return {k: n for k, (_, n) in loops.items()}


def timed(out, device):
    """ns per unit of each part on this machine: the loops in this process, timed (the median of TIMED_ROUNDS runs
    of each loop in each mode, one a round, the modes taking turns, each run the loop TIMED_INNER times), no
    callgrind."""
    clock = Clock()
    units = {k: n * TIMED_INNER for k, n in child(out, clock, 1, TIMED_ROUNDS, TIMED_INNER, device).items()}
    runs = {}
    for label, ns in clock.ns.items():
        runs.setdefault(label.rsplit(".", 1)[0], []).append(ns)
    median = {key: statistics.median(v) for key, v in runs.items()}
    return {part: (median[f"{loop}.{mode}"] - median[f"{loop}.{over}"]) / units[loop]
            for part, (loop, mode, over, _) in PARTS.items()}, units


def malloc_instructions(text):
    """Instructions in the functions of glibc's malloc.c, from a callgrind profile (their own, not their callees')."""
    names, current, after_call, total = {}, "", False, 0
    for line in text.splitlines():
        if after_call:  # a call's line: its inclusive cost, which the callee's own lines hold already
            after_call = False
            continue
        name = re.match(r"(c?f[lie])=\((\d+)\)(?: (.*))?", line)
        if name:
            if name.group(3):
                names[name.group(2)] = name.group(3)
            if name.group(1) == "fl":
                current = names.get(name.group(2), "")
        elif line.startswith("calls="):
            after_call = True
        elif current.endswith("malloc/malloc.c") and (line[:1].isdigit() or line[:1] in "+-*"):
            cost = line.split()
            total += int(cost[1]) if len(cost) > 1 else 0
    return total


def dumps(profile):
    """loop.mode -> instructions on the program's thread (thread 1's file of each dump) outside glibc's malloc, the
    fewest of its runs. malloc now and then consolidates its free chunks, which moves a loop by up to 700
    instructions an iteration from one run to the next; the recorder's hooks allocate nothing."""
    counts = {}
    for path in glob.glob(profile + ".*-01"):
        with open(path) as f:
            text = f.read()
        label = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)
        if label and total:
            key, count = label.group(1).rsplit(".", 1)[0], int(total.group(1)) - malloc_instructions(text)
            counts[key] = min(counts.get(key, count), count)
    return counts


def measure(out, marks):
    profile = os.path.join(out, "callgrind")
    for old in glob.glob(profile + "*"):
        os.remove(old)
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
           f"--callgrind-out-file={profile}", sys.executable, os.path.abspath(__file__), "--child", "--marks",
           os.path.abspath(marks), "--out", out]
    env = {**os.environ, "LD_PRELOAD": os.path.abspath(marks)}  # its libhwy stand-in: callgrind_marks.cpp
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if run.returncode != 0:
        sys.exit(f"part_costs.py: the run under callgrind failed ({run.returncode}):\n{run.stdout[-3000:]}")
    with open(os.path.join(out, "units.json")) as f:
        units = json.load(f)
    counts = dumps(profile)
    parts = {}
    for part, (loop, mode, over, _) in PARTS.items():
        parts[part] = (counts[f"{loop}.{mode}"] - counts[f"{loop}.{over}"]) / units[loop]
    return parts, units


def compare(parts, baseline):
    """Parts that cost more than the baseline allows, as lines."""
    worse = []
    for part, base in baseline.items():
        now = parts.get(part)
        if now is None:
            worse.append(f"{part}: not measured")
        elif now > base * (1 + TOLERANCE) + SLACK:
            over = f" ({100 * (now / base - 1):+.1f}%)" if base > 0 else ""
            worse.append(f"{part}: {now:,.0f} instructions per {PARTS[part][3]}, baseline {base:,.0f}{over}")
    return worse


def print_parts(parts, units, what):
    print(f"units a loop: {units}")
    print(f"| part | {what} per unit | unit |")
    print("|---|---:|---|")
    for part, v in parts.items():
        print(f"| {part} | {v:,.0f} | {PARTS[part][3]} |")
    print(json.dumps(parts))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--marks", help="libmemrec_callgrind_marks.so (tests/programs/callgrind_marks.cpp)")
    p.add_argument("--time", action="store_true", help="ns per unit on this machine (no callgrind, no --marks)")
    p.add_argument("--out", default="/tmp/part-costs")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="with --time: where the allocation loop allocates (cuda: the CUDA caching allocator's path)")
    p.add_argument("--check", action="store_true", help="fail when a part costs over 10%% more than the baseline")
    p.add_argument("--write", action="store_true", help="write this run's counts as the baseline")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.child:
        import ctypes
        return child(a.out, ctypes.CDLL(a.marks))
    if a.time:
        return print_parts(*timed(a.out, a.device), "ns")
    if not a.marks:
        p.error("--marks is needed to count instructions (or --time)")
    if not shutil.which("valgrind"):
        print("part_costs.py: valgrind is not installed (apt-get install valgrind)")
        sys.exit(77)  # ctest's SKIP_RETURN_CODE
    parts, units = measure(a.out, a.marks)
    print_parts(parts, units, "instructions")
    if a.write:
        with open(BASELINE, "w") as f:
            json.dump({"update": UPDATE, "parts": {k: round(v) for k, v in parts.items()}}, f, indent=1)
            f.write("\n")
    if a.check:
        with open(BASELINE) as f:
            worse = compare(parts, json.load(f)["parts"])
        for line in worse:
            print(f"part_costs.py: {line}")
        sys.exit(1 if worse else 0)


if __name__ == "__main__":
    main()
