"""A long real training run under `memrec record`, then every command on its file (issue 24's GPU check).

A small nn.TransformerEncoder (4 layers, d 128, batch 8 x 64) trained with AdamW for SECONDS seconds of wall time:
small tensors and many steps, so the allocator's events come fast. Then each command opens the file: info, stats
(whole and one step by --steps), diff against itself, report (no picture), export of one step as a pickle, whatif
allocator. Prints the recording's counts, the recorder's memory (its peak RSS against a run without memrec) and,
per command, wall time and peak RSS (the children's ru_maxrss, each command in a fresh child).
Usage: long_run.py MEMREC OUT_DIR [SECONDS]"""
import json
import os
import subprocess
import sys
import textwrap
import time

PROGRAM = """
import os, sys, time, torch
DEVICE = os.environ.get("LONG_RUN_DEVICE", "cuda")
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
model = torch.nn.TransformerEncoder(layer, 4).to(DEVICE).train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(8, 64, 128, device=DEVICE)
deadline, steps = time.monotonic() + float(sys.argv[1]), 0
while time.monotonic() < deadline:
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    steps += 1
torch.cuda.synchronize() if DEVICE == "cuda" else None
print("steps", steps)
"""


def timed(args):
    """(wall seconds, peak RSS in bytes of this child alone, stdout): run in a fresh grandchild so that
    ru_maxrss is its own."""
    probe = ("import resource, subprocess, sys, time; t = time.monotonic(); "
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024; "
             "print(time.monotonic() - t, rss, p.returncode); "
             "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr[-2000:])")
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True)
    head, _, rest = out.stdout.partition("\n")
    wall, rss, rc = head.split()
    if int(rc) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {out.stderr}")
    return float(wall), int(rss), rest


def main():
    memrec, out = sys.argv[1], sys.argv[2]
    seconds = sys.argv[3] if len(sys.argv) > 3 else "120"
    os.makedirs(out, exist_ok=True)
    script, path = f"{out}/long_train.py", f"{out}/long.memrec"
    with open(script, "w") as f:
        f.write(textwrap.dedent(PROGRAM))
    plain = timed([sys.executable, script, "10"])
    wall, rss, printed = timed([memrec, "record", "--force", "-o", path, "--", sys.executable, script, seconds])
    info = json.loads(timed([memrec, "info", path, "--json"])[2])
    size = os.path.getsize(path)
    steps = int(printed.split("steps ", 1)[1].split()[0])
    plain_steps = int(plain[2].split("steps ", 1)[1].split()[0])
    print(f"recorded {info['events']:,} events, {info['kernels']:,} kernels, {info['scopes']:,} scopes, "
          f"{info['dropped_events']:,} dropped, in {wall:.1f} s ({info['events'] / wall / 1e6:.2f}M events/s "
          f"over the whole command); file {size / 1e9:.3f} GB ({size / max(info['events'], 1):.1f} B/event); "
          f"peak RSS of memrec record and the program {rss / 2**20:.0f} MiB, the program alone (10 s) "
          f"{plain[1] / 2**20:.0f} MiB")
    print(f"{steps:,} training steps, {steps / float(seconds):.1f}/s; without memrec {plain_steps / 10:.1f}/s")
    middle = f"{steps // 2}..{steps // 2}"
    commands = {
        "info": ["info", path],
        "stats": ["stats", path],
        f"stats --steps {middle}": ["stats", path, "--steps", middle],
        "diff (itself)": ["diff", path, path],
        "report --no-screenshot": ["report", path, "-o", f"{out}/long.html", "--no-screenshot"],
        f"export --steps {middle}": ["export", path, "--steps", middle, "-o", f"{out}/long_step.pickle"],
        "whatif allocator": ["whatif", "allocator", path],
    }
    print("| command | wall s | peak RSS MiB |\n|---|---:|---:|")
    for name, args in commands.items():
        wall, rss, _ = timed([memrec, *args])
        print(f"| `{name}` | {wall:.2f} | {rss / 2**20:.0f} |")


if __name__ == "__main__":
    main()
