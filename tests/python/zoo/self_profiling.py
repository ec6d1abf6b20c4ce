"""A program that profiles its own steps with torch.profiler (CPU, and CUDA on a GPU; profile_memory=True) on a
schedule of two wait/warmup/active cycles, printing what its profiler saw of each cycle: op events, and on CUDA the
device events (kernels, copies, memsets) of those ops. memrec shares CUPTI with it: the profiler gets every event it
gets alone, Kineto prints nothing new, and on CUDA the file names the windows memrec lent CUPTI out. Recorded under
`memrec record` and `import memrec`. With SELF_PROFILING_EDGES=1 it also prints, to stderr, the device events of each
cycle that belong to none of its ops."""
# zoo: both
# zoo-modules: Sequential 0 2
# zoo-notes-cuda: not traced from
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

import _zoo

device = _zoo.setup()
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
cycles = _zoo.ProfilerCycles(("aten::addmm", "aten::mm", "aten::relu", "aten::threshold_backward", "aten::pow"))

with _zoo.recording():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16, device=device)
    with profile(activities=activities, profile_memory=True, on_trace_ready=cycles,
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=2)) as prof:
        for step in range(9):
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            _zoo.loss(step, loss)  # reads the loss: the step's kernels have run before the next window opens
            prof.step()
cycles.show()
_zoo.finish(device)
