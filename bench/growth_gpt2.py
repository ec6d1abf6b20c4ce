"""Hugging Face GPT-2 (random weights from a config) trained on CUDA, optionally keeping each step's logits in a list:
the leak `memrec growth` is checked on (bench/growth_check.py).

python3 growth_gpt2.py --steps N [--history] [--fraction F]

Prints "peak STEP BYTES" (torch.cuda.max_memory_allocated within each step) and "kept BYTES" (what the history
keeps a step); with --fraction, runs under torch.cuda.set_per_process_memory_fraction(F) and prints
"oom at step K" when step K runs out of memory.
"""
import argparse
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--history", action="store_true")
    p.add_argument("--fraction", type=float)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    args = p.parse_args()
    torch.manual_seed(0)
    if args.fraction:
        torch.cuda.set_per_process_memory_fraction(args.fraction)
    config = GPT2Config(n_layer=6, n_positions=args.seq)
    model = GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    history = []
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device="cuda")
    for step in range(args.steps):
        torch.cuda.reset_peak_memory_stats()
        try:
            out = model(tokens, labels=tokens)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if args.history:
                history.append(out.logits.detach().clone())  # the leak
        except torch.cuda.OutOfMemoryError:
            print(f"oom at step {step}", flush=True)
            return 0
        torch.cuda.synchronize()
        print(f"peak {step} {torch.cuda.max_memory_allocated()}", flush=True)
        del out
    kept = history[0].numel() * history[0].element_size() if history else 0
    print(f"kept {kept}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
