"""LSTM and GRU (two layers, one bidirectional), trained with Adam."""
# zoo-modules: LSTM GRU
import torch
from torch import nn

import _zoo

device = _zoo.setup()
lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True).to(device)
gru = nn.GRU(16, 8, bidirectional=True).to(device)
opt = torch.optim.Adam(list(lstm.parameters()) + list(gru.parameters()), lr=1e-2)
x = torch.randn(4, 7, 8, device=device)
for step in range(3):
    out, (h, c) = lstm(x)
    out2, h2 = gru(out.transpose(0, 1))
    loss = out2.pow(2).mean() + h.mean() + c.mean() + h2.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
