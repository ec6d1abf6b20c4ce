"""A GPT written as plain modules, as a speed-run training script has it: compiled whole (fullgraph=True; eager where
torch.compile is missing), wrapped in DDP on one rank (gloo on the CPU, NCCL on CUDA), trained by a hand-written SGD
with momentum. Its two warm-up steps run under torch.profiler (CPU, and CUDA on a GPU; one warmup/active cycle),
whose counts it prints as self_profiling does, then it trains two more steps."""
# zoo: both
# zoo-modules: GPT
# zoo-notes-cuda: not traced from
# zoo-varies: allocation.all.allocated allocation.all.freed
import os

os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # both runs compile afresh, as compile.py says

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

import _zoo  # noqa: E402

VOCAB, WIDTH, HEADS, LAYERS, SEQ = 256, 64, 4, 2, 32


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH, bias=False), nn.Linear(WIDTH, WIDTH, bias=False)
        self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH, bias=False), nn.Linear(4 * WIDTH, WIDTH, bias=False)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        scores = (q @ k.transpose(-2, -1)) * (c // HEADS) ** -0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        y = scores.masked_fill(causal, float("-inf")).softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(F.layer_norm(x, (WIDTH,)))
        return x + self.down(F.relu(self.up(F.layer_norm(x, (WIDTH,)))).square())


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids, targets):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        logits = self.head(F.layer_norm(x, (WIDTH,)))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))


class MomentumSGD(torch.optim.Optimizer):
    def __init__(self, params, lr, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                buf = self.state[p].setdefault("momentum", torch.zeros_like(p))
                buf.mul_(group["momentum"]).add_(p.grad)
                p.add_(buf, alpha=-group["lr"])


device = _zoo.setup()
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
cycles = _zoo.ProfilerCycles(("aten::mm", "aten::bmm", "aten::embedding_dense_backward"))
with _zoo.recording(), _zoo.one_rank(device):
    raw = GPT().to(device)
    model = DistributedDataParallel(torch.compile(raw, fullgraph=True) if hasattr(torch, "compile") else raw)
    opt = MomentumSGD(raw.parameters(), lr=0.05)
    data = torch.randint(0, VOCAB, (4, SEQ + 1), generator=torch.Generator().manual_seed(1)).to(device)

    def train(step):
        loss = model(data[:, :-1], data[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _zoo.loss(step, loss)  # waits for the step's work: a window opens on no kernel of the step before

    warm_up = schedule(wait=0, warmup=1, active=1, repeat=1)
    with profile(activities=activities, on_trace_ready=cycles, schedule=warm_up) as prof:
        for step in range(2):
            train(step)
            prof.step()
    for step in range(2, 4):
        train(step)
cycles.show()
_zoo.finish(device)
