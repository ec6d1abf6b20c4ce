"""torch.utils.checkpoint, reentrant and not, around blocks of a small MLP (the forward runs again in backward)."""
# zoo-modules: Blocks blocks.0 blocks.2.1
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import _zoo


class Blocks(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=self.reentrant)
        return x


device = _zoo.setup()
for reentrant in (True, False):
    model = Blocks(reentrant).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16, device=device, requires_grad=True)
    for step in range(2):
        loss = model(x * 1.0).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        _zoo.loss(step, loss, f"reentrant={reentrant}")
_zoo.finish(device)
