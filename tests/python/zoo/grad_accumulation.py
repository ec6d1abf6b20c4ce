"""Gradient accumulation: four micro-batches per optimizer step, zero_grad(set_to_none=True) between steps."""
# zoo-modules: Sequential 0 2
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randn(16, 8, device=device)
for step in range(3):
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for micro in data.split(4):
        loss = model(micro).pow(2).mean() / 4
        loss.backward()
        total += loss.item()
    opt.step()
    _zoo.loss(step, total)
_zoo.finish(device)
