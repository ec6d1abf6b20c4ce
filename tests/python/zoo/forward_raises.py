"""A module whose forward raises: caught inside the enclosing module's forward, and caught by the training loop
outside every module; training goes on."""
# zoo-modules: Model flaky flaky.inner head
import torch
from torch import nn

import _zoo


class Flaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x, fail):
        y = self.inner(x)
        if fail:
            raise ValueError("flaky")
        return y


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.flaky, self.head = Flaky(), nn.Linear(8, 1)

    def forward(self, x, fail_inside, fail_outside):
        try:
            x = self.flaky(x, fail_inside)
        except ValueError:
            x = x * 2
        if fail_outside:
            raise RuntimeError("outside")
        return self.head(x)


device = _zoo.setup()
model = Model().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, device=device)
for step in range(4):
    try:
        loss = model(x, step % 2 == 1, step == 2).pow(2).mean()
    except RuntimeError as e:
        print(f"step {step} caught {e}")
        loss = model(x, False, False).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
