"""The ownership check of issue 22 on the GPU host: Hugging Face GPT-2 eager, GPT-2 under torch.compile, and a Llama
with gradient checkpointing and bf16 autocast, built from configs and trained a few steps, each recorded by
`memrec record`. At the allocated peak, `<none>` must hold at most 5% of the bytes in `stats --by module --json` and
in `--by layer --json`; under torch.compile, `--by layer` names every block (transformer.h.0 .. 11) and each
compiled-code block of 1 MiB or more live at the peak names a line of the model's source that memrec's map of the
generated code holds. gpt2_compile_fx runs the compiled model again under PyTorch's own recorder as well and compares,
for each allocation by compiled code that both record, memrec's source line with the one PyTorch names: its
`augment_with_fx_traces` snapshot's `fx_original_trace`, else inductor's own map of the generated line. Usage: owners_models.py MEMREC OUT_DIR."""
import json
import os
import pickle
import re
import subprocess
import sys
import textwrap

MODELS = {
    "gpt2_eager": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False, ""),
    "gpt2_compile": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False,
                     "model = torch.compile(model)"),
    "gpt2_compile_fx": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False,
                        "model = torch.compile(model)\ntorch.cuda.memory._record_memory_history(max_entries=10**7)"),
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

# gpt2_compile_fx's end: PyTorch's snapshot with the FX traces (torch 2.11), beside memrec's file, and for each
# generated line in it the model's line that inductor's own map gives (PyCodeCache.stack_frames_for_code, what
# PyTorch's errors in compiled code name): augment_with_fx_traces annotates FX GraphModule code, not inductor's.
FX_DUMP = """
import pickle
from torch._inductor.codecache import PyCodeCache
try:
    snapshot = torch.cuda.memory._snapshot(augment_with_fx_traces=True)
except TypeError:  # a torch without it
    snapshot = torch.cuda.memory._snapshot()
inductor = {}
for entry in snapshot["device_traces"][0]:
    for f in entry.get("frames", []):
        if "torchinductor_" in f["filename"] and (f["filename"], f["line"]) not in inductor:
            source = PyCodeCache.stack_frames_for_code(f["filename"], f["line"]) or []
            inductor[f["filename"], f["line"]] = (source[0]["filename"], source[0]["line"]) if source else None
snapshot["inductor_lines"] = inductor
pickle.dump(snapshot, open(PATH, "wb"))
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
    1 MiB or more live at the peak: those whose stack passes through inductor's generated code. Read from the
    exported pickle (its frames are memrec's, innermost first), replayed up to the peak's entry."""
    run = lambda *args: subprocess.run([memrec, *args], check=True, capture_output=True, text=True).stdout
    mapped = json.loads(json.loads(run("info", path, "--json"))["metadata"].get("compiled_code", "{}"))
    lines = {(os.path.basename(f), n) for rows in mapped.values() for row in rows for f, n, _ in row[3]}
    modules = sorted({row[1][-1] for rows in mapped.values() for row in rows if row[1]})
    peak = json.loads(run("stats", path, "--json"))["peak_allocated"]["event"]
    exported = path + ".pickle"
    if os.path.exists(exported):
        os.remove(exported)
    run("export", path, "-o", exported)
    live = {}
    for entry in pickle.load(open(exported, "rb"))["device_traces"][0][:peak + 1]:
        if entry["action"] == "alloc":
            live[entry["addr"]] = entry
        elif entry["action"] in ("free_requested", "free_completed"):
            live.pop(entry["addr"], None)
    compiled = named = size = 0
    for entry in live.values():
        frames = [(os.path.basename(f["filename"]), f["line"]) for f in entry["frames"]]
        generated = next((i for i, f in enumerate(entry["frames"]) if "torchinductor_" in f["filename"]), None)
        if entry["size"] < 2**20 or generated is None:
            continue
        compiled += 1
        if any(f in lines for f in frames[:generated]):
            named += 1
            size += entry["size"]
    return compiled, named, size, modules[:6] + ["..."] + modules[-3:]


