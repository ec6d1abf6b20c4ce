"""The program's own hooks beside memrec's: forward pre hooks that change the input, forward hooks that change
the output, full backward hooks that scale the gradient, and a global forward hook of its own."""
# zoo-modules: Sequential 0 1 2
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
seen = []
model[0].register_forward_pre_hook(lambda m, inputs: (inputs[0] * 0.5,))
model[1].register_forward_hook(lambda m, inputs, output: output + 0.25)
model[2].register_full_backward_hook(lambda m, grad_in, grad_out: (grad_in[0] * 2,))
model[0].register_full_backward_hook(lambda m, grad_in, grad_out: seen.append(grad_out[0].sum().item()))
handle = nn.modules.module.register_module_forward_hook(lambda m, inputs, output: seen.append(type(m).__name__))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8, device=device)
for step in range(3):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
handle.remove()
print("seen " + " ".join(s if isinstance(s, str) else s.hex() for s in seen))
_zoo.finish(device)
