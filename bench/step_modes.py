"""Step time of one training loop under each recorder, interleaved in one process (issue 26's benchmark): no
recording, PyTorch's _record_memory_history (stacks python / all), and memrec.start with stacks all (kernels and
scopes), stacks python, and stacks all without kernels. Each round runs every mode for STEPS steps in turn; the table
gives each mode's median step over all rounds and its cost against no recording. A GPU-bound step: Hugging Face GPT-2
(124M, batch 8 x 1024, AdamW); --model encoder: a CPU-bound one, a small nn.TransformerEncoder.
The main table's "owners=False" row gives the owner scans' share.
--breakdown: memrec's parts one by one, in a process where its scope hooks are never installed (scopes=False):
the allocator callback with the drain thread, then CUPTI's memory calls and NVML, the op scopes (a RecordFunction
callback), C++ frames, Python frames, both, and CUPTI's kernel records; against the main table's memrec rows, the
scope hooks' share.
Usage: python3 bench/step_modes.py [--rounds 3] [--steps 8] [--out /tmp/step-modes] [--breakdown]
                                   [--model gpt2|encoder --batch 8 --seq 1024]  (CUDA only)"""
import argparse
import os
import statistics
import sys
import time

import torch

import memrec


def gpt2(batch, seq):
    import transformers
    config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=seq)
    model = transformers.GPT2LMHeadModel(config).cuda().train()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    return model, lambda: model(input_ids=ids, labels=ids).loss


def encoder(batch, seq):
    """A CPU-bound step: a small nn.TransformerEncoder (4 layers, d 128), many small kernels and allocations."""
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).cuda().train()
    x = torch.randn(batch, seq, 128, device="cuda")
    return model, lambda: model(x).pow(2).mean()


MODELS = {"gpt2": gpt2, "encoder": encoder}


def modes(out, breakdown):
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
                memrec_on("bare", stacks="off", kernels=False, scopes=False, ops=False, device_memory=False),
            "memrec stacks=off, kernels=False, ops=False (+ CUPTI memory calls, NVML)":
                memrec_on("noops", stacks="off", kernels=False, scopes=False, ops=False),
            "memrec stacks=off, kernels=False (+ op scopes)": memrec_on("off", stacks="off", kernels=False,
                                                                        scopes=False),
            "memrec stacks=cpp, kernels=False": memrec_on("cpp", stacks="cpp", kernels=False, scopes=False),
            "memrec stacks=python, kernels=False": memrec_on("py", stacks="python", kernels=False, scopes=False),
            "memrec stacks=all, kernels=False": memrec_on("all", stacks="all", kernels=False, scopes=False),
            "memrec stacks=all, kernels": memrec_on("allk", stacks="all", scopes=False),
        }
    return {
        "no recording": nothing,
        "PyTorch stacks=python": torch_on("python"),
        "PyTorch stacks=all": torch_on("all"),
        "memrec stacks=all (kernels, scopes)": memrec_on("all", stacks="all"),
        "memrec stacks=all, owners=False": memrec_on("noowners", stacks="all", owners=False),
        "memrec stacks=python": memrec_on("python", stacks="python"),
        "memrec stacks=all, kernels=False": memrec_on("nokernels", stacks="all", kernels=False),
    }


def timed_steps(loss_of, opt, steps):
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss_of().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return times[1:]  # the first step after a switch warms the recorder's caches


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--out", default="/tmp/step-modes")
    p.add_argument("--breakdown", action="store_true")
    p.add_argument("--model", choices=MODELS, default="gpt2")
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("step_modes.py: needs CUDA")
    os.makedirs(a.out, exist_ok=True)
    model, loss_of = MODELS[a.model](a.batch, a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    timed_steps(loss_of, opt, 3)  # warm-up: cuBLAS handles, the allocator's segments
    table = modes(a.out, a.breakdown)
    samples = {name: [] for name in table}
    for _ in range(a.rounds):
        for name, (on, off) in table.items():
            on()
            samples[name] += timed_steps(loss_of, opt, a.steps)
            off()
    base = statistics.median(samples["no recording"])
    print(f"| mode | step ms | vs none |  ({torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{a.model}, batch {a.batch} x {a.seq}, {a.rounds} rounds x {a.steps - 1} steps"
          f"{', no scope hooks' if a.breakdown else ''})")
    print("|---|---:|---:|")
    for name, times in samples.items():
        m = statistics.median(times)
        print(f"| {name} | {m:.2f} | {100 * (m / base - 1):+.2f}% |")


if __name__ == "__main__":
    main()
