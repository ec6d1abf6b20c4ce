#!/usr/bin/env python3
"""bench/paired_cost.py on the H100 host's runs that docs/benchmarks.md quotes (bench/recorded/pair_cost.json,
step12_cost.json: it prints the figures quoted), and on hand-made runs: a repetition is compared with the base's
repetitions next to it in run order (not with the base's median, nor by its place in the file), a mode whose
repetitions all failed is named and fails the run, and a run it cannot use is one error and a non-zero exit."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "bench", "paired_cost.py")
RECORDED = os.path.join(ROOT, "bench", "recorded")


def paired_cost(path, *extra):
    out = subprocess.run([sys.executable, SCRIPT, path, *extra], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


def row(out, label):
    """The printed row of a mode: its columns split on spaces."""
    return next(line.split() for line in out.splitlines() if line.startswith(label + " "))


def rep(name, label, order, t, **extra):
    return {"name": name, "run_name": name, "run_type": "iteration", "order": order, "real_time": t,
            "cpu_time": t, "time_unit": "ns", "label": label, **extra}


def median_row(name, t):
    return {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
            "order": 0, "real_time": t, "cpu_time": t, "time_unit": "ns"}


class PairedCost(unittest.TestCase):
    def run_of(self, runs, *extra):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.json")
            with open(path, "w") as f:
                f.write(runs if isinstance(runs, str) else json.dumps({"benchmarks": runs}))
            return paired_cost(path, "--base", "BM_A/0/", *extra)

    def test_the_recorded_pair_run_gives_the_quoted_costs(self):
        rc, out, err = paired_cost(os.path.join(RECORDED, "pair_cost.json"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(row(out, "none")[1:4], ["40", "1140", "988"])
        self.assertEqual(row(out, "memrec-events")[4:6], ["+67", "+5.89%"])
        self.assertEqual(row(out, "capture=libunwind")[4:6], ["+414", "+36.28%"])

    def test_the_recorded_step_run_gives_the_quoted_cost(self):
        rc, out, err = paired_cost(os.path.join(RECORDED, "step12_cost.json"), "--base", "BM_TransformerStep/0/")
        self.assertEqual(rc, 0, err)
        self.assertIn("(ms)", out)
        self.assertEqual(row(out, "memrec+kernels")[2:6], ["98.86", "98.77", "+0.16", "+0.17%"])

    def test_each_repetition_meets_the_base_runs_next_to_it(self):
        # The machine is slow for runs 4 to 7. Recording costs +10 in every run; the modes' medians are 210 apart,
        # and the file lists the repetitions out of run order.
        runs = [rep("BM_A/5/", "rec", 6, 310), rep("BM_A/0/", "none", 8, 100), rep("BM_A/0/", "none", 1, 100),
                rep("BM_A/0/", "none", 7, 300), rep("BM_A/5/", "rec", 2, 110), rep("BM_A/0/", "none", 4, 300),
                rep("BM_A/5/", "rec", 5, 310), rep("BM_A/0/", "none", 3, 100), median_row("BM_A/5/", 5000)]
        rc, out, err = self.run_of(runs)
        self.assertEqual(rc, 0, err)
        self.assertEqual(row(out, "none")[1:4], ["5", "100", "100"])
        self.assertEqual(row(out, "rec")[1:5], ["3", "310", "110", "+10"])

    def test_a_mode_that_failed_is_named_and_fails_the_run(self):
        runs = [rep("BM_A/0/", "none", 1, 100), rep("BM_A/5/", "rec", 2, 110),
                rep("BM_A/9/", "capture", 3, 0, error_occurred=True, error_message="not available here")]
        rc, out, err = self.run_of(runs)
        self.assertEqual(rc, 1)
        self.assertIn("capture", out)
        self.assertIn("every repetition failed", out)
        self.assertEqual(row(out, "rec")[4], "+10")

    def test_a_run_it_cannot_use_is_one_error(self):
        for bad, why in (('{"benchmarks": [', "cannot use"), ("[1, 2]", "cannot use"),
                         (json.dumps({"benchmarks": [rep("BM_A/0/", "none", 1, 100)] + [
                             {k: v for k, v in rep("BM_A/5/", "rec", 2, 1).items() if k != "order"}]}),
                          "has no order counter"),
                         (json.dumps({"benchmarks": [rep("BM_B/0/", "none", 1, 100)]}), "0 modes named BM_A/0/*")):
            rc, out, err = self.run_of(bad)
            self.assertEqual((rc, out), (1, ""), bad)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(why, err)


if __name__ == "__main__":
    unittest.main()
