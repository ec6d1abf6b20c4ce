"""Step time of one training loop under each recorder, interleaved in one process (issue 26's benchmark): no
recording, PyTorch's _record_memory_history (stacks python / all), and memrec.start with stacks all (kernels and
scopes), with kernels on every step (kernels="all": by default a recording traces kernels on its first 3 steps, then
on every 10th), without its scope hooks (scopes=False), without owner scans, stacks python, and stacks all without
kernels. Each round runs every mode for STEPS steps in turn (every other round in reverse order, so that a slow
drift of the GPU's speed cancels out), each mode a new recording; the table gives each mode's median step over all
rounds, its cost against no recording in the same round (the median over rounds), and the range of that cost.
A GPU-bound step: Hugging Face GPT-2 (124M, batch 8 x 1024, AdamW); --model encoder: a CPU-bound one, a small
nn.TransformerEncoder; --model chain: 100 tiny modules in a row, where the scope hooks are most of the step.
--breakdown: memrec's parts one by one with its scope hooks off (scopes=False): the allocator callback with the
drain thread, then CUPTI's memory calls and NVML, the op scopes (a RecordFunction callback), C++ frames, Python
frames, both, and CUPTI's kernel records on every step; then the scope hooks alone over the first row
(owners=False), and their cost per module call (forward and backward).
--device cpu: the model on the CPU, where memrec records the CPU allocator; PyTorch's recorder (CUDA only) is left
out, and a step is timed by the process's CPU time (memrec's drain thread included), which a shared machine's other
work leaves alone, where wall time would not.
Usage: python3 bench/step_modes.py [--rounds 8] [--steps 8] [--out /tmp/step-modes] [--breakdown]
                                   [--model gpt2|encoder|chain --batch 8 --seq 1024] [--device cuda|cpu]"""
import argparse
import os
import statistics
import sys
import time

import torch

import memrec


def gpt2(batch, seq, device):
    import transformers
    config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=seq)
    model = transformers.GPT2LMHeadModel(config).to(device).train()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    return model, lambda: model(input_ids=ids, labels=ids).loss


def encoder(batch, seq, device):
    """A CPU-bound step: a small nn.TransformerEncoder (4 layers, d 128), many small kernels and allocations."""
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).to(device).train()
    x = torch.randn(batch, seq, 128, device=device)
    return model, lambda: model(x).pow(2).mean()


def chain(batch, seq, device):
    """A step of module calls and little else: 100 nn.Linear(4, 4) in a row (seq unused)."""
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(100)]).to(device).train()
    x = torch.randn(batch, 4, device=device)
    return model, lambda: model(x).pow(2).mean()


MODELS = {"gpt2": gpt2, "encoder": encoder, "chain": chain}
BARE = dict(stacks="off", kernels=False, ops=False, device_memory=False)
HOOKS = "memrec scope hooks alone (the first row with scopes, owners=False)"


def modes(out, breakdown, cuda):
    history = torch.cuda.memory._record_memory_history
    def torch_on(stacks):
        return lambda: history(enabled="all", context="all", stacks=stacks), lambda: history(enabled=None)
    def memrec_on(name, **options):
        return lambda: memrec.start(os.path.join(out, name + ".memrec"), **options), memrec.stop
    nothing = (lambda: None, lambda: None)
    if breakdown:
        return {
            "no recording": nothing,
            "memrec stacks=off, kernels=False, ops=False, device_memory=False (callback, drain)":
                memrec_on("bare", scopes=False, **BARE),
            "memrec stacks=off, kernels=False, ops=False (+ CUPTI memory calls, NVML)":
                memrec_on("noops", stacks="off", kernels=False, scopes=False, ops=False),
            "memrec stacks=off, kernels=False (+ op scopes)": memrec_on("off", stacks="off", kernels=False,
                                                                        scopes=False),
            "memrec stacks=cpp, kernels=False": memrec_on("cpp", stacks="cpp", kernels=False, scopes=False),
            "memrec stacks=python, kernels=False": memrec_on("py", stacks="python", kernels=False, scopes=False),
            "memrec stacks=all, kernels=False": memrec_on("all", stacks="all", kernels=False, scopes=False),
            'memrec stacks=all, kernels="all"': memrec_on("allk", stacks="all", kernels="all", scopes=False),
            HOOKS: memrec_on("hooks", owners=False, **BARE),
        }
    torch_rows = {"PyTorch stacks=python": torch_on("python"), "PyTorch stacks=all": torch_on("all")} if cuda else {}
    return {
        "no recording": nothing,
        **torch_rows,
        "memrec stacks=all (kernels, scopes)": memrec_on("all", stacks="all"),
        'memrec stacks=all, kernels="all"': memrec_on("allsteps", stacks="all", kernels="all"),
        "memrec stacks=all, scopes=False": memrec_on("noscopes", stacks="all", scopes=False),
        "memrec stacks=all, owners=False": memrec_on("noowners", stacks="all", owners=False),
        "memrec stacks=python": memrec_on("python", stacks="python"),
        "memrec stacks=all, kernels=False": memrec_on("nokernels", stacks="all", kernels=False),
    }


