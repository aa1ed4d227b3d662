#!/usr/bin/env python3
"""Tests of scripts/device-run.sh (label unit): what it refuses, how its deadline skips steps, and
that the GPU step fails loudly where there is no GPU. Nothing is built or benchmarked."""
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "scripts", "device-run.sh")


def run(args):
    return subprocess.run(["bash", SCRIPT] + args, capture_output=True, text=True, timeout=50)


class DeviceRun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ina-device-run-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def summary(self):
        with open(os.path.join(self.tmp, "out", "summary.md")) as f:
            return f.read()

    def test_unknown_step_is_refused(self):
        r = run(["--steps", "build bogus", "--out", os.path.join(self.tmp, "out")])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("unknown step 'bogus'", r.stderr)

    def test_deps_without_the_configure_script_is_refused(self):
        r = run(["--deps", self.tmp, "--out", os.path.join(self.tmp, "out")])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("has no on-gpu-box.sh", r.stderr)

    def test_bad_deadline_is_refused(self):
        r = run(["--deadline-s", "soon", "--out", os.path.join(self.tmp, "out")])
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_steps_without_time_left_are_skipped_and_noted(self):
        r = run(["--deadline-s", "0", "--steps", "gpu loopback scaling",
                 "--out", os.path.join(self.tmp, "out")])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        s = self.summary()
        for name in ("gpu", "loopback (one box)", "one job on 1/2/4/8 switch cores"):
            self.assertIn(f"## {name}: SKIPPED (0 s left", s)
        self.assertNotIn("## build", s, "a step not asked for ran")
        self.assertNotIn("-1 s left", s, "past the deadline is 0 s left")
        self.assertNotIn("```\n```", s, "a skipped GPU step has no verdict to show")
        self.assertIn("every step that ran exited 0", s)

    @unittest.skipIf(shutil.which("nvidia-smi"), "this machine has nvidia-smi")
    def test_the_gpu_step_fails_loudly_without_a_gpu(self):
        r = run(["--steps", "gpu", "--out", os.path.join(self.tmp, "out")])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        s = self.summary()
        self.assertIn("exit 3", s)
        self.assertIn('"gpu": false', s)
        self.assertIn('"passed": false', s)
        self.assertIn("some step failed", s)


if __name__ == "__main__":
    unittest.main(verbosity=2)
