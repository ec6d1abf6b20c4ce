"""torch.compile(module) trained for a few steps, then called once with a global module hook of the program's
own: PyTorch warns about that one (the warning must appear with and without memrec), never about memrec's."""
# zoo-modules: Sequential
# zoo-varies: allocation.all.allocated allocation.all.freed
import os

# Both runs compile afresh: the second would otherwise load what the first compiled and allocate less. Compiling
# still allocates a varying number of blocks (three runs without memrec on the H100 made 320, 328 and 341), so the
# counts of allocations are compared with the recording only, not between the runs.
os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"

import torch  # noqa: E402
from torch import nn

import _zoo

device = _zoo.setup()
_zoo.needs(hasattr(torch, "compile"), "torch.compile needs torch 2")
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 1)).to(device)
compiled = torch.compile(model)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(8, 16, device=device)
for step in range(3):
    loss = compiled(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
handle = nn.modules.module.register_module_forward_hook(lambda module, inputs, output: None)
with torch.no_grad():
    _zoo.loss(3, compiled(x).sum(), "hooked")
handle.remove()
_zoo.finish(device)