def sync():
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed_steps(loss_of, opt, steps, clock):
    times = []
    for _ in range(steps):
        sync()
        t = clock()
        loss_of().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append((clock() - t) * 1e3)
    return times[1:]  # the first step after a switch warms the recorder's caches


def module_calls(model, loss_of):
    """Module calls in one forward, counted by a forward hook on each module."""
    calls = []
    handles = [m.register_forward_pre_hook(lambda *_: calls.append(1)) for m in model.modules()]
    with torch.no_grad():
        loss_of()
    for h in handles:
        h.remove()
    return len(calls)


def costs(rounds, name):
    """The mode's cost in each round: its median step against no recording's in the same round, in percent."""
    return sorted(100 * (statistics.median(r[name]) / statistics.median(r["no recording"]) - 1) for r in rounds)


def print_table(rounds, title):
    print(title)
    print("|---|---:|---:|---|")
    for name in rounds[0]:
        step = statistics.median(t for r in rounds for t in r[name])
        each = costs(rounds, name)
        print(f"| {name} | {step:.2f} | {statistics.median(each):+.2f}% | {each[0]:+.2f}% .. {each[-1]:+.2f}% |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--out", default="/tmp/step-modes")
    p.add_argument("--breakdown", action="store_true")
    p.add_argument("--model", choices=MODELS, default="gpt2")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    a = p.parse_args()
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("step_modes.py: no CUDA device here; --device cpu runs on the CPU")
    os.makedirs(a.out, exist_ok=True)
    model, loss_of = MODELS[a.model](a.batch, a.seq, a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    clock = time.perf_counter if cuda else time.process_time
    timed_steps(loss_of, opt, 3, clock)  # warm-up: cuBLAS handles, the allocator's segments
    table = modes(a.out, a.breakdown, cuda)
    rounds = []
    for i in range(a.rounds):
        rounds.append({name: [] for name in table})
        order = list(table.items()) if i % 2 == 0 else list(table.items())[::-1]  # a drift in time cancels out
        for name, (on, off) in order:
            on()
            rounds[-1][name] = timed_steps(loss_of, opt, a.steps, clock)
            off()
    where = torch.cuda.get_device_name() if cuda else "CPU time"
    print_table(rounds, f"| mode | step ms | vs none, median of rounds | rounds |  ({where}, torch "
                f"{torch.__version__}, {a.model}, batch {a.batch} x {a.seq}, {a.rounds} rounds x {a.steps - 1} steps, "
                f"every other round in reverse{', scope hooks off but in the last row' if a.breakdown else ''})")
    if a.breakdown:
        calls = module_calls(model, loss_of)
        step = {name: statistics.median(t for r in rounds for t in r[name]) for name in table}
        extra = step[HOOKS] - step[list(table)[1]]
        print(f"scope hooks: {1e3 * extra / calls:.1f} µs per module call (forward and backward), "
              f"{calls} module calls a step")


if __name__ == "__main__":
    main()
