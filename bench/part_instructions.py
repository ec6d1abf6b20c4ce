"""What each part of memrec's recording costs the program's thread, in instructions counted by callgrind (figures a
shared machine's other work leaves alone): 2 training steps of a small nn.TransformerEncoder on the CPU (4 layers,
d 128, batch 8 x 64, AdamW; memrec records the CPU allocator there), once per mode, instrumentation on for the 2
steps only. Modes: no recording; the allocator callback alone (stacks, kernels, op scopes, device memory, scope
hooks and owners off); then one part added to it at a time: op scopes, C++ stacks, Python stacks, the scope hooks,
the scope hooks with owner scans; and the default recording (all of them). Each row gives instructions per step
on the program's thread and on all threads (the drain thread's share varies with when it wakes), and the part's
cost over the callback alone, and per unit: per allocation for the callback and the stacks, per RecordFunction call
(aten ops and backward nodes) for the op scopes, per module call for the hooks.
Usage: python3 bench/part_instructions.py [--out /tmp/part-instructions] [--only KEY,...]   (needs valgrind)"""
import argparse
import json
import os
import sys

import callgrind_runs

STEPS = 2
BARE = dict(stacks="off", kernels=False, ops=False, device_memory=False, scopes=False, owners=False)
MODES = {
    "none": None,
    "callback": BARE,
    "ops": {**BARE, "ops": True},
    "cpp": {**BARE, "stacks": "cpp"},
    "python": {**BARE, "stacks": "python"},
    "hooks": {**BARE, "scopes": True},
    "owners": {**BARE, "scopes": True, "owners": True},
    "default": {"stacks": "all"},
}
NAMES = {
    "none": "no recording",
    "callback": "allocator callback and drain (everything else off)",
    "ops": "+ op scopes (RecordFunction)",
    "cpp": "+ C++ stacks",
    "python": "+ Python stacks",
    "hooks": "+ scope hooks (owners=False)",
    "owners": "+ scope hooks and owner scans",
    "default": "memrec.start(stacks=\"all\") (all of them)",
}


UNITS = {  # what each part's cost is counted per: (count of a step, its name)
    "ops": ("ops", "RecordFunction call"),
    "cpp": ("allocs", "allocation"),
    "python": ("allocs", "allocation"),
    "hooks": ("module_calls", "module call"),
}


def model_and_step():
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).train()
    x = torch.randn(8, 64, 128)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model, step


def child(key, out):
    import memrec
    model, step = model_and_step()
    options = MODES[key]
    if options is not None:
        memrec.start(os.path.join(out, f"{key}.memrec"), **options)
    callgrind_runs.count_steps(step, 2, STEPS)
    if options is not None:
        memrec.stop()


def counts(out):
    """A step's allocations (from a recording: an alloc and a free event each), RecordFunction calls (aten ops and
    backward nodes, from torch's profiler) and module calls (forward and backward), counted without valgrind."""
    import torch
    import memrec
    model, step = model_and_step()
    step()
    memrec.start(os.path.join(out, "count.memrec"), **BARE)
    for _ in range(STEPS):
        step()
    events, _ = memrec.stop()
    with torch.autograd.profiler.profile() as prof:
        step()
    calls = []
    handles = [m.register_forward_pre_hook(lambda *_: calls.append(1)) for m in model.modules()]
    step()
    for h in handles:
        h.remove()
    return {"allocs": events / (2 * STEPS), "ops": len(prof.function_events), "module_calls": 2 * len(calls)}


def counted(key, out):
    """Instructions per step callgrind counted: (the program's thread, all threads)."""
    own, total = callgrind_runs.instructions(__file__, key, out)
    return own / STEPS, total / STEPS


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="/tmp/part-instructions")
    p.add_argument("--only", default="", help="modes to run (none and callback always)")
    p.add_argument("--child", choices=list(MODES), help=argparse.SUPPRESS)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.child:
        return child(args.child, args.out)
    keys = list(MODES) if not args.only else ["none", "callback"] + [k for k in args.only.split(",")
                                                                      if k not in ("none", "callback")]
    unknown = [k for k in keys if k not in MODES]
    if unknown:
        sys.exit(f"part_instructions.py: no mode {', '.join(unknown)}; the modes: {', '.join(MODES)}")
    n = counts(args.out)
    print(f"a step: {n['allocs']:.0f} allocations, {n['ops']} RecordFunction calls (aten ops and backward nodes), {n['module_calls']} module calls "
          f"(forward and backward)")
    print("| mode | program's thread, instructions a step | all threads | over the callback alone | per unit |")
    print("|---|---:|---:|---:|---:|")
    rows = {k: counted(k, args.out) for k in keys}
    for k in keys:
        own, total = rows[k]
        extra = own - rows["callback"][0]
        over = "" if k in ("none", "callback") else f"{extra:+,.0f} ({100 * extra / rows['none'][0]:+.2f}%)"
        unit = UNITS.get(k)
        per = f"{extra / n[unit[0]]:,.0f} per {unit[1]}" if unit else ""
        if k == "callback":
            callback = own - rows["none"][0]
            per = f"{callback / n['allocs']:,.0f} per {UNITS['cpp'][1]} ({callback:+,.0f} over no recording)"
        print(f"| {NAMES[k]} | {own:,.0f} | {total:,.0f} | {over} | {per} |")
    print(json.dumps({k: {"program_thread": v[0], "all_threads": v[1]} for k, v in rows.items()}))


if __name__ == "__main__":
    main()
