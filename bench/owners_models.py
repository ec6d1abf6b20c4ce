"""The ownership check of issue 22 on the GPU host: Hugging Face GPT-2 eager, GPT-2 under torch.compile, and a Llama
with gradient checkpointing and bf16 autocast, built from configs and trained a few steps, each recorded by
`memrec record`. At the allocated peak, `<none>` must hold at most 5% of the bytes in `stats --by module --json` and
in `--by layer --json`. Usage: owners_models.py MEMREC OUT_DIR."""
import json
import subprocess
import sys
import textwrap

MODELS = {
    "gpt2_eager": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False, ""),
    "gpt2_compile": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False,
                     "model = torch.compile(model)"),
    "llama_ckpt": ("LlamaConfig", "LlamaForCausalLM",
                   "dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16, "
                   "num_key_value_heads=8, max_position_embeddings=2048)", 4, 1024, True, ""),
}

PROGRAM = """
import contextlib, torch, transformers
config = transformers.{config}(vocab_size=50257, **{kwargs})
model = transformers.{cls}(config).cuda().train()
if {ckpt}:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": False}})
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused={ckpt})
{wrap}
ids = torch.randint(0, 50257, ({batch}, {seq}), device="cuda")
autocast = torch.autocast("cuda", dtype=torch.bfloat16) if {ckpt} else contextlib.nullcontext()
for step in range(4):
    with autocast:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
"""


def none_share(memrec, path, by):
    out = subprocess.run([memrec, "stats", path, "--by", by, "--json", "--top", "100000"], check=True,
                         capture_output=True, text=True).stdout
    stats = json.loads(out)
    total = sum(g["bytes"] for g in stats["live"])
    none = sum(g["bytes"] for g in stats["live"] if g["key"] == "<none>")
    return none / total if total else 0.0, total, [g["key"] for g in stats["live"][:14]]


def main():
    memrec, out = sys.argv[1], sys.argv[2]
    failed = False
    for name, (config, cls, kwargs, batch, seq, ckpt, wrap) in MODELS.items():
        script = f"{out}/{name}.py"
        with open(script, "w") as f:
            f.write(textwrap.dedent(PROGRAM.format(config=config, cls=cls, kwargs=kwargs, ckpt=ckpt, wrap=wrap,
                                                   batch=batch, seq=seq)))
        path = f"{out}/{name}.memrec"
        subprocess.run([memrec, "record", "--force", "-o", path, "--", sys.executable, script], check=True)
        for by in ("module", "layer"):
            share, total, keys = none_share(memrec, path, by)
            ok = share <= 0.05
            failed |= not ok
            print(f"{name:13} --by {by:6}: <none> {100 * share:5.1f}% of {total / 2**30:.2f} GiB "
                  f"{'ok' if ok else 'OVER 5%'}; groups {keys}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
