"""torch.autograd.grad(..., create_graph=True) then .backward() through the gradient: a gradient penalty."""
# zoo-modules: Sequential 0 4
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Softplus(), nn.Linear(16, 1)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
base = torch.randn(4, 8, device=device)
for step in range(3):
    x = (base * 1.0).requires_grad_()
    h = torch.sin(x)  # an inner node: its module gets a backward scope
    out = model(h).sum()
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    loss = out + g.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
