"""torch.compile(model, mode="reduce-overhead"): a model trained through CUDA graphs (cudagraph trees: forward and
backward each run once eagerly, are recorded on the next step and replayed after), each step marked as PyTorch's
documentation says, then one call under no_grad (a graph of its own)."""
# zoo: both
# zoo-modules: Sequential
# zoo-varies: allocation.all.allocated allocation.all.freed
import os

os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # both runs compile afresh, as compile.py says

import torch  # noqa: E402
from torch import nn  # noqa: E402

import _zoo  # noqa: E402

device = _zoo.setup()
_zoo.needs(device.type == "cuda", "CUDA graphs need --device cuda")
_zoo.needs(hasattr(torch, "compile"), "torch.compile needs torch 2")
with _zoo.recording():
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16, device=device)
    for step in range(5):
        torch.compiler.cudagraph_mark_step_begin()
        loss = compiled(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        _zoo.loss(step, loss)
    with torch.no_grad():
        for step in range(3):
            torch.compiler.cudagraph_mark_step_begin()
            _zoo.loss(step, compiled(x).sum(), "no_grad")
_zoo.finish(device)
