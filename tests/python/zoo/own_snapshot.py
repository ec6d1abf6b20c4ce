"""A program that turns on PyTorch's own memory history part-way through training, takes a snapshot and dumps it:
blocks allocated before its history began must not break its snapshot."""
# zoo-modules: Sequential 0 2
import pickle

import torch
from torch import nn

import _zoo

device = _zoo.setup()
_zoo.needs(device.type == "cuda", "torch.cuda.memory's history needs --device cuda")
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
x, y = torch.randn(32, 16, device=device), torch.randn(32, 1, device=device)
for step in range(4):
    if step == 2:
        torch.cuda.memory._record_memory_history(max_entries=100000)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
snapshot = pickle.loads(pickle.dumps(torch.cuda.memory._snapshot()))
torch.cuda.memory._record_memory_history(enabled=None)
print("snapshot segments", len(snapshot["segments"]) > 0, "traced", len(snapshot["device_traces"][0]) > 0)
_zoo.finish(device)
