"""Layers by the model's own names on the GPU host (issue 39): a 12-layer GPT of plain modules (transformer.h.0 .. 11,
lm_head), trained 3 steps and then run forward once more, each case eager (TORCH_COMPILE_DISABLE=1) and compiled,
recorded by `memrec record`. At the end of that last forward (every layer's saved activations live; found by a
marker block the program allocates there), `stats --by layer --json` must give the 12 layers' activation bytes
within 10% of their mean in both runs, the same layer names in both, and no wrapper's part (`module.`, `_orig_mod`,
`WrapperModule`, `L['self']`, ...) in any layer, module or owner name; DDP's gradient buckets are the layer "ddp
bucket" and FSDP2's all-gathered parameters "fsdp all-gather".
Cases: whole (torch.compile(model, fullgraph=True)), blocks (torch.compile of each block), inplace (each block's
module.compile(), as compile_repeated_blocks does), ddp (one rank on NCCL,
DistributedDataParallel around the compiled model, as speed-run scripts do), fsdp2 (fully_shard per block and root;
each block compiled in place).
Usage: layers_check.py MEMREC OUT_DIR [CASE ...]"""
import json
import os
import pickle
import re
import socket
import subprocess
import sys

LAYERS = 12
MARK_BYTES = 12345 * 512  # the marker block's size: no model tensor has it
WRAPPER_PARTS = re.compile(r"(^|\.)(module|_orig_mod|_fsdp_wrapped_module|_checkpoint_wrapped_module|"
                           r"(compiled_)?submod_\d+)(\.|$)|"
                           r"WrapperModule|GraphModule|L\['self'\]|DistributedDataParallel|OptimizedModule")

PROGRAM = r"""
import os, sys, time, torch, torch.nn as nn, torch.nn.functional as F
case = sys.argv[1]
torch.manual_seed(0)
D, H, V, T, B = 768, 12, 8192, 1024, 8


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, D))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(D), Attention(), nn.LayerNorm(D), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(V, D), wpe=nn.Embedding(T, D),
                                              h=nn.ModuleList(Block() for _ in range(%(layers)d)), ln_f=nn.LayerNorm(D)))
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T, device=idx.device))
        for block in self.transformer.h:
            x = block(x)
        return F.cross_entropy(self.lm_head(self.transformer.ln_f(x)).view(-1, V), idx.view(-1))


model = GPT().cuda()
if case in ("ddp", "fsdp2"):
    import torch.distributed as dist
    dist.init_process_group("nccl")
if case == "whole":
    model = torch.compile(model, fullgraph=True)
elif case == "blocks":
    for i, block in enumerate(model.transformer.h):
        model.transformer.h[i] = torch.compile(block)
elif case == "inplace":
    for block in model.transformer.h:
        block.compile()  # in place, as compile_repeated_blocks does
elif case == "fsdp2":
    from torch.distributed.fsdp import fully_shard
    for block in model.transformer.h:
        fully_shard(block)
        block.compile()  # in place, as compile_repeated_blocks does
    fully_shard(model)
if case == "ddp":
    model = torch.nn.parallel.DistributedDataParallel(torch.compile(model), device_ids=[0])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
idx = torch.randint(0, V, (B, T), device="cuda")
for step in range(3):
    model(idx).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
loss = model(idx)  # every layer's saved activations are live from here
mark = torch.empty(%(mark)d, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
time.sleep(0.5)
print("loss", loss.item())
del mark, loss
if case in ("ddp", "fsdp2"):
    dist.destroy_process_group()
"""


