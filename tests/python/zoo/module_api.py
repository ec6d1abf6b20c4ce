"""The memrec module in the program: with ZOO_MEMREC_OUT set (the zoo's recorded run) a training loop runs
inside `with memrec.record(...)` with memrec.scope and memrec.mark of its own; without it, unchanged."""
# zoo: module-api
# zoo-modules: TransformerEncoder layers.0.self_attn layers.1.linear1
import contextlib
import os

import torch
from torch import nn

import _zoo

out = os.environ.get("ZOO_MEMREC_OUT")
if out:
    import memrec
scope = memrec.scope if out else lambda name: contextlib.nullcontext()

device = _zoo.setup()
# Everything on the device is made inside the recording, so memrec's counts are the whole of memory_stats().
with memrec.record(out) if out else contextlib.nullcontext():
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(3):
        with scope("data"):
            x = torch.randn(2, 8, 32, device=device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        loss.backward()
        opt.step()
        if out:
            memrec.mark(f"step {step} done")
        _zoo.loss(step, loss)
_zoo.finish(device)
