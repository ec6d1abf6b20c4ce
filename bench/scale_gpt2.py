#!/usr/bin/env python3
"""Hugging Face GPT-2 (124M: 12 layers, 768 wide, 12 heads) built from a config with random weights, trained a few
steps with AdamW on random tokens: what bench/scale_check.py records at several batch sizes and sequence lengths.
Eager attention (softmax(QK^T) in full, no flash kernel), so memory grows with the square of the sequence.

    python3 bench/scale_gpt2.py --batch 8 --seq 1024 [--positions 8192] [--steps 3]

Prints "out of memory" and exits 3 when CUDA runs out of memory.
"""
import argparse
import sys

import torch
import transformers


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--positions", type=int, default=8192,
                   help="n_positions, the same in every run so that the runs are one program")
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=a.positions, vocab_size=50257)
    config._attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(config).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    try:
        for step in range(a.steps):
            ids = torch.randint(0, config.vocab_size, (a.batch, a.seq), device="cuda")
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    except torch.cuda.OutOfMemoryError:
        print("out of memory", flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
