#!/usr/bin/env python3
"""bench/pair_rounds.py on the H100 host's runs that docs/benchmarks.md quotes (bench/recorded/pair_cost.json,
step12_cost.json: it prints the figures quoted), and on hand-made runs: a mode is compared round by round, not by its
median, and a run it cannot read or a base it cannot find is one error and a non-zero exit."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "bench", "pair_rounds.py")
RECORDED = os.path.join(ROOT, "bench", "recorded")


def pair_rounds(path, *extra):
    out = subprocess.run([sys.executable, SCRIPT, path, *extra], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


def row(out, label):
    """The printed row of a mode: its columns split on spaces."""
    return next(line.split() for line in out.splitlines() if line.startswith(label + " "))


def rep(name, label, index, t):
    return {"name": name, "run_name": name, "run_type": "iteration", "repetition_index": index, "real_time": t,
            "cpu_time": t, "time_unit": "ns", "label": label}


class PairRounds(unittest.TestCase):
    def test_the_recorded_pair_run_gives_the_quoted_costs(self):
        rc, out, err = pair_rounds(os.path.join(RECORDED, "pair_cost.json"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(row(out, "none")[1:4], ["40", "1281", "1182"])
        self.assertEqual(row(out, "memrec-events")[4], "+205")
        self.assertEqual(row(out, "capture=libunwind")[4], "+676")

    def test_the_recorded_step_run_gives_the_quoted_cost(self):
        rc, out, err = pair_rounds(os.path.join(RECORDED, "step12_cost.json"), "--base", "BM_TransformerStep/0/")
        self.assertEqual(rc, 0, err)
        self.assertIn("(ms)", out)
        self.assertEqual(row(out, "memrec+kernels")[2:6], ["98.89", "98.85", "+0.15", "+0.15%"])

    def test_rounds_are_paired(self):
        # The machine is slow in round 1 and the last round is an outlier: the recording costs +10 in two rounds of
        # three, which the median of rounds gives and the modes' medians (+110 apart) do not.
        runs = [rep("BM_A/0/", "none", 0, 100), rep("BM_A/0/", "none", 1, 200), rep("BM_A/0/", "none", 2, 100),
                rep("BM_A/5/", "rec", 0, 110), rep("BM_A/5/", "rec", 1, 210), rep("BM_A/5/", "rec", 2, 310)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.json")
            with open(path, "w") as f:
                json.dump({"benchmarks": runs}, f)
            rc, out, err = pair_rounds(path, "--base", "BM_A/0/")
        self.assertEqual(rc, 0, err)
        self.assertEqual(row(out, "rec")[1:5], ["3", "210", "110", "+10"])

    def test_an_unreadable_run_or_a_missing_base_is_one_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.json")
            with open(path, "w") as f:
                f.write('{"benchmarks": [')
            rc, out, err = pair_rounds(path)
            self.assertEqual((rc, out), (1, ""))
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("cannot read", err)
            with open(path, "w") as f:
                f.write("[1, 2]")
            rc, out, err = pair_rounds(path)
            self.assertEqual((rc, out), (1, ""))
            self.assertIn("cannot read", err)
        rc, out, err = pair_rounds(os.path.join(RECORDED, "pair_cost.json"), "--base", "BM_Nothing/")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("0 modes named BM_Nothing/*", err)


if __name__ == "__main__":
    unittest.main()
