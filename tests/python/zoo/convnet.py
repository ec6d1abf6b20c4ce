"""A conv net with BatchNorm (running statistics updated in train, used in eval), trained with SGD momentum."""
# zoo-modules: Sequential 0 1 5 9
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(16, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(8, 3, 16, 16, device=device), torch.randint(0, 10, (8,), device=device)
for step in range(3):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
model.eval()
with torch.no_grad():
    _zoo.loss(3, model(x).sum(), "eval")
_zoo.values("running_mean", model[1].running_mean)
_zoo.finish(device)
