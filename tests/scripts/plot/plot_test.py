#!/usr/bin/env python3
"""Tests of scripts/plot/plot.py, the benchmark scripts' plot helper (label unit).

On small fixed JSON inputs (data/, shaped like each script's output): every kind writes a
non-empty PNG; the tables behind the figures carry the references they claim (the scaling lines
N x and 0.7 N x the 1-core rate, the sharing bound and fair share, the pps ceiling); input it
cannot plot fails without leaving a PNG; without gnuplot it says so and succeeds (a benchmark never
fails for a plot). Exits 77 (ctest: skipped) where gnuplot is not installed.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "..", "..", "..", "scripts", "plot", "plot.py")
DATA = os.path.join(HERE, "data")
sys.path.insert(0, os.path.dirname(PLOT))
import plot  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CASES = {
    "testbed": ["testbed.jsonl"],
    "switch-scaling": ["switch-scaling.json", "switch-scaling-one-job.json"],
    "pps": ["pps.json"],
    "sharing": ["sharing.jsonl"],
    "quant": ["quant.json"],
    "rtl": ["rtl.jsonl"],
    "collnet": ["collnet.jsonl"],
    "torch": ["torch.json", "torch-mtu.json"],
    "scale-size": ["scale-size.jsonl"],
    "scale-calib": ["scale-calib.jsonl", "testbed.jsonl"],
}


def run(args, env=None):
    return subprocess.run([sys.executable, PLOT] + args, capture_output=True, text=True, env=env,
                          timeout=60)


def table(d, name):
    with open(os.path.join(d, name)) as f:
        return [[float(c) if c not in ("NaN",) else None for c in line.rstrip("\n").split("\t")]
                for line in f if line.strip()]


class Plot(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ina-plot-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_every_kind_writes_a_png(self):
        for kind, inputs in CASES.items():
            with self.subTest(kind=kind):
                out = os.path.join(self.tmp, kind + ".png")
                r = run([kind, out] + [os.path.join(DATA, i) for i in inputs])
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(out, "rb") as f:
                    head = f.read(8)
                self.assertEqual(head, PNG_MAGIC)
                self.assertGreater(os.path.getsize(out), 5000, "an empty canvas is ~2 KB")

    def test_scaling_references_start_from_one_core(self):
        plot.kind_switch_scaling(self.tmp, [os.path.join(DATA, "switch-scaling.json")], "")
        ref = table(self.tmp, "ref1.tsv")
        one = 900000  # the fixture's 1-core switch_pps
        self.assertEqual([r[0] for r in ref], [1, 2, 4, 8])
        for n, ideal, target in ref:
            self.assertAlmostEqual(ideal, n * one)
            self.assertAlmostEqual(target, 0.7 * n * one)

    def test_sharing_bound_and_fair_share(self):
        plot.kind_sharing(self.tmp, [os.path.join(DATA, "sharing.jsonl")], "")
        # (wire bytes + frames x overhead) x 8 bits at the link rate, for the tensor's bits.
        call_s = (4560000 + 4200 * 24) * 8 / 100e6
        bound = 1048576 * 32 / call_s / 1e6
        segs = table(self.tmp, "seg1.tsv")
        self.assertEqual(len(segs), 2)  # over the job alone, over the 2 jobs' aggregate
        for s in segs:
            self.assertAlmostEqual(s[1], bound, places=6)
        fair = table(self.tmp, "seg2.tsv")
        self.assertEqual(len(fair), 1)
        self.assertAlmostEqual(fair[0][1], bound / 2, places=6)
        bars = table(self.tmp, "bar1.tsv") + table(self.tmp, "bar2.tsv")
        self.assertEqual(len(bars), 4)  # 1 + 2 jobs, and the 2 jobs' aggregate

    def test_pps_ceiling_is_drawn_over_both_bars(self):
        plot.kind_pps(self.tmp, [os.path.join(DATA, "pps.json")], "")
        (seg,) = table(self.tmp, "seg1.tsv")
        self.assertAlmostEqual(seg[1], 7.359805)
        self.assertEqual(len(table(self.tmp, "dots.tsv")), 6)  # 3 rounds each

    def test_testbed_marks_what_did_not_run(self):
        plot.kind_testbed(self.tmp, [os.path.join(DATA, "testbed.jsonl")], "")
        rows = table(self.tmp, "testbed.tsv")
        self.assertEqual(len(rows), 2)
        small, big = rows
        self.assertIsNone(small[4])  # no MPI run at 4Mi floats
        self.assertIsNone(big[5])  # no ina-dpdk at all
        self.assertEqual(big[1:5], [593.0, 543.0, 831.0, 990.0])

    def test_bad_input_fails_without_a_png(self):
        bad = os.path.join(self.tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"elements": 1}\n')
        out = os.path.join(self.tmp, "bad.png")
        r = run(["pps", out, bad])
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot plot", r.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual(run(["no-such-kind", out, bad]).returncode, 2)

    def test_without_gnuplot_it_says_so_and_succeeds(self):
        empty = os.path.join(self.tmp, "bin")
        os.mkdir(empty)
        out = os.path.join(self.tmp, "x.png")
        r = run(["pps", out, os.path.join(DATA, "pps.json")], env={"PATH": empty})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("gnuplot not found", r.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    if not shutil.which("gnuplot"):
        print("SKIP: gnuplot not installed (scripts/setup.sh installs gnuplot-nox)")
        sys.exit(77)
    unittest.main()
