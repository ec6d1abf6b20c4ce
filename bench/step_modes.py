"""Step time of one training loop under each recorder, interleaved in one process (issue 26's benchmark): no
recording, PyTorch's _record_memory_history (stacks python / all), and memrec.start's default (stacks all,
kernels and op scopes on the first 3 steps and then every 10th, scopes, owners), with kernels on every step
(kernels="all"), without its scope hooks (scopes=False), without owner scans, stacks python, stacks all without
kernels, stacks all without op scopes (ops=False), and stacks all and python with op scopes on every step
(ops=True). Each round runs every mode in turn (every other round in
reverse order, so that a slow drift of the GPU's speed cancels out), each mode a new recording: SETTLE steps untimed (a recording's first steps, which trace
kernels by default), then STEPS timed ones, so the table is a long run's steady state. It gives each mode's median
step over all rounds, its cost against no recording in the same round (the median over rounds) and the range of
that cost, the median time the step's Python took before its final synchronize (the CPU's part: while it stays
under the step, the GPU waits for the CPU only where the step starts), and the median time from the step's start to
its first matrix multiply module's call (until then the GPU runs only small kernels and waits for the CPU between
them: bench/gpu_idle.py measures that wait), and the CPU time the program's thread spent on the step's Python with its
cost computed as the step's (time the host's other work took from the thread is left out of it; memrec's drain
thread is too, which the step time keeps). "no recording, again" is a second run of no recording in each round:
its cost is the benchmark's own error.
A GPU-bound step: Hugging Face GPT-2 (124M, batch 8 x 1024, AdamW); --model encoder: a CPU-bound one, a small
nn.TransformerEncoder; --model chain: 100 tiny modules in a row, where the scope hooks are most of the step.
--breakdown: memrec's parts one by one with its scope hooks off (scopes=False): the allocator callback with the
drain thread, then CUPTI's memory calls and NVML, the op scopes (a RecordFunction callback), C++ frames, Python
frames, both, and CUPTI's kernel records on every step; then the scope hooks alone over the first row
(owners=False), and their cost per module call (forward and backward).
--device cpu: the model on the CPU, where memrec records the CPU allocator; PyTorch's recorder (CUDA only) is left
out, and a step is timed by the process's CPU time (memrec's drain thread included), which a shared machine's other
work leaves alone, where wall time would not.
--only KEY,KEY: those modes alone (the keys of modes(); "none" is always run).
Usage: python3 bench/step_modes.py [--rounds 8] [--steps 10] [--settle 3] [--out /tmp/step-modes] [--breakdown]
                                   [--only KEY,...] [--model gpt2|encoder|chain --batch 8 --seq 1024 --ff 512]
                                   [--device cuda|cpu]"""
import argparse
import os
import statistics
import sys
import time

import torch

import memrec


def gpt2(batch, seq, device, ff):
    import transformers
    config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=seq)
    model = transformers.GPT2LMHeadModel(config).to(device).train()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    return model, lambda: model(input_ids=ids, labels=ids).loss


def encoder(batch, seq, device, ff):
    """A CPU-bound step: a small nn.TransformerEncoder (4 layers, d 128, 4 heads, feed-forward ff), many small kernels
    and allocations."""
    layer = torch.nn.TransformerEncoderLayer(128, 4, ff, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).to(device).train()
    x = torch.randn(batch, seq, 128, device=device)
    return model, lambda: model(x).pow(2).mean()


def chain(batch, seq, device, ff):
    """A step of module calls and little else: 100 nn.Linear(4, 4) in a row (seq unused)."""
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(100)]).to(device).train()
    x = torch.randn(batch, 4, device=device)
    return model, lambda: model(x).pow(2).mean()


MODELS = {"gpt2": gpt2, "encoder": encoder, "chain": chain}
BARE = dict(stacks="off", kernels=False, ops=False, device_memory=False)
HOOKS = "memrec scope hooks alone (the bare row with scopes, owners=False)"
OWNERS = "memrec scope hooks and owner scans (the bare row with scopes)"


