"""Modules with strict or counting dunder methods, as torch.compile's OptimizedModule, DDP and user classes have:
__len__ and __bool__ that raise, a dynamic __getattr__, __repr__, __eq__ and __hash__ that count their calls. A
recorder that calls any of them changes the counts printed last (or raises inside its hooks: a note in the file).
Recorded under `memrec record` and under `import memrec`."""
# zoo: both
# zoo-modules: Strict blocks.0 blocks.1.inner head wrapped
import collections

import torch
from torch import nn

import _zoo

calls = collections.Counter()


class Counting(nn.Module):
    """A module whose dunders count what calls them; len() and truthiness raise."""

    def __len__(self):
        raise TypeError(f"{type(self).__name__} does not support len()")

    def __bool__(self):
        raise TypeError(f"{type(self).__name__} has no truth value")

    def __repr__(self):
        calls["repr"] += 1
        return type(self).__name__

    def __eq__(self, other):
        calls["eq"] += 1
        return self is other

    def __hash__(self):
        calls["hash"] += 1
        return id(self) >> 4

    def __getattr__(self, name):  # only for names that are not found the usual way
        calls[f"getattr {name}"] += 1
        if name.startswith("dyn_"):
            return name[4:]
        return super().__getattr__(name)


class Inner(Counting):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.inner(x)) + x


class Wrapped(Counting):
    """Holds its module as `_orig_mod`, as torch.compile's OptimizedModule does, and forwards len() to it."""

    def __init__(self, module):
        super().__init__()
        self._orig_mod = module

    def forward(self, x):
        return self._orig_mod(x)


class Strict(Counting):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Counting(), Inner()])
        self.blocks[0].forward = lambda x: x * 0.5
        self.wrapped = Wrapped(nn.Linear(8, 8))
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.wrapped(x))


device = _zoo.setup()
with _zoo.recording():
    model = Strict().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device=device)
    for step in range(3):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        _zoo.loss(step, loss)
    print("dynamic", model.dyn_value)
print("calls " + " ".join(f"{k}={v}" for k, v in sorted(calls.items())))
_zoo.finish(device)
