"""nn.MultiheadAttention on its own: self-attention (the same tensor as query, key and value) and cross
attention with a key padding mask, weights returned and not."""
# zoo-modules: MultiheadAttention Linear
import torch
from torch import nn

import _zoo

device = _zoo.setup()
self_attn = nn.MultiheadAttention(32, 4, batch_first=True).to(device)
cross = nn.MultiheadAttention(32, 4, kdim=16, vdim=16, batch_first=True).to(device)
proj = nn.Linear(32, 32).to(device)
opt = torch.optim.SGD([*proj.parameters(), *self_attn.parameters(), *cross.parameters()], lr=0.1)
x, kv = torch.randn(2, 6, 32, device=device), torch.randn(2, 5, 16, device=device)
mask = torch.tensor([[False] * 5, [False, False, False, True, True]], device=device)
for step in range(3):
    h = torch.relu(proj(x))
    a, _ = self_attn(h, h, h, need_weights=False)
    b, w = cross(a, kv, kv, key_padding_mask=mask)
    loss = b.pow(2).mean() + w.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
