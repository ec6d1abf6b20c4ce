"""FSDP2: fully_shard on each block and on the model, one rank in this process (gloo on the CPU, NCCL on CUDA), a
small transformer-style MLP trained by AdamW for three steps. Its parameters are DTensors; its all-gathers and
reduce-scatters run on FSDP's own streams on CUDA."""
# zoo: both
# zoo-modules: Model blocks.0 blocks.1.mlp head
import torch
from torch import nn

import _zoo

device = _zoo.setup()
_zoo.needs(torch.__version__ >= "2.4", "FSDP2's fully_shard needs torch 2.4")
try:
    from torch.distributed.fsdp import fully_shard
except ImportError:  # its place before torch 2.6
    from torch.distributed._composable.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Model(nn.Module):
    def __init__(self, width=32, depth=2):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


with _zoo.recording(), _zoo.one_rank(device):
    mesh = init_device_mesh(device.type, (1,))
    model = Model().to(device)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(4, 16, 32, device=device)
    for step in range(3):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        _zoo.loss(step, loss)
    _zoo.values("head bias", model.head.bias.full_tensor())
_zoo.finish(device)
