#!/usr/bin/env python3
"""`memrec whatif scale` against measured runs, as Markdown: a program recorded at two batch sizes predicts larger
ones, and at three sequence lengths a longer one; each prediction is compared with a recorded run of that size
(memrec's peaks equal memory_stats()'s requested and reserved peaks: the zoo checks it). Then, where the recording
knows the device's memory, `--fit` names the largest batch and sequence: that size must run, and the next must run
out of memory or come within 2% of the device. Exits 1 when a prediction is off by 5% or more, or a fit fails.

    bench/scale_check.py MEMREC DIR [--train "python3 bench/scale_gpt2.py"] [--batch 2,4:8,12,16 --seq 1024]
                         [--seq-runs 256,512,1024:2048 --seq-batch 2]

The program is run with --batch N --seq T added. On the CPU (no device memory) the fit is left out.
"""
import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

LIMIT = 5.0  # percent
NEAR_DEVICE = 0.98


def sizes(text):
    """"2,4:8,12,16" -> ([2, 4], [8, 12, 16])."""
    runs, _, predict = text.partition(":")
    return [int(s) for s in runs.split(",")], [int(s) for s in predict.split(",") if s]


class Check:
    def __init__(self, memrec, folder, train):
        self.memrec, self.folder, self.train = memrec, Path(folder), shlex.split(train)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.worst, self.failures = 0.0, []

    def record(self, batch, seq):
        """The run's file and exit status (3: out of memory)."""
        path = self.folder / f"b{batch}_s{seq}.memrec"
        argv = [self.memrec, "record", "--force", "-o", str(path), "--", *self.train, "--batch", str(batch),
                "--seq", str(seq)]
        done = subprocess.run(argv, capture_output=True, text=True)
        (self.folder / f"b{batch}_s{seq}.log").write_text(done.stdout + done.stderr)
        return path, done.returncode

    def json(self, *args):
        return json.loads(subprocess.run([self.memrec, *args, "--json"], check=True, capture_output=True, text=True).stdout)

    def peaks(self, path):
        stats = self.json("stats", str(path))
        return stats["peak_allocated"]["bytes"], stats["peak_reserved"]["bytes"]

    def compare(self, what, runs, predict, size_of):
        """Records `runs` and `predict` (sizes), predicts the latter from the former, prints the table rows."""
        files = [self.record(*size_of(n))[0] for n in runs]
        scale = self.json("whatif", "scale", *map(str, files), "--sizes", ",".join(map(str, runs)),
                          "--predict", ",".join(map(str, predict)))
        print(f"\n{what} from {', '.join(map(str, runs))}:\n")
        print("| size | predicted allocated | measured allocated | error | predicted reserved | measured reserved | error |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for p in scale["predictions"]:
            path, status = self.record(*size_of(p["size"]))
            if status:
                self.failures.append(f"{what} {p['size']}: the measured run exited with {status}")
                continue
            allocated, reserved = self.peaks(path)
            row = [p["size"], *self.cells(p["peak_allocated"], allocated), *self.cells(p["peak_reserved"], reserved)]
            print("| " + " | ".join(map(str, row)) + " |")
        if scale["unmatched"]:
            print(f"\nunmatched: {json.dumps(scale['unmatched'])[:2000]}")
        return files, scale

    def cells(self, predicted, measured):
        if predicted is None:
            return ["-", f"{measured:,}", "-"]
        error = 100.0 * (predicted - measured) / measured
        self.worst = max(self.worst, abs(error))
        return [f"{predicted:,}", f"{measured:,}", f"{error:+.2f}%"]

    def fit(self, what, files, runs, size_of):
        """--fit on the recorded device's memory: the largest size must run, the next must not (or nearly fill it)."""
        scale = self.json("whatif", "scale", *map(str, files), "--sizes", ",".join(map(str, runs)), "--fit")
        fit = scale["fit"]
        if fit is None:
            self.failures.append(f"{what}: --fit found no limit: {scale['notes']}")
            return
        largest = fit["largest"]
        _, runs_ok = self.record(*size_of(largest))
        path, status = self.record(*size_of(largest + 1))
        total = scale["device_memory"]["total"] or 0
        _, reserved = self.peaks(path)
        near = total and reserved >= NEAR_DEVICE * total
        print(f"\n{what} --fit: largest {largest} (device memory {fit['device_memory']:,}, margin {fit['margin']:,}); "
              f"{largest} exited {runs_ok}; {largest + 1} exited {status}, reserved {reserved:,} of {total:,}")
        if runs_ok != 0:
            self.failures.append(f"{what} {largest}: --fit's largest did not run (exit {runs_ok})")
        if status != 3 and not near:
            self.failures.append(f"{what} {largest + 1}: ran without running out of memory or nearing the device")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("memrec")
    p.add_argument("dir")
    p.add_argument("--train", default=f"{sys.executable} {Path(__file__).parent / 'scale_gpt2.py'}")
    p.add_argument("--batch", default="2,4:8,12,16", help="batch runs:predicted")
    p.add_argument("--seq", type=int, default=1024, help="the sequence length of the batch runs")
    p.add_argument("--seq-runs", default="256,512,1024:2048", help="sequence runs:predicted")
    p.add_argument("--seq-batch", type=int, default=2, help="the batch of the sequence runs")
    p.add_argument("--no-fit", action="store_true")
    a = p.parse_args()
    check = Check(a.memrec, a.dir, a.train)
    batch_runs, batch_predict = sizes(a.batch)
    seq_runs, seq_predict = sizes(a.seq_runs)
    by_batch = lambda n: (n, a.seq)  # noqa: E731
    by_seq = lambda n: (a.seq_batch, n)  # noqa: E731
    batch_files, batch_scale = check.compare("batch", batch_runs, batch_predict, by_batch)
    seq_files, _ = check.compare("sequence", seq_runs, seq_predict, by_seq)
    if not a.no_fit and batch_scale["device_memory"]["bytes"] is not None:
        check.fit("batch", batch_files, batch_runs, by_batch)
        check.fit("sequence", seq_files, seq_runs, by_seq)
    print(f"\nworst error {check.worst:.2f}% (limit {LIMIT:.0f}%)")
    for f in check.failures:
        print(f"FAILED: {f}")
    return 1 if check.worst >= LIMIT or check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
