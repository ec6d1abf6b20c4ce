"""The ownership check of issue 22 on the GPU host: Hugging Face GPT-2 eager, GPT-2 under torch.compile, and a Llama
with gradient checkpointing and bf16 autocast, built from configs and trained a few steps, each recorded by
`memrec record`. At the allocated peak, `<none>` must hold at most 5% of the bytes in `stats --by module --json` and
in `--by layer --json`; under torch.compile, `--by layer` names every block (transformer.h.0 .. 11) and each
compiled-code block of 1 MiB or more live at the peak names a line of the model's source that memrec's map of the
generated code holds. Each compiled model has an inductor cache of its own: gpt2_compile compiles into an empty one;
gpt2_compile_cached runs again on it, loading the graphs gpt2_compile compiled under memrec; gpt2_compile_fx
loads graphs that a run without memrec put in its cache. The two that load cached graphs compare, for each
allocation by compiled code, memrec's source line with the one inductor's own line map gives (as PyTorch's errors in
compiled code name it).
Usage: owners_models.py MEMREC OUT_DIR [MODEL ...]"""
import json
import os
import bisect
import pickle
import re
import shutil
import subprocess
import sys
import textwrap

MODELS = {
    "gpt2_eager": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False, ""),
    "gpt2_compile": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False,
                     "model = torch.compile(model)"),
    "gpt2_compile_cached": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False,
                            "model = torch.compile(model)"),
    "gpt2_compile_fx": ("GPT2Config", "GPT2LMHeadModel", "dict(n_layer=12, n_embd=768, n_head=12)", 8, 1024, False,
                        "model = torch.compile(model)"),
    "llama_ckpt": ("LlamaConfig", "LlamaForCausalLM",
                   "dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16, "
                   "num_key_value_heads=8, max_position_embeddings=2048)", 4, 1024, True, ""),
}

# A compiled model's inductor cache (a folder of OUT_DIR, emptied when the run starts) and whether a run without
# memrec fills it first.
CACHES = {"gpt2_compile": ("torchinductor_memrec", False), "gpt2_compile_cached": ("torchinductor_memrec", False),
          "gpt2_compile_fx": ("torchinductor_plain", True)}
CHECK_AGAINST_INDUCTOR = ("gpt2_compile", "gpt2_compile_cached", "gpt2_compile_fx")

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

# gpt2_compile_fx's end: inductor's own map of its generated files to the model's lines (PyCodeCache.linemaps, what
# stack_frames_for_code and PyTorch's errors in compiled code read), saved beside memrec's file. PyTorch's
# augment_with_fx_traces cannot serve here: it needs PyTorch's own recorder on, under which memrec gets no Python
# frames, and on 2.11 it annotated none of inductor's frames (it maps FX GraphModule code).
FX_DUMP = """
import pickle
from torch._inductor.codecache import PyCodeCache
pickle.dump({path: (list(m[0]), list(m[1])) for path, m in PyCodeCache.linemaps.items() if m}, open(PATH, "wb"))
"""


def none_share(memrec, path, by):
    out = subprocess.run([memrec, "stats", path, "--by", by, "--json", "--top", "100000"], check=True,
                         capture_output=True, text=True).stdout
    stats = json.loads(out)
    total = sum(g["bytes"] for g in stats["live"])
    none = sum(g["bytes"] for g in stats["live"] if g["key"] == "<none>")
    return none / total if total else 0.0, total, [g["key"] for g in stats["live"][:14]]


def exported_trace(memrec, path):
    """The trace entries of memrec's pickle export of `path` (frames innermost first, as memrec resolved them)."""
    exported = path + ".pickle"
    if os.path.exists(exported):
        os.remove(exported)
    subprocess.run([memrec, "export", path, "-o", exported], check=True, capture_output=True)
    return pickle.load(open(exported, "rb"))["device_traces"][0]


def generated_frame(entry, files=None):
    """The index of an entry's innermost frame in inductor's generated code (among `files` when given), or None."""
    return next((i for i, f in enumerate(entry["frames"])
                 if "torchinductor_" in f["filename"] and (files is None or f["filename"] in files)), None)


