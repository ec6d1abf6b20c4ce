#!/usr/bin/env python3
"""PyTorch's own _record_memory_history alongside memrec, in one process (GPU check, torch >= 2.1).

    memrec record -o h.memrec -- python tests/scripts/torch_history.py train --dump torch.pickle
    memrec export h.memrec -o memrec.pickle
    python tests/scripts/torch_history.py compare torch.pickle memrec.pickle

`train` trains examples/train.py's model with PyTorch's recorder on and dumps its snapshot; `compare` checks
that PyTorch's trace (action, address, size, stream per entry) appears in memrec's, in order, entry for entry.
"""
import argparse
import os
import pickle
import sys


def train(a):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    from train import GPT

    torch.cuda.init()  # memrec records the CUDA allocator from here on
    torch.cuda.memory._record_memory_history(max_entries=10_000_000)
    model = GPT(1024, 128, 256, 4, 4).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(a.steps):
        tokens = torch.randint(0, 1024, (8, 128), device="cuda")
        model(tokens, tokens.roll(-1, 1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(a.dump)
    torch.cuda.memory._record_memory_history(enabled=None)


def entries(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    trace = snap["device_traces"][0]
    return [(e["action"], e["addr"], e["size"], e["stream"]) for e in trace if e["action"] != "snapshot"]


def compare(a):
    theirs, ours = entries(a.torch), entries(a.memrec)
    if not theirs:
        sys.exit("PyTorch's trace is empty")
    starts = [i for i, e in enumerate(ours) if e == theirs[0]]
    for start in starts:
        if ours[start:start + len(theirs)] == theirs:
            print(f"agree: PyTorch's {len(theirs)} entries are memrec's entries {start}..{start + len(theirs) - 1} "
                  f"(of {len(ours)})")
            return
    best = max(starts, default=0, key=lambda s: next((k for k, (x, y) in enumerate(zip(ours[s:], theirs)) if x != y),
                                                    len(theirs)))
    k = next((k for k, (x, y) in enumerate(zip(ours[best:], theirs)) if x != y), None)
    sys.exit(f"differ: {len(theirs)} PyTorch entries, {len(ours)} memrec entries; from memrec entry {best}, "
             f"entry {k} differs: PyTorch {theirs[k] if k is not None else None} vs memrec "
             f"{ours[best + k] if k is not None and best + k < len(ours) else None}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--dump", required=True)
    t.add_argument("--steps", type=int, default=3)
    c = sub.add_parser("compare")
    c.add_argument("torch")
    c.add_argument("memrec")
    a = p.parse_args()
    train(a) if a.cmd == "train" else compare(a)


if __name__ == "__main__":
    main()
