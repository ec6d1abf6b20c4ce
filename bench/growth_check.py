"""`memrec growth` against a real run out of memory (scripts/gpu-check.sh, section growth).

python3 bench/growth_check.py MEMREC WORKDIR [RESULTS.json]

Records bench/growth_gpt2.py (Hugging Face GPT-2, random weights, on CUDA) for 30 steps with its history list and
without it, runs `memrec growth --json` on both (the first must grow, named at the history's line, the second be
steady), then picks a memory fraction that the leaking program fills about 100 steps in, runs it plain under
torch.cuda.set_per_process_memory_fraction until it runs out, and compares the step that ran out with the step
`memrec growth --device-memory` predicts from the 30 recorded steps (within 2%). Exits 1 when a check fails.
"""
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "growth_gpt2.py")
RECORDED_STEPS = 30
TARGET_STEP = 100


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def record(memrec, path, history):
    cmd = [memrec, "record", "--force", "-o", path, "--", sys.executable, PROGRAM, "--steps", str(RECORDED_STEPS)]
    out = run(cmd + (["--history"] if history else []))
    peaks = {int(s): int(b) for _, s, b in (l.split() for l in out.splitlines() if l.startswith("peak "))}
    kept = next(int(l.split()[1]) for l in out.splitlines() if l.startswith("kept "))
    return peaks, kept


def growth(memrec, path, *flags):
    return json.loads(run([memrec, "growth", "--json", path, *flags]))


def history_line():
    with open(PROGRAM) as f:
        return next(n for n, line in enumerate(f, 1) if "# the leak" in line)


def main():
    memrec, work = sys.argv[1], sys.argv[2]
    results_path = sys.argv[3] if len(sys.argv) > 3 else os.path.join(work, "growth.json")
    os.makedirs(work, exist_ok=True)
    leaky, plain = os.path.join(work, "history.memrec"), os.path.join(work, "plain.memrec")
    peaks, kept = record(memrec, leaky, True)
    record(memrec, plain, False)
    grows, steady = growth(memrec, leaky), growth(memrec, plain)
    site = f"growth_gpt2.py:{history_line()})"
    named = [g for g in grows["growing"] if site in g["site"]]
    print(run([memrec, "growth", leaky]))

    # A limit that the program's peak passes about TARGET_STEP steps in, halfway between two steps' peaks.
    total = torch.cuda.get_device_properties(0).total_memory
    last = max(peaks)
    limit = peaks[last] + (TARGET_STEP - last - 0.5) * kept
    fraction = limit / total
    out = run([sys.executable, PROGRAM, "--steps", str(10 * TARGET_STEP), "--history", "--fraction", str(fraction)])
    oom = [int(l.split()[-1]) for l in out.splitlines() if l.startswith("oom at step")]
    predicted = growth(memrec, leaky, "--device-memory", str(int(fraction * total)))

    checks = {
        "history grows": grows["verdict"] == "grows",
        "history named at its line": bool(named),
        "history bytes a step within 5%": bool(named) and abs(sum(g["bytes_per_step"] for g in named) - kept) <= 0.05 * kept,
        "no history: steady": steady["verdict"] == "steady" and not steady["growing"],
        "ran out of memory": bool(oom),
        "predicted within 2%": bool(oom) and predicted["projected_full_step"] is not None and
                               abs(predicted["projected_full_step"] - oom[0]) <= 0.02 * oom[0],
    }
    results = {"kept_per_step": kept, "recorded_peaks": peaks, "total_memory": total, "fraction": fraction,
               "oom_step": oom[0] if oom else None, "predicted_step": predicted["projected_full_step"],
               "predicted_in_s": predicted["projected_full_in_s"], "history": grows, "plain": steady,
               "checks": checks}
    with open(results_path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"kept a step {kept} B; per_step allocated {grows['per_step']['allocated']} B; growing {len(grows['growing'])}"
          f" groups, at the history's line {[g['bytes_per_step'] for g in named]}")
    print(f"fraction {fraction:.4f} of {total} B: ran out at step {oom[0] if oom else None}, "
          f"memrec growth predicted step {predicted['projected_full_step']}")
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
