"""A batch-size finder: doubles the batch until a training step runs out of memory, catches the error and trains two
steps at the largest batch that fit. On CUDA the program first limits itself to 256 MiB of the device
(set_per_process_memory_fraction) and catches torch.cuda.OutOfMemoryError. The CPU has no such limit: past 512 the
search asks for 2^52 bytes, which no CPU allocator grants (more than a 64-bit process can address), and catches the
RuntimeError the allocator raises."""
# zoo: both
# zoo-modules: Sequential 0 2
import torch
from torch import nn

import _zoo

BUDGET = 256 << 20
CPU_LAST = 512
WIDTH = 64

device = _zoo.setup()
if device.type == "cuda":
    torch.cuda.set_per_process_memory_fraction(BUDGET / torch.cuda.get_device_properties(device).total_memory)
    out_of_memory = torch.cuda.OutOfMemoryError
else:
    out_of_memory = RuntimeError


def batch_of(size):
    if device.type == "cpu" and size > CPU_LAST:
        size = 1 << 44  # rows of WIDTH floats: 2^52 bytes
    return torch.randn(size, WIDTH, device=device)


def step(size):
    loss = model(batch_of(size)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    return loss


with _zoo.recording():
    model = nn.Sequential(nn.Linear(WIDTH, 1024), nn.GELU(), nn.Linear(1024, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    size, fits = 64, 0
    while True:
        try:
            step(size)
        except out_of_memory as e:
            print(f"batch {size}: {type(e).__name__}")
            break
        fits, size = size, size * 2
    if device.type == "cuda":
        torch.cuda.empty_cache()
    print(f"batch found {fits}")
    for s in range(2):
        loss = step(fits)
        opt.step()
        _zoo.loss(s, loss)
_zoo.finish(device)
