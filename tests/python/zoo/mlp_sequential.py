"""An nn.Sequential MLP trained with Adam."""
# zoo-modules: Sequential 0 2 4
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 16, device=device), torch.randn(32, 1, device=device)
for step in range(4):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
