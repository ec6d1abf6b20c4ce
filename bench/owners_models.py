"""The ownership check of issue 22 on the GPU host: Hugging Face GPT-2 eager, GPT-2 under torch.compile, and a Llama
with gradient checkpointing and bf16 autocast, built from configs and trained a few steps, each recorded by
`memrec record`. At the allocated peak, `<none>` must hold at most 5% of the bytes in `stats --by module --json` and
in `--by layer --json`; under torch.compile, `--by layer` names every block (transformer.h.0 .. 11) and each
compiled-code block of 1 MiB or more live at the peak names a line of the model's source that memrec's map of the
generated code holds. Usage: owners_models.py MEMREC OUT_DIR."""
import json
import os
import re
import sqlite3
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


def compiled_blocks(memrec, path):
    """(blocks, of them naming a mapped source line, their bytes, sample modules) for the compiled-code blocks of
    1 MiB or more live at the peak: those whose stack passes through inductor's generated code."""
    db = path + ".db"
    if os.path.exists(db):
        os.remove(db)
    subprocess.run([memrec, "export", path, "--format", "sqlite", "-o", db], check=True, capture_output=True)
    con = sqlite3.connect(db)
    mapped = json.loads(dict(con.execute("select key, value from meta")).get("compiled_code", "{}"))
    lines = {(os.path.basename(f), n) for rows in mapped.values() for row in rows for f, n, _ in row[3]}
    modules = sorted({row[1] for rows in mapped.values() for row in rows if row[1]})
    peak = json.loads(subprocess.run([memrec, "stats", path, "--json"], check=True, capture_output=True,
                                     text=True).stdout)["peak_allocated"]["event"]
    (t,) = con.execute("select time_ns from events where id = ?", (peak,)).fetchone()
    rows = con.execute("""select b.size, b.site from blocks b where b.alloc_ns <= ?1 and (b.free_ns is null or
        b.free_ns > ?1) and b.size >= 1048576 and exists (select 1 from stacks st join frames f on f.id = st.frame
        where st.stack = b.stack and f.file like '%torchinductor_%')""", (t,)).fetchall()
    named = [size for size, site in rows
             if (m := re.search(r"\(([^()]+):(\d+)\)", site.split(" via ")[0])) and (m[1], int(m[2])) in lines]
    return len(rows), len(named), sum(named), modules[:6] + ["..."] + modules[-3:]


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
        if wrap:
            blocks, named, size, modules = compiled_blocks(memrec, path)
            ok = blocks > 0 and named == blocks
            failed |= not ok
            print(f"{name:13} compiled-code blocks of 1 MiB+ live at the peak: {named} of {blocks} name a line of "
                  f"the model's source ({size / 2**30:.2f} GiB) {'ok' if ok else 'MISSING'}; mapped modules {modules}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
