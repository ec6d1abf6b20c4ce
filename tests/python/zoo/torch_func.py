"""torch.func's grad and vmap over a module (functional_call): per-example gradients. functorch on torch 1.13."""
# zoo-modules: Sequential
import torch
from torch import nn

import _zoo

device = _zoo.setup()
try:
    from torch.func import functional_call, grad, vmap
except ImportError:
    try:
        from functorch import grad, vmap
        from torch.nn.utils.stateless import functional_call
    except ImportError:
        _zoo.skip("neither torch.func nor functorch")

model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).to(device)
params = {k: v.detach() for k, v in model.named_parameters()}
x, y = torch.randn(6, 4, device=device), torch.randn(6, 1, device=device)


def loss_of(p, xi, yi):
    return (functional_call(model, p, (xi.unsqueeze(0),)) - yi).pow(2).sum()


for step in range(2):
    per_example = vmap(grad(loss_of), in_dims=(None, 0, 0))(params, x, y)
    params = {k: v - 0.1 * per_example[k].mean(0) for k, v in params.items()}
    _zoo.loss(step, sum(loss_of(params, x[i], y[i]) for i in range(6)))
    _zoo.values("grad", per_example["2.bias"])
_zoo.finish(device)
