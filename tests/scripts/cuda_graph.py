"""Captures a CUDA graph (its allocations go to a private pool) and replays it, keeping the graph alive to the end:
for `memrec record` and `memrec stats --by pool` (scripts/gpu-check.sh). Prints `graph pool (A, B)`."""
import torch

model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
x = torch.randn(256, 1024, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph's documentation asks
    for _ in range(3):
        model(x)
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    y = model(x)
for _ in range(5):
    x.copy_(torch.randn(256, 1024, device="cuda"))
    graph.replay()
torch.cuda.synchronize()
print(f"graph pool {tuple(graph.pool())}", flush=True)
