"""Mixed precision: autocast (bfloat16 on CPU, float16 on CUDA) with a GradScaler, enabled on CUDA only."""
# zoo-modules: Sequential 0 2
import torch
from torch import nn

import _zoo

device = _zoo.setup()
dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3; torch.cuda.amp's warns there
    scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
else:
    scaler = torch.cuda.amp.GradScaler(enabled=device.type == "cuda")
x = torch.randn(8, 16, device=device)
for step in range(3):
    with torch.autocast(device.type, dtype=dtype):
        loss = model(x).float().pow(2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    _zoo.loss(step, loss)
_zoo.finish(device)
