"""Four blocks of one class called in a loop, trained 2 Adam steps, then run forward once more and a marker block
(12345 * 64 bytes) allocated while every block's saved activations are live. `wrapped`: the blocks in checkpoint
wrappers and the model in DistributedDataParallel (gloo; one rank from RANK, WORLD_SIZE, MASTER_ADDR/PORT);
`plain`: neither. Both print the same loss."""
import os, sys
import torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.module = nn.Linear(64, 256), nn.Linear(256, 64)  # a user's own submodule called `module`

    def forward(self, x):
        return x + self.module(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self, wrap):
        super().__init__()
        self.blocks = nn.ModuleList(wrap(Block()) for _ in range(4))
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x).pow(2).mean()


if sys.argv[1] == "wrapped":
    dist.init_process_group("gloo")
    model = nn.parallel.DistributedDataParallel(
        Net(lambda m: checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT)))
else:
    model = Net(lambda m: m)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(128, 64)
for step in range(2):
    model(x).backward()
    opt.step()
    opt.zero_grad()
loss = model(x)  # every block's saved activations are live
mark = torch.empty(12345 * 64, dtype=torch.uint8)
print(loss.item())
del mark, loss
if sys.argv[1] == "wrapped":
    dist.destroy_process_group()
