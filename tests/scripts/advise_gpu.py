"""`memrec advise` against the GPU: a Hugging Face GPT-2 (random weights from a config) or a plain-module GPT, trained
a few AdamW steps, with the changes advise names applied to the program.

  advise_gpu.py train --model hf|gpt [--checkpoint LAYER,LAYER]
      trains and prints {"max_allocated", "max_reserved"} (torch.cuda.max_memory_*) as one JSON line; the allocator
      settings come from PYTORCH_CUDA_ALLOC_CONF, which the caller sets. Under `memrec record`, it is the run advised.
  advise_gpu.py check --model hf|gpt --advice ADVICE.json --python PYTHON
      runs `train` once plain and once per replayed change (the top three, then `combined`), each in a fresh process,
      and prints predicted against measured peaks and savings; exits 1 when a measured saving is off by 5% or more.
"""
import argparse
import json
import os
import subprocess
import sys

STEPS = 3
BATCH, SEQ = 8, 512


def gpt_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab=16384, d=768, layers=6, heads=12):
            super().__init__()
            self.embed, self.pos = nn.Embedding(vocab, d), nn.Embedding(SEQ, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT(), 16384


def hf_model(torch):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=SEQ, vocab_size=16384)
    return GPT2LMHeadModel(config), config.vocab_size


def checkpointed(torch, model, layers):
    """Each named layer's forward run under torch.utils.checkpoint (non-reentrant: keyword arguments pass). advise
    names no module that holds another named layer, so no layer is recomputed twice."""
    from torch.utils.checkpoint import checkpoint
    for name in layers:
        module = model.get_submodule(name)
        forward = module.forward
        module.forward = lambda *a, _f=forward, **k: checkpoint(_f, *a, use_reentrant=False, **k)


def train(args):
    import torch
    torch.manual_seed(0)
    model, vocab = (hf_model if args.model == "hf" else gpt_model)(torch)
    model = model.cuda()
    if args.checkpoint:
        checkpointed(torch, model, args.checkpoint.split(","))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, vocab, (BATCH, SEQ), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    for _ in range(STEPS):
        # No KV cache while training, as Hugging Face's own gradient checkpointing sets: a recomputed layer would
        # concatenate onto the cache its first forward filled, and the cache, held by the checkpoints, keeps it all.
        logits = model(ids, use_cache=False).logits if args.model == "hf" else model(ids)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab), ids.view(-1))
        del logits
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    torch.cuda.synchronize()
    print(json.dumps({"max_allocated": torch.cuda.max_memory_allocated(),
                      "max_reserved": torch.cuda.max_memory_reserved()}))


def measure(python, model, layers=None, conf=None):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    cmd = [python, __file__, "train", "--model", model] + (["--checkpoint", ",".join(layers)] if layers else [])
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def check(args):
    advice = json.load(open(args.advice))
    plain = measure(args.python, args.model)
    print(f"{args.model}: recorded peak {advice['peak']['allocated']} allocated, {advice['peak']['reserved']} "
          f"reserved; measured without memrec {plain['max_allocated']}, {plain['max_reserved']}")
    replayed = [a for a in advice["advice"] if a["method"] == "replayed" and a["kind"] != "combined"][:3]
    replayed += [a for a in advice["advice"] if a["kind"] == "combined"]
    failed = False
    print(f"{'change':<60} {'':>9} {'predicted':>14} {'measured':>14} {'saving pred':>14} {'saving meas':>14} error")
    for a in replayed:
        layers = a["layers"] or None
        conf = a["settings"] or None
        got = measure(args.python, args.model, layers, conf)
        for key, field in (("allocated", "max_allocated"), ("reserved", "max_reserved")):
            predicted_saving = a["saves"][key]
            if predicted_saving is None or a["kind"] == "allocator" and key == "allocated":
                continue  # allocator settings move no tensor: compared on reserved only
            measured_saving = plain[field] - got[field]
            error = (measured_saving - predicted_saving) / max(abs(predicted_saving), 1)
            bad = predicted_saving > 0 and abs(error) >= 0.05
            failed |= bad
            print(f"{a['change'][:60]:<60} {key:>9} {a['peak_after'][key]:>14} {got[field]:>14} "
                  f"{predicted_saving:>14} {measured_saving:>14} {100 * error:6.1f}%{'  OFF' if bad else ''}")
    sys.exit(1 if failed else 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["train", "check"])
    p.add_argument("--model", choices=["hf", "gpt"], required=True)
    p.add_argument("--checkpoint", default="")
    p.add_argument("--advice")
    p.add_argument("--python", default=sys.executable)
    args = p.parse_args()
    (train if args.mode == "train" else check)(args)


if __name__ == "__main__":
    main()