def compiled_blocks(memrec, path):
    """(blocks, of them naming a mapped source line, their bytes, sample modules) for the compiled-code blocks of
    1 MiB or more live at the peak: those whose stack passes through inductor's generated code. Read from the
    exported pickle (its frames are memrec's, innermost first), replayed up to the peak's entry."""
    run = lambda *args: subprocess.run([memrec, *args], check=True, capture_output=True, text=True).stdout
    mapped = json.loads(json.loads(run("info", path, "--json"))["metadata"].get("compiled_code", "{}"))
    lines = {(os.path.basename(f), n) for rows in mapped.values() for row in rows for f, n, _ in row[3]}
    modules = sorted({row[1][-1] for rows in mapped.values() for row in rows if row[1]})
    peak = json.loads(run("stats", path, "--json"))["peak_allocated"]["event"]
    live = {}
    for entry in exported_trace(memrec, path)[:peak + 1]:
        if entry["action"] == "alloc":
            live[entry["addr"]] = entry
        elif entry["action"] in ("free_requested", "free_completed"):
            live.pop(entry["addr"], None)
    compiled = named = size = 0
    for entry in live.values():
        frames = [(os.path.basename(f["filename"]), f["line"]) for f in entry["frames"]]
        generated = generated_frame(entry)
        if entry["size"] < 2**20 or generated is None:
            continue
        compiled += 1
        if any(f in lines for f in frames[:generated]):
            named += 1
            size += entry["size"]
    return compiled, named, size, modules[:6] + ["..."] + modules[-3:]


def inductor_agreement(memrec, path, linemaps_pickle):
    """(allocations by compiled code, of them where memrec's source line is the one inductor's own map gives, a
    sample of the others): for each alloc entry of memrec's exported trace whose stack passes through generated
    code, the model's line as PyCodeCache.stack_frames_for_code finds it (the last line-map entry at or before the
    generated line; the innermost frame of its stack trace outside torch's files) against memrec's innermost source
    frame outside them."""
    linemaps = pickle.load(open(linemaps_pickle, "rb"))
    total = agree = 0
    others = []
    for entry in exported_trace(memrec, path):
        generated = generated_frame(entry, linemaps)
        if entry["action"] != "alloc" or generated is None:
            continue
        frame = entry["frames"][generated]
        lines, traces = linemaps[frame["filename"]]
        at = bisect.bisect_right(lines, frame["line"]) - 1
        source = re.findall(r'File "(.+)", line (\d+)', traces[at] or "") if at >= 0 else []
        source = [(f, n) for f, n in source if "-packages/torch/" not in f]  # as memrec's sites skip torch's files
        if not source:
            continue
        want = (os.path.basename(source[-1][0]), int(source[-1][1]))
        got = next(((os.path.basename(f["filename"]), f["line"]) for f in entry["frames"][:generated]
                    if f["filename"].endswith(".py") and "-packages/torch/" not in f["filename"]), None)  # as sites skip torch
        total += 1
        agree += got == want
        if got != want and len(others) < 3:
            others.append(f"inductor {want}, memrec {got}")
    return total, agree, others


def environment(out, name, emptied):
    """The program's environment: its model's inductor cache, emptied at its first use in this run."""
    env = dict(os.environ)
    if name in CACHES:
        cache = f"{out}/{CACHES[name][0]}"
        if cache not in emptied:
            shutil.rmtree(cache, ignore_errors=True)
            emptied.add(cache)
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
    return env


def main():
    memrec, out, only = sys.argv[1], sys.argv[2], sys.argv[3:]
    failed = False
    emptied = set()
    for name, (config, cls, kwargs, batch, seq, ckpt, wrap) in MODELS.items():
        if only and name not in only:
            continue
        script = f"{out}/{name}.py"
        with open(script, "w") as f:
            f.write(textwrap.dedent(PROGRAM.format(config=config, cls=cls, kwargs=kwargs, ckpt=ckpt, wrap=wrap,
                                                   batch=batch, seq=seq)))
            if name in CHECK_AGAINST_INDUCTOR:
                f.write(FX_DUMP.replace("PATH", repr(f"{out}/{name}.linemaps.pickle")))
        path = f"{out}/{name}.memrec"
        env = environment(out, name, emptied)
        if CACHES.get(name, (None, False))[1]:
            subprocess.run([sys.executable, script], check=True, env=env)
        subprocess.run([memrec, "record", "--force", "-o", path, "--", sys.executable, script], check=True, env=env)
        for by in ("module", "layer"):
            share, total, keys = none_share(memrec, path, by)
            ok = share <= 0.05
            failed |= not ok
            print(f"{name:19} --by {by:6}: <none> {100 * share:5.1f}% of {total / 2**30:.2f} GiB "
                  f"{'ok' if ok else 'OVER 5%'}; groups {keys}")
        if name in CHECK_AGAINST_INDUCTOR:
            total, agree, others = inductor_agreement(memrec, path, f"{out}/{name}.linemaps.pickle")
            ok = total > 0 and agree == total
            failed |= not ok
            print(f"{name:19} inductor's own map gives memrec's model line for {agree} of {total} allocations by "
                  f"compiled code {'ok' if ok else 'DIFFER'} {others}")
        if wrap:
            blocks, named, size, modules = compiled_blocks(memrec, path)
            ok = blocks > 0 and named == blocks
            failed |= not ok
            print(f"{name:19} compiled-code blocks of 1 MiB+ live at the peak: {named} of {blocks} name a line of "
                  f"the model's source ({size / 2**30:.2f} GiB) {'ok' if ok else 'MISSING'}; mapped modules {modules}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