def run(memrec, out, case, compiled):
    name = f"{case}_{'compiled' if compiled else 'eager'}"
    program = os.path.join(out, "layers_gpt.py")
    with open(program, "w") as f:
        f.write(PROGRAM % {"layers": LAYERS, "mark": MARK_BYTES})
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(out, "inductor"))
    if not compiled:
        env["TORCH_COMPILE_DISABLE"] = "1"
    if case in ("ddp", "fsdp2"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    path = os.path.join(out, name + ".memrec")
    subprocess.run([memrec, "record", "--force", "-o", path, "--", sys.executable, program, case], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    if not os.path.exists(path):  # a rank's file
        path = os.path.join(out, name + ".rank0.memrec")
    return name, path


def mark_offset_ns(memrec, path):
    """Nanoseconds from the recording's start to the marker block's allocation (the end of the last forward)."""
    dump = path + ".pickle"
    subprocess.run([memrec, "export", path, "-o", dump], check=True, stdout=subprocess.DEVNULL)
    with open(dump, "rb") as f:
        trace = pickle.load(f)["device_traces"][0]
    start = trace[0]["time_us"]
    mark = next(e for e in trace if e["action"] == "alloc" and e["size"] == MARK_BYTES)
    return int((mark["time_us"] - start) * 1000) - 1000


def stats(memrec, path, by, at_ns):
    text = subprocess.run([memrec, "stats", path, "--by", by, "--json", "--top", "1000", "--at", f"{at_ns}ns"],
                          check=True, capture_output=True, text=True).stdout
    return json.loads(text)["live"]


def compiled_maps(memrec, path):
    """The file's maps of compiled code as `info` sums them up (compiled_code, and compiled_pieces under DDP)."""
    out = subprocess.run([memrec, "info", path], check=True, capture_output=True, text=True).stdout
    return [line.split(None, 1)[0] + " " + line.split("(", 1)[1].split(",")[0] for line in out.splitlines()
            if line.strip().startswith("compiled_") and "(" in line]


def layers_of(live):
    """{layer: activation bytes} of the model's blocks."""
    return {g["key"]: g["categories"].get("activation", 0) for g in live
            if re.fullmatch(r"transformer\.h\.\d+", g["key"])}


# The wrapper's own blocks live at the end of the forward, as `--by layer` must name them: DDP's gradient buckets (a
# copy of every gradient) and FSDP2's all-gathered parameters of the root (not resharded after its forward).
WRAPPER_BLOCKS = {"ddp": ("ddp bucket", "gradient"), "fsdp2": ("fsdp all-gather", "parameter")}


def wrapper_rows(name, case, by_layer):
    """Problems with the row of the wrapper's own blocks (printed with its bytes)."""
    if case not in WRAPPER_BLOCKS:
        return []
    key, category = WRAPPER_BLOCKS[case]
    row = next((g for g in by_layer if g["key"] == key), None)
    got = row["categories"].get(category, 0) if row else 0
    print(f"{name}: --by layer '{key}' {got / 2**20:.1f} MiB {category}")
    return [] if got > 0 else [f"{name}: no '{key}' row with {category} bytes in --by layer"]


def check(memrec, out, case):
    problems, tables = [], {}
    for compiled in (False, True):
        name, path = run(memrec, out, case, compiled)
        if compiled:
            print(f"{name}: " + ", ".join(compiled_maps(memrec, path)))
        at = mark_offset_ns(memrec, path)
        by_layer = stats(memrec, path, "layer", at)
        layers = layers_of(by_layer)
        tables[name] = (layers, sorted(g["key"] for g in by_layer))
        mean = sum(layers.values()) / max(len(layers), 1)
        off = {k: v for k, v in layers.items() if mean == 0 or abs(v - mean) > 0.1 * mean}
        if len(layers) != LAYERS or off:
            problems.append(f"{name}: {len(layers)} layers, mean {mean / 2**20:.1f} MiB, off by >10%: "
                            + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in off.items()))
        for by in ("layer", "module", "owner"):
            rows = by_layer if by == "layer" else stats(memrec, path, by, at)
            wrapped = [g["key"] for g in rows if WRAPPER_PARTS.search(g["key"])]
            if wrapped:
                problems.append(f"{name}: --by {by} names wrappers: {', '.join(wrapped[:6])}")
            if by == "owner":
                print(f"{name} --by owner: " + ", ".join(g["key"] for g in rows[:8]))
        problems += wrapper_rows(name, case, by_layer)
    (eager, eager_keys), (comp, comp_keys) = tables.values()
    print(f"{case}: layer activation MiB at the end of the forward, eager | compiled")
    for k in sorted(set(eager) | set(comp), key=lambda k: int(k.rsplit(".", 1)[1])):
        print(f"  {k:<16} {eager.get(k, 0) / 2**20:>9.1f} | {comp.get(k, 0) / 2**20:>9.1f}")
    print(f"  --by layer keys eager: {' '.join(eager_keys)}")
    print(f"  --by layer keys compiled: {' '.join(comp_keys)}")
    if set(eager) != set(comp):
        problems.append(f"{case}: layer names differ: {sorted(set(eager) ^ set(comp))}")
    return problems


def main():
    memrec, out, *cases = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    problems = []
    for case in cases or ["whole", "blocks", "inplace", "ddp", "fsdp2"]:
        try:
            problems += check(memrec, out, case)
        except (subprocess.CalledProcessError, StopIteration, KeyError) as e:
            problems.append(f"{case}: {type(e).__name__}: {e}")
    for p in problems:
        print("FAIL", p)
    print("layers:", "ok" if not problems else f"{len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
