"""A whole training step (forward, backward, SGD) captured in a CUDA graph and replayed on new data, as in
PyTorch's CUDA graphs documentation."""
# zoo-modules: Sequential 0 2
import torch
from torch import nn

import _zoo

device = _zoo.setup()
_zoo.needs(device.type == "cuda", "CUDA graphs need --device cuda")
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
static_x, static_y = torch.randn(8, 16, device=device), torch.randn(8, 1, device=device)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):  # warm up on a side stream before capture
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(static_x), static_y).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    static_loss = nn.functional.mse_loss(model(static_x), static_y)
    static_loss.backward()
    opt.step()
for step in range(4):
    static_x.copy_(torch.randn(8, 16, device=device))
    static_y.copy_(torch.randn(8, 1, device=device))
    graph.replay()
    _zoo.loss(step, static_loss)
_zoo.finish(device)
