"""TransformerEncoder and TransformerDecoder in eval: the encoder's fast path under no_grad, with nested tensors
(enable_nested_tensor=True and a padding mask), and the decoder after it."""
# zoo-modules: TransformerEncoder TransformerDecoder layers.0.multihead_attn
import torch
from torch import nn

import _zoo

device = _zoo.setup()
layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).to(device).eval()
decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(32, 4, 64, batch_first=True), 2).to(device).eval()
x = torch.randn(3, 12, 32, device=device)
padding = torch.zeros(3, 12, dtype=torch.bool, device=device)
padding[0, 8:] = True
padding[2, 5:] = True
with torch.no_grad():
    for step in range(2):
        memory = encoder(x, src_key_padding_mask=padding)
        out = decoder(x, memory.nan_to_num(0.0), memory_key_padding_mask=padding)
        _zoo.loss(step, memory.nan_to_num(0.0).sum(), "encoder")
        _zoo.loss(step, out.pow(2).sum(), "decoder")
_zoo.finish(device)
