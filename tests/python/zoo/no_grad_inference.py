"""Training steps with no_grad and inference_mode sections between them (evaluation, a parameter update by
hand), and enable_grad inside no_grad."""
# zoo-modules: Sequential 0 2
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, device=device)
for step in range(3):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
    with torch.no_grad():
        _zoo.loss(step, model(x).sum(), "no_grad")
        model[0].bias.mul_(0.99)
        with torch.enable_grad():
            inner = model(x).sum()
            inner.backward()
    with torch.inference_mode():
        _zoo.loss(step, model(x).sum(), "inference")
_zoo.finish(device)
