#!/usr/bin/env python3
"""scripts/bench-compare.py on hand-made Google Benchmark JSON: a slowdown over the threshold fails, one under it and
a speedup pass, medians are taken over repetitions, new and dropped benchmarks are listed, --save merges runs."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "bench-compare.py")


def results(runs, cpus=16):
    return {"context": {"num_cpus": cpus, "mhz_per_cpu": 2000, "library_build_type": "release", "host_name": "h"},
            "benchmarks": runs}


def run(name, ms, unit="ms"):
    return {"name": name, "run_name": name, "run_type": "iteration", "real_time": ms, "cpu_time": ms, "time_unit": unit}


def median(name, ms):
    return {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
            "real_time": ms, "cpu_time": ms, "time_unit": "ms"}


class BenchCompare(unittest.TestCase):
    def compare(self, recorded, new, *extra):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, data in enumerate([recorded] + new):
                paths.append(os.path.join(d, f"{i}.json"))
                with open(paths[-1], "w") as f:
                    json.dump(data, f)
            out = subprocess.run([sys.executable, SCRIPT, *paths, *extra], capture_output=True, text=True)
            return out.returncode, out.stdout

    def test_a_slowdown_over_the_threshold_fails(self):
        rc, out = self.compare(results([run("BM_Read", 100)]), [results([run("BM_Read", 111)])])
        self.assertEqual(rc, 1, out)
        self.assertIn("+11.0%  SLOWER", out)

    def test_small_slowdowns_and_speedups_pass(self):
        rc, out = self.compare(results([run("BM_Read", 100), run("BM_Load", 2000)]),
                               [results([run("BM_Read", 109)]), results([run("BM_Load", 1.5, "s")])])
        self.assertEqual(rc, 0, out)
        self.assertIn("-25.0%", out)

    def test_medians_of_repetitions(self):
        recorded = results([run("BM_Read", 100), run("BM_Read", 300), median("BM_Read", 100)])
        rc, out = self.compare(recorded, [results([run("BM_Read", 120), run("BM_Read", 80), median("BM_Read", 105)])])
        self.assertEqual(rc, 0, out)
        self.assertIn("+5.0%", out)

    def test_new_and_dropped_benchmarks_are_listed(self):
        rc, out = self.compare(results([run("BM_Old", 1)]), [results([run("BM_New", 1)])])
        self.assertEqual(rc, 0, out)
        self.assertIn("(new)", out)
        self.assertIn("(not run now)", out)

    def test_threshold_and_save(self):
        with tempfile.TemporaryDirectory() as d:
            saved = os.path.join(d, "saved.json")
            rc, out = self.compare(results([run("BM_Read", 100)]), [results([run("BM_Read", 104)]), results([run("BM_X", 1)])],
                                   "--threshold", "0.03", "--save", saved)
            self.assertEqual(rc, 1, out)
            with open(saved) as f:
                self.assertEqual([b["name"] for b in json.load(f)["benchmarks"]], ["BM_Read", "BM_X"])

    def test_no_recorded_results_yet(self):
        with tempfile.TemporaryDirectory() as d:
            new = os.path.join(d, "new.json")
            with open(new, "w") as f:
                json.dump(results([run("BM_Read", 1)]), f)
            out = subprocess.run([sys.executable, SCRIPT, os.path.join(d, "none.json"), new], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0)
            self.assertIn("nothing to compare", out.stdout)


if __name__ == "__main__":
    unittest.main()
