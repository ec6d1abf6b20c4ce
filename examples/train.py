#!/usr/bin/env python3
"""A GPT-style decoder trained on random tokens: the program `memrec record` is tested on (CPU and CUDA).

    memrec record -o train.memrec -- python examples/train.py --steps 4
    memrec record -- torchrun --nproc-per-node 2 examples/train.py     # one file per rank (gloo or NCCL)
    memrec record -- torchrun --nproc-per-node 2 examples/train.py --fsdp --rank-batch 1=8

Prints torch.cuda.memory_stats() counters at the end (CUDA), to compare with the recording, then `end_ns T`
(time.time_ns()) as its last statement.
"""
import argparse
import json
import math
import os
import random
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        y = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq, d, heads, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens, targets):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def fully_shard_function():
    """FSDP2's fully_shard: torch.distributed.fsdp from torch 2.6, torch.distributed._composable.fsdp in 2.4-2.5."""
    version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 4):  # importing torch.distributed.fsdp can itself fail there (torch 1.13 on Python 3.11)
        sys.exit(f"--fsdp needs torch >= 2.4 (FSDP2's fully_shard); this is torch {torch.__version__}")
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


def parallel(model, a, distributed):
    """DDP, or FSDP2 with each block and then the whole model sharded (--fsdp)."""
    if not distributed:
        return model
    if not a.fsdp:
        return nn.parallel.DistributedDataParallel(model)
    fully_shard = fully_shard_function()
    for block in model.h:
        fully_shard(block)
    fully_shard(model)
    return model


def rank_batches(specs):
    """["1=8", ...] -> {1: 8}: the batch of the ranks given more (or less) work than --batch."""
    out = {}
    for spec in specs:
        rank, sep, batch = spec.partition("=")
        if not (sep and rank.isdigit() and batch.isdigit() and int(batch) > 0):
            sys.exit(f"--rank-batch wants RANK=BATCH like 1=8, got '{spec}'")
        out[int(rank)] = int(batch)
    return out


def train(a, distributed):
    torch.manual_seed(0)
    model = parallel(GPT(a.vocab, a.seq, a.d_model, a.heads, a.layers).to(a.device), a, distributed)
    batch = rank_batches(a.rank_batch).get(int(os.environ.get("RANK", 0)), a.batch)
    step_model = torch.compile(model) if a.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    lengths = random.Random(0)  # seeded: every run sees the same sequence lengths
    times = []
    for step in range(a.steps):
        start = time.perf_counter()
        seq = lengths.randint(a.seq_min, a.seq) if a.seq_min else a.seq
        tokens = torch.randint(0, a.vocab, (batch, seq), device=a.device)
        loss = step_model(tokens, tokens.roll(-1, 1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item():.3f}", flush=True)  # .item() waits for the GPU
        times.append(1000 * (time.perf_counter() - start))
    if a.steps > 2:  # the first steps build the caches (and compile): left out
        print(f"median step ms {statistics.median(times[2:]):.2f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--seq-min", type=int, default=0,
                   help="vary the sequence length per step between this and --seq (seeded): a fragmenting workload")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (torch >= 2.0)")
    p.add_argument("--fsdp", action="store_true",
                   help="shard with FSDP2's fully_shard instead of DDP when run as ranks (torch >= 2.4)")
    p.add_argument("--rank-batch", action="append", default=[], metavar="RANK=BATCH",
                   help="this rank trains with this batch instead of --batch (repeatable): one rank given more work")
    p.add_argument("--backend", choices=("nccl", "gloo"),
                   help="process group backend (default: nccl on cuda, gloo on cpu; gloo lets ranks share one GPU)")
    p.add_argument("--exit-code", type=int, default=0, help="exit with this status after training")
    p.add_argument("--torch-history", choices=("python", "all"),
                   help="also record with PyTorch's _record_memory_history(stacks=...), to compare costs")
    a = p.parse_args()
    if a.torch_history:
        torch.cuda.memory._record_memory_history(max_entries=10_000_000, stacks=a.torch_history)

    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank_batches(a.rank_batch)  # a malformed spec fails before the process group waits for the others
    if a.fsdp and not distributed:
        sys.exit("--fsdp shards across ranks: start the program with torchrun (RANK and WORLD_SIZE unset)")
    if a.fsdp:
        fully_shard_function()
    if distributed:
        import torch.distributed as dist
        if a.device == "cuda":  # ranks beyond the GPUs share them (gloo): 2 ranks on one GPU
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        dist.init_process_group(a.backend or ("nccl" if a.device == "cuda" else "gloo"))
    train(a, distributed)
    if a.device == "cuda":  # after train() returned: everything it allocated is freed, as in the recording
        torch.cuda.synchronize()
        keys = ("allocation.all.allocated", "allocation.all.freed", "segment.all.allocated", "segment.all.freed",
                "allocated_bytes.all.peak", "requested_bytes.all.peak", "reserved_bytes.all.peak")
        stats = torch.cuda.memory_stats()
        print("memory_stats " + json.dumps({k: stats.get(k, 0) for k in keys}), flush=True)
    if distributed:
        dist.destroy_process_group()
    print(f"end_ns {time.time_ns()}", flush=True)  # bench/python_record.sh: program end to memrec's files
    sys.exit(a.exit_code)


if __name__ == "__main__":
    main()
