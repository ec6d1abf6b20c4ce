"""A program that profiles its own steps with torch.profiler (CPU, and CUDA on a GPU; profile_memory=True) on a
schedule of two wait/warmup/active cycles, printing what its profiler saw of each cycle: op events, and on CUDA the
device events (kernels, copies, memsets) of those ops. memrec shares CUPTI with it: the profiler gets every event it
gets alone, Kineto prints nothing new, and on CUDA the file names the windows memrec lent CUPTI out. Recorded under
`memrec record` and `import memrec`. With SELF_PROFILING_EDGES=1 it also prints, to stderr, the device events of each
cycle that belong to none of its ops."""
# zoo: both
# zoo-modules: Sequential 0 2
# zoo-notes-cuda: not traced from
import collections
import os
import sys

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

import _zoo

device = _zoo.setup()
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
seen = []
CPU = torch.autograd.DeviceType.CPU


OPS = ("aten::addmm", "aten::mm", "aten::relu", "aten::threshold_backward", "aten::pow")  # the model's own ops


def counted(prof):
    """Per cycle: the model's op events by name (other op and [memory] event counts vary from run to run on the CPU),
    the device events, and those of them the window's ops launched. torch.profiler waits for the device when a
    window closes, not when it opens: a kernel launched before the window that starts after it opened would be in the
    trace too, linked to none of the window's ops (as are the GPU annotations of record_function blocks), so each
    step reads its loss before the profiler's step."""
    events = prof.events()
    ops = collections.Counter(e.name for e in events if e.name in OPS)
    of_ops = collections.Counter(k.name for e in events if e.device_type == CPU for k in e.kernels)
    device = sum(1 for e in events if e.device_type != CPU)
    seen.append((" ".join(f"{op[6:]} {ops[op]}" for op in OPS), device, sum(of_ops.values())))
    if os.environ.get("SELF_PROFILING_EDGES") == "1":
        others = collections.Counter(e.name for e in events if e.device_type != CPU) - of_ops
        print(f"cycle {len(seen) - 1}: device events of no op: {dict(others)}", file=sys.stderr)


with _zoo.recording():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16, device=device)
    with profile(activities=activities, profile_memory=True, on_trace_ready=counted,
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=2)) as prof:
        for step in range(9):
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            _zoo.loss(step, loss)  # reads the loss: the step's kernels have run before the next window opens
            prof.step()
for cycle, (ops, device, of_ops) in enumerate(seen):
    print(f"cycle {cycle}: {ops}; {device} device events, {of_ops} of its ops")
_zoo.finish(device)
