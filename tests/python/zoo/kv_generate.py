"""A GPT-2 written as plain modules generating greedily with its KV cache (keys and values grown with torch.cat
each token, as Hugging Face's cache does) under torch.inference_mode(): the tokens, and on CUDA memory_stats(),
reserved peak and segments included. Runs without transformers. KV_SIZE=gpt2-6 makes it the size of the GPU
layout check (6 layers, 512 wide, 4 prompts of 64 tokens, 48 new ones)."""
# zoo: both
# zoo-modules: GPT blocks.0.attn blocks.1.mlp head
import math
import os

import torch
from torch import nn

import _zoo

SIZES = {"small": dict(vocab=256, layers=2, width=64, heads=4, batch=2, prompt=8, new=16),
         "gpt2-6": dict(vocab=50257, layers=6, width=512, heads=8, batch=4, prompt=64, new=48)}


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x, cache):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
        if t > 1:  # the prompt: each position sees those before it
            scores = scores.masked_fill(torch.ones(t, k.size(2), dtype=torch.bool, device=x.device)
                                        .triu(k.size(2) - t + 1), float("-inf"))
        y = scores.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c)), (k, v)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, cache):
        a, cache = self.attn(self.ln1(x), cache)
        x = x + a
        return x + self.mlp(self.ln2(x)), cache


class GPT(nn.Module):
    def __init__(self, vocab, layers, width, heads, positions=1024):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(positions, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight
        for p in self.parameters():  # GPT-2's initialization: greedy tokens that vary
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids, past):
        start = past[0][0].size(2) if past else 0
        pos = torch.arange(start, start + ids.size(1), device=ids.device)
        x = self.tokens(ids) + self.positions(pos)
        caches = []
        for i, block in enumerate(self.blocks):
            x, cache = block(x, past[i] if past else None)
            caches.append(cache)
        return self.head(self.ln(x[:, -1:])), caches


def generate(model, ids, new):
    past = None
    for _ in range(new):
        logits, past = model(ids if past is None else ids[:, -1:], past)
        ids = torch.cat([ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return ids


device = _zoo.setup()
size = SIZES[os.environ.get("KV_SIZE", "small")]
with _zoo.recording():
    model = GPT(size["vocab"], size["layers"], size["width"], size["heads"]).to(device).eval()
    prompt = torch.randint(0, size["vocab"], (size["batch"], size["prompt"]),
                           generator=torch.Generator().manual_seed(1)).to(device)
    with torch.inference_mode():
        out = generate(model, prompt, size["new"])
    print("tokens " + " ".join(str(t) for t in out[:, size["prompt"]:].flatten().tolist()))
_zoo.finish(device)
