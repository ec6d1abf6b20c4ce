"""Hugging Face models for the zoo: built from a small config with random weights (no hub), trained a few steps
on random tokens with their own loss. Skips where transformers is not installed."""
import contextlib

import _zoo

VOCAB = 128
GPT2 = dict(n_layer=2, n_embd=64, n_head=4, n_positions=64)  # GPT-2's shape, small


def transformers_or_skip():
    try:
        import transformers
    except ImportError:
        _zoo.skip("transformers is not installed")
    return transformers


def build(config_name, model_class, config):
    """The model from a small config, with random weights."""
    transformers = transformers_or_skip()
    config = getattr(transformers, config_name)(vocab_size=VOCAB, **config)
    config._attn_implementation = "eager"  # deterministic: no fused attention kernels with atomics
    return getattr(transformers, model_class)(config)


def train(config_name, model_class, config, *, seq2seq=False, checkpointing=False, bf16=False, steps=3):
    device = _zoo.setup()
    transformers_or_skip()
    import torch
    model = build(config_name, model_class, config).to(device).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, VOCAB, (2, 16), generator=g).to(device)
    batch = dict(input_ids=ids, labels=ids)
    if seq2seq:
        batch["labels"] = torch.randint(1, VOCAB, (2, 8), generator=g).to(device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    for step in range(steps):
        with autocast:
            loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        _zoo.loss(step, loss)
    _zoo.finish(device)
