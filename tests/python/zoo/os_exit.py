"""A program that trains two steps, prints, flushes its output and leaves with os._exit(0): no atexit handler and no
shutdown of Python's runs, yet the recording must be complete."""
# zoo: both
# zoo-modules: Sequential 0 2
import os
import sys

import torch
from torch import nn

import _zoo

device = _zoo.setup()
with _zoo.recording():
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(8, 16, device=device)
    for step in range(2):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        _zoo.loss(step, loss)
    _zoo.finish(device)
    sys.stdout.flush()
    os._exit(0)
