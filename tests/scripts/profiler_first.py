"""torch.profiler (Kineto, a CUPTI client) active before CUDA starts, so before `memrec record` starts its own CUPTI
activity recording (scripts/gpu-check.sh): memrec must say once that it records without kernels, and both the
program and the profiler must go on. Prints `profiler kernels N`."""
import torch
from torch.profiler import ProfilerActivity, profile

with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    x = torch.randn(1024, 1024, device="cuda")
    for _ in range(5):
        x = (x @ x).tanh()
    torch.cuda.synchronize()
kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print(f"profiler kernels {len(kernels)}", flush=True)
