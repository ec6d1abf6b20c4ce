"""A second loss.backward() after backward(retain_graph=True): gradients accumulate through the same graph."""
# zoo-modules: Sequential 0 4
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, device=device)
for step in range(3):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
    _zoo.values("grad", model[4].weight.grad)
_zoo.finish(device)
