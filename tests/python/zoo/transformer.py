"""nn.Transformer (encoder and decoder) trained with AdamW."""
# zoo-modules: Transformer encoder.layers.0.self_attn decoder.layers.1.multihead_attn decoder.layers.1.linear2
import torch
from torch import nn

import _zoo

device = _zoo.setup()
model = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
                       dropout=0.1, batch_first=True).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
src, tgt = torch.randn(4, 10, 32, device=device), torch.randn(4, 8, 32, device=device)
mask = model.generate_square_subsequent_mask(8).to(device)
for step in range(3):
    out = model(src, tgt, tgt_mask=mask)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    _zoo.loss(step, loss)
_zoo.finish(device)