def modes(out, breakdown, cuda):
    """key -> (row name, start, stop)."""
    history = torch.cuda.memory._record_memory_history
    def torch_on(name, stacks):
        return name, lambda: history(enabled="all", context="all", stacks=stacks), lambda: history(enabled=None)
    def memrec_on(key, name, **options):
        return name, lambda: memrec.start(os.path.join(out, key + ".memrec"), **options), memrec.stop
    nothing = (lambda: None, lambda: None)
    base = {"none": ("no recording", *nothing), "again": ("no recording, again", *nothing)}
    torch_rows = {"torch-python": torch_on("PyTorch stacks=python", "python"),
                  "torch-all": torch_on("PyTorch stacks=all", "all")} if cuda else {}
    if breakdown:
        return {
            **base,
            **torch_rows,
            "bare": memrec_on("bare", "memrec stacks=off, kernels=False, ops=False, device_memory=False (callback, "
                              "drain)", scopes=False, **BARE),
            "devmem": memrec_on("devmem", "memrec stacks=off, kernels=False, ops=False (+ CUPTI memory calls, NVML)",
                                stacks="off", kernels=False, scopes=False, ops=False),
            "ops": memrec_on("ops", "memrec stacks=off, kernels=False (+ op scopes on every op)", stacks="off",
                             kernels=False, scopes=False, ops=True),
            "cpp": memrec_on("cpp", "memrec stacks=cpp, kernels=False", stacks="cpp", kernels=False, scopes=False,
                             ops=True),
            "py": memrec_on("py", "memrec stacks=python, kernels=False", stacks="python", kernels=False,
                            scopes=False, ops=True),
            "both": memrec_on("both", "memrec stacks=all, kernels=False", stacks="all", kernels=False, scopes=False,
                              ops=True),
            "bothk": memrec_on("bothk", 'memrec stacks=all, kernels="all"', stacks="all", kernels="all",
                               scopes=False, ops=True),
            "hooks": memrec_on("hooks", HOOKS, owners=False, **BARE),
            "owners": memrec_on("owners", OWNERS, **BARE),
        }
    return {
        **base,
        **torch_rows,
        "all": memrec_on("all", 'memrec start() (stacks=all, kernels, scopes, owners, ops="steps")'),
        "kernels-all": memrec_on("kernels-all", 'memrec stacks=all, kernels="all"', stacks="all", kernels="all"),
        "no-scopes": memrec_on("no-scopes", "memrec stacks=all, scopes=False", stacks="all", scopes=False),
        "no-owners": memrec_on("no-owners", "memrec stacks=all, owners=False", stacks="all", owners=False),
        "python": memrec_on("python", "memrec stacks=python", stacks="python"),
        "no-kernels": memrec_on("no-kernels", "memrec stacks=all, kernels=False", stacks="all", kernels=False),
        "no-ops": memrec_on("no-ops", "memrec stacks=all, ops=False", stacks="all", ops=False),
        "ops-all": memrec_on("ops-all", "memrec stacks=all, ops=True (op scopes on every step)", stacks="all",
                             ops=True),
        "python-ops-all": memrec_on("python-ops-all", "memrec stacks=python, ops=True", stacks="python", ops=True),
    }


def sync():
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


class FirstMatmul:
    """When a step's first matrix multiply module is called (a forward pre-hook on the first nn.Linear or Hugging
    Face Conv1D that a forward calls): until then the GPU has only small kernels, so at the step's start it waits for
    the CPU this long."""

    def __init__(self, model, loss_of, clock):
        matmuls = [m for m in model.modules() if isinstance(m, torch.nn.Linear) or type(m).__name__ == "Conv1D"]
        called_in_forward(matmuls, loss_of)[0].register_forward_pre_hook(self.called)
        self.clock, self.at = clock, None

    def called(self, *_):
        if self.at is None:
            self.at = self.clock()


def train_step(loss_of, opt):
    loss_of().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def timed_steps(loss_of, opt, steps, clock, first):
    """(step ms, CPU part ms, first matmul µs, thread CPU ms) of each step: the whole step, its Python up to the final
    synchronize, its start up to the first matmul module's call, and the CPU time the program's thread spent on that
    Python part (which time the host's other work takes from it leaves out)."""
    times = []
    for _ in range(steps):
        sync()
        t, on_cpu = clock(), time.thread_time()
        first.at = None
        train_step(loss_of, opt)
        cpu, on_cpu = clock(), time.thread_time() - on_cpu
        sync()
        times.append(((clock() - t) * 1e3, (cpu - t) * 1e3, (first.at - t) * 1e6, on_cpu * 1e3))
    return times


