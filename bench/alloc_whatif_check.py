#!/usr/bin/env python3
"""The allocator model against measured runs: for each setting bench/alloc_conf_runs.sh ran, the reserved peak
`memrec whatif allocator` predicts from the default run's recording (DIR/default.memrec) against the plain run's
measured memory_stats() (DIR/NAME.log), as a Markdown table. Exits 1 when a prediction is off by 5% or more.
    bench/alloc_whatif_check.py MEMREC DIR"""
import json
import re
import subprocess
import sys
from pathlib import Path


def measured(log):
    match = re.search(r"memory_stats (\{.*\})", log.read_text())
    if not match:
        sys.exit(f"{log}: no memory_stats line")
    return json.loads(match.group(1))


def main():
    memrec, folder = sys.argv[1], Path(sys.argv[2])
    recording = folder / "default.memrec"
    rows, worst = [], 0.0
    for conf_file in sorted(folder.glob("*.conf"), key=lambda p: (p.stem != "default", p.stem)):
        conf = conf_file.read_text().strip()
        stats = measured(folder / f"{conf_file.stem}.log")
        out = subprocess.run([memrec, "whatif", "allocator", str(recording), "--alloc-conf", conf, "--json"],
                             check=True, capture_output=True, text=True).stdout
        predicted = json.loads(out)
        want, got = stats["reserved_bytes.all.peak"], predicted["predicted_reserved_peak"]
        error = 100.0 * (got - want) / want
        worst = max(worst, abs(error))
        rows.append(f"| `{conf or '(default)'}` | {got / 2**30:.3f} | {want / 2**30:.3f} | {error:+.2f}% "
                    f"| {predicted['predicted_allocated_peak'] / 2**30:.3f} | {stats['allocated_bytes.all.peak'] / 2**30:.3f} |")
    if not rows:
        sys.exit(f"{folder}: no NAME.conf files (bench/alloc_conf_runs.sh writes them)")
    print("| setting | predicted reserved (GiB) | measured reserved (GiB) | error | predicted allocated (GiB) "
          "| measured allocated (GiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"worst error {worst:.2f}% (limit 5%)")
    return 1 if worst >= 5.0 else 0


if __name__ == "__main__":
    sys.exit(main())
