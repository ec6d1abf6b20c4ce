"""Modules whose forward returns a dict, a dataclass and a namedtuple (tensors inside feed the next module)."""
# zoo-modules: Model first first.a second.lin third.lin
import collections
import dataclasses

import torch
from torch import nn

import _zoo

Pair = collections.namedtuple("Pair", "hidden gate")


@dataclasses.dataclass
class Output:
    hidden: torch.Tensor
    aux: torch.Tensor


class AsDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return {"a": self.a(x), "b": torch.sigmoid(self.b(x))}


class AsPair(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, d):
        return Pair(self.lin(d["a"]), d["b"])


class AsDataclass(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 1)

    def forward(self, pair):
        return Output(self.lin(pair.hidden * pair.gate), pair.gate.mean())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second, self.third = AsDict(), AsPair(), AsDataclass()

    def forward(self, x):
        return self.third(self.second(self.first(x)))


device = _zoo.setup()
model = Model().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, device=device)
for step in range(3):
    out = model(x)
    loss = out.hidden.pow(2).mean() + out.aux
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
