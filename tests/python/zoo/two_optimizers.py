"""Two optimizers over two parts of a model (SGD and Adam), each with an LR scheduler."""
# zoo-modules: Sequential Linear 0
import torch
from torch import nn

import _zoo

device = _zoo.setup()
body, head = nn.Sequential(nn.Linear(8, 16), nn.ReLU()).to(device), nn.Linear(16, 1).to(device)
opt_body = torch.optim.SGD(body.parameters(), lr=0.1, momentum=0.9)
opt_head = torch.optim.Adam(head.parameters(), lr=1e-2)
sched_body = torch.optim.lr_scheduler.StepLR(opt_body, step_size=1, gamma=0.5)
sched_head = torch.optim.lr_scheduler.CosineAnnealingLR(opt_head, T_max=4)
x = torch.randn(4, 8, device=device)
for step in range(4):
    loss = head(body(x)).pow(2).mean()
    opt_body.zero_grad()
    opt_head.zero_grad()
    loss.backward()
    opt_body.step()
    opt_head.step()
    sched_body.step()
    sched_head.step()
    _zoo.loss(step, loss)
    _zoo.loss(step, sched_head.get_last_lr()[0], "lr")
_zoo.finish(device)
