"""A DataLoader with two worker processes (forked on Linux) feeding a training loop."""
# zoo-modules: Sequential 0 2
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import _zoo


class Squares(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        x = torch.full((8,), float(i) / 32)
        return x, x.pow(2).sum(dim=0, keepdim=True)


device = _zoo.setup()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loader = DataLoader(Squares(), batch_size=8, num_workers=2)
for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        _zoo.loss(epoch * 4 + i, loss)
_zoo.finish(device)
