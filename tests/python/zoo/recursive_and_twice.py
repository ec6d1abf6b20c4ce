"""A module that calls itself recursively (a tree of depth 3) and a module called twice in one forward."""
# zoo-modules: Twice tree tree.cell shared head
import torch
from torch import nn

import _zoo


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(8, 8)

    def forward(self, x, depth=3):
        x = torch.tanh(self.cell(x))
        return x if depth == 0 else self(x, depth - 1) + x


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.tree, self.shared, self.head = Tree(), nn.Linear(8, 8), nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.shared(torch.relu(self.shared(self.tree(x)))))


device = _zoo.setup()
model = Twice().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(5, 8, device=device)
for step in range(3):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
