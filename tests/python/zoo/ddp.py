"""DistributedDataParallel with 2 ranks on gloo. Started without RANK, this program is the launcher (no torch):
it starts the two ranks as torchrun does (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and prints
their output in rank order."""
# zoo-modules: Sequential 0 2
import os
import socket
import subprocess
import sys

if "RANK" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    ranks = [subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], stdout=subprocess.PIPE,
                              env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)) for r in range(2)]
    outputs = [p.communicate()[0] for p in ranks]
    for out in outputs:
        sys.stdout.buffer.write(out)
    sys.exit(max(p.returncode for p in ranks))

import torch  # noqa: E402  a rank from here on
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import _zoo  # noqa: E402

device = _zoo.setup()
rank = int(os.environ["RANK"])
dist.init_process_group("gloo")
model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to(device))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank)).to(device)
for step in range(3):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss, f"rank{rank}")
_zoo.values(f"rank{rank} weight", model.module[2].weight)
dist.destroy_process_group()
_zoo.finish(device)
