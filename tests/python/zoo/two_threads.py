"""Two threads, each training its own model at the same time; losses printed after both finish. The peaks depend
on how the threads interleave, so they differ from run to run with or without memrec."""
# zoo-modules: Sequential 0 2
# zoo-varies: allocated_bytes.all.peak requested_bytes.all.peak reserved_bytes.all.peak
import threading

import torch
from torch import nn

import _zoo

device = _zoo.setup()
results = {}


def train(name, seed):
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(16, 8, generator=g).to(device)
    losses = []
    for _ in range(5):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    results[name] = losses


threads = [threading.Thread(target=train, args=(name, seed)) for name, seed in (("a", 1), ("b", 2))]
for t in threads:
    t.start()
for t in threads:
    t.join()
for name in sorted(results):
    for step, value in enumerate(results[name]):
        _zoo.loss(step, value, name)
_zoo.finish(device)
