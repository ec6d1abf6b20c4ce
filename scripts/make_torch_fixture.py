"""Writes a PyTorch snapshot pickle that uses the newer snapshot fields: compile_context (torch.compile),
user_metadata (_set_memory_metadata), a CUDA graph's private pool (segment_pool_id), record_function annotations
(external_annotations), and pinned host memory where this torch records it. Run on a machine with a GPU:
    python scripts/make_torch_fixture.py out.pickle
"""
import inspect
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
record = torch.cuda.memory._record_memory_history
params = inspect.signature(record).parameters
kwargs = {"max_entries": 200000, "context": "all", "stacks": "all"}
for name in ("compile_context", "global_record_annotations", "record_pinned_host_memory"):
    if name in params:
        kwargs[name] = True
print("record_memory_history", kwargs, flush=True)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


model = nn.Sequential(Block(256), Block(256)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
compiled = torch.compile(model)
x = torch.randn(64, 256, device="cuda")
compiled(x).sum().backward()  # compile before recording: the recording holds the steps, not the compiler
torch.cuda.synchronize()

record(**kwargs)
set_metadata = getattr(torch.cuda.memory, "_set_memory_metadata", None)
for step in range(2):
    if set_metadata:
        set_metadata(f"step={step}")
    with torch.autograd.profiler.record_function(f"train_step_{step}"):
        loss = compiled(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

if set_metadata:
    set_metadata("cuda_graph")
static_in = torch.randn(32, 256, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(2):
        model(static_in)
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.no_grad(), torch.cuda.graph(graph):
    static_out = model(static_in)
graph.replay()

if set_metadata:
    set_metadata("pinned")
pinned = torch.empty(1 << 20, pin_memory=True)
pinned_gpu = pinned.to("cuda", non_blocking=True)
torch.cuda.synchronize()
del pinned, pinned_gpu

torch.cuda.memory._dump_snapshot(sys.argv[1])
record(enabled=None)

snap = torch.cuda.memory._snapshot()
print("torch", torch.__version__)
print("snapshot keys", sorted(snap.keys()))
