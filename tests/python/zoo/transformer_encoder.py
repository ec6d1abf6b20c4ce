"""The issue's TransformerEncoder trained with AdamW, and a TransformerDecoder trained, at sizes small enough
for CI (--full: the issue's 768-wide, 12-head, 8-layer encoder)."""
# zoo-modules: TransformerEncoder layers.1.self_attn layers.1.linear2 TransformerDecoder layers.1.multihead_attn
import sys

import torch
from torch import nn

import _zoo

full = "--full" in sys.argv
device = _zoo.setup([a for a in sys.argv[1:] if a != "--full"])
d, heads, ff, layers = (768, 12, 3072, 8) if full else (64, 4, 128, 2)
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, ff, batch_first=True), layers).to(device)
decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, heads, ff, batch_first=True), 2).to(device)
opt = torch.optim.AdamW(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
x = torch.randn(2, 16, d, device=device)
for step in range(2):
    memory = encoder(x)
    out = decoder(x, memory)
    loss = memory.pow(2).mean() + out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