def called_in_forward(modules, loss_of):
    """The calls of `modules` in one forward, in order, seen by a forward pre-hook on each."""
    called = []
    handles = [m.register_forward_pre_hook(lambda m, _: called.append(m)) for m in modules]
    with torch.no_grad():
        loss_of()
    for h in handles:
        h.remove()
    return called


def module_calls(model, loss_of):
    """Module calls in one forward."""
    return len(called_in_forward(model.modules(), loss_of))


def step_ms(rounds, name):
    return [t[0] for r in rounds for t in r[name]]


def costs(rounds, name, column=0):
    """The mode's cost in each round: its median step (or another column) against no recording's in the same round,
    in percent."""
    def median(r, n):
        return statistics.median(t[column] for t in r[n])
    return sorted(100 * (median(r, name) / median(r, "no recording") - 1) for r in rounds)


def print_table(rounds, title):
    print(title)
    print("|---|---:|---:|---|---:|---:|---:|---:|---|")
    for name in rounds[0]:
        step, cpu, first, on_cpu = (statistics.median(t[i] for r in rounds for t in r[name]) for i in range(4))
        each, each_cpu = costs(rounds, name), costs(rounds, name, 3)
        print(f"| {name} | {step:.2f} | {statistics.median(each):+.2f}% | {each[0]:+.2f}% .. {each[-1]:+.2f}% | "
              f"{cpu:.2f} | {first:.0f} | {on_cpu:.2f} | {statistics.median(each_cpu):+.2f}% | "
              f"{each_cpu[0]:+.2f}% .. {each_cpu[-1]:+.2f}% |")


def chosen(table, only):
    """The modes --only names ("none" always, first), or all; exits on a key that is not a mode."""
    if not only:
        return table
    keys = ["none"] + [k for k in only.split(",") if k != "none"]
    unknown = [k for k in keys if k not in table]
    if unknown:
        sys.exit(f"step_modes.py: no mode {', '.join(unknown)} here; the modes: {', '.join(table)}")
    return {k: table[k] for k in keys}


def hooks_per_call(rounds, model, loss_of):
    """The scope hooks' cost per module call: the hooks row minus the bare row, over a step's module calls."""
    calls = module_calls(model, loss_of)
    step = {name: statistics.median(step_ms(rounds, name)) for name in rounds[0]}
    bare = next(name for name in rounds[0] if name.startswith("memrec"))
    print(f"scope hooks: {1e3 * (step[HOOKS] - step[bare]) / calls:.1f} µs per module call (forward and backward), "
          f"{calls} module calls a step")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--settle", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--out", default="/tmp/step-modes")
    p.add_argument("--breakdown", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--model", choices=MODELS, default="gpt2")
    p.add_argument("--ff", type=int, default=512, help="the encoder's feed-forward width")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    a = p.parse_args()
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("step_modes.py: no CUDA device here; --device cpu runs on the CPU")
    table = chosen(modes(a.out, a.breakdown, cuda), a.only)
    os.makedirs(a.out, exist_ok=True)
    model, loss_of = MODELS[a.model](a.batch, a.seq, a.device, a.ff)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    clock = time.perf_counter if cuda else time.process_time
    first = FirstMatmul(model, loss_of, clock)
    timed_steps(loss_of, opt, 3, clock, first)  # warm-up: cuBLAS handles, the allocator's segments
    rounds = []
    for i in range(a.rounds):
        rounds.append({name: [] for name, _, _ in table.values()})
        order = list(table.values()) if i % 2 == 0 else list(table.values())[::-1]  # a drift in time cancels out
        for name, on, off in order:
            on()
            timed_steps(loss_of, opt, a.settle, clock, first)
            rounds[-1][name] = timed_steps(loss_of, opt, a.steps, clock, first)
            off()
    where = torch.cuda.get_device_name() if cuda else "CPU time"
    print_table(rounds, f"| mode | step ms | vs none, median of rounds | rounds | CPU part ms | to the first matmul "
                f"µs | thread CPU ms | vs none by thread CPU | rounds |  ({where}, torch {torch.__version__}, {a.model}, batch {a.batch} x {a.seq}, {a.rounds} rounds x {a.steps} steps "
                f"after {a.settle}, every other round in reverse)")
    if HOOKS in rounds[0] and len(rounds[0]) > 2:
        hooks_per_call(rounds, model, loss_of)


if __name__ == "__main__":
    main()