def fx_agreement(memrec, path, torch_pickle):
    """(allocations PyTorch names a model line for, of them where memrec's source line is the same, PyTorch's FX
    traces among them, a sample of the others), over the entries both traces hold (aligned as
    tests/scripts/torch_history.py aligns them). PyTorch's line: the frame's fx_original_trace where
    augment_with_fx_traces gave one, else inductor's map of the innermost generated frame."""
    exported = path + ".pickle"
    if os.path.exists(exported):
        os.remove(exported)
    subprocess.run([memrec, "export", path, "-o", exported], check=True, capture_output=True)
    snapshot = pickle.load(open(torch_pickle, "rb"))
    inductor = snapshot.get("inductor_lines", {})
    theirs = [e for e in snapshot["device_traces"][0] if e["action"] != "snapshot"]
    ours = [e for e in pickle.load(open(exported, "rb"))["device_traces"][0] if e["action"] != "snapshot"]
    key = lambda e: (e["action"], e["addr"], e["size"], e["stream"])
    start = next((i for i in range(len(ours)) if list(map(key, ours[i:i + 50])) == list(map(key, theirs[:50]))), None)
    if start is None:
        return 0, 0, 0, ["the two traces do not align"]
    total = agree = fx = 0
    others = []
    for t, o in zip(theirs, ours[start:]):
        want = pytorch_line(t, inductor) if t["action"] == "alloc" else None
        if want is None:
            continue
        fx += want[2]
        generated = next((i for i, f in enumerate(o["frames"]) if "torchinductor_" in f["filename"]), 0)
        got = next(((os.path.basename(f["filename"]), f["line"]) for f in o["frames"][:generated]
                    if f["filename"].endswith(".py")), None)
        total += 1
        agree += got == want[:2]
        if got != want[:2] and len(others) < 3:
            others.append(f"PyTorch {want[:2]}, memrec {got}")
    return total, agree, fx, others


def pytorch_line(entry, inductor):
    """(file name, line, from an FX trace) of the model's line PyTorch gives for a trace entry, or None."""
    for f in entry["frames"]:
        if f.get("fx_original_trace"):
            file, line = re.findall(r'File "(.+)", line (\d+)', f["fx_original_trace"])[-1]
            return os.path.basename(file), int(line), True
        if "torchinductor_" in f["filename"]:
            source = inductor.get((f["filename"], f["line"]))
            return (os.path.basename(source[0]), source[1], False) if source else None
    return None


def main():
    memrec, out = sys.argv[1], sys.argv[2]
    failed = False
    for name, (config, cls, kwargs, batch, seq, ckpt, wrap) in MODELS.items():
        script = f"{out}/{name}.py"
        with open(script, "w") as f:
            f.write(textwrap.dedent(PROGRAM.format(config=config, cls=cls, kwargs=kwargs, ckpt=ckpt, wrap=wrap,
                                                   batch=batch, seq=seq)))
            if name.endswith("_fx"):
                f.write(FX_DUMP.replace("PATH", repr(f"{out}/{name}.torch.pickle")))
        path = f"{out}/{name}.memrec"
        subprocess.run([memrec, "record", "--force", "-o", path, "--", sys.executable, script], check=True)
        for by in ("module", "layer"):
            share, total, keys = none_share(memrec, path, by)
            ok = share <= 0.05
            failed |= not ok
            print(f"{name:13} --by {by:6}: <none> {100 * share:5.1f}% of {total / 2**30:.2f} GiB "
                  f"{'ok' if ok else 'OVER 5%'}; groups {keys}")
        if name.endswith("_fx"):
            total, agree, fx, others = fx_agreement(memrec, path, f"{out}/{name}.torch.pickle")
            ok = total > 0 and agree == total
            failed |= not ok
            print(f"{name:13} PyTorch's model line = memrec's for {agree} of {total} allocations by compiled code "
                  f"({fx} of them from augment_with_fx_traces, the rest from inductor's map) "
                  f"{'ok' if ok else 'DIFFER'} {others}")
            continue
        if wrap:
            blocks, named, size, modules = compiled_blocks(memrec, path)
            ok = blocks > 0 and named == blocks
            failed |= not ok
            print(f"{name:13} compiled-code blocks of 1 MiB+ live at the peak: {named} of {blocks} name a line of "
                  f"the model's source ({size / 2**30:.2f} GiB) {'ok' if ok else 'MISSING'}; mapped modules {modules}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
