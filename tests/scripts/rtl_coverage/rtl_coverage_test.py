#!/usr/bin/env python3
"""Tests of scripts/rtl_coverage.py, the RTL coverage merge and floor check.

Always (label unit): on synthetic Verilator coverage files, counts are summed across files, kinds
are told apart, --check fails below a floor and with a kind missing, bad input is an error.
With INA_RTL_COVERAGE_OUT=DIR (the ctest rtl_coverage_floor_bites, after rtl_coverage_floor has
run the real tests into DIR): the merged counters pass the floors, and those of the core tests
alone, without the co-simulation, do not: the floor catches a test that stops exercising the core.
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts"))
import rtl_coverage  # noqa: E402


def key(kind, line, name):
    return (f"\x01f\x02/rtl/x.sv\x01l\x02{line}\x01n\x020\x01page\x02v_{kind}/x"
            f"\x01o\x02{name}\x01h\x02TOP.x")


def dat(path, points):
    """Writes a coverage file of (kind, line, name, count) points."""
    with open(path, "w", encoding="latin-1") as fh:
        fh.write("# SystemC::Coverage-3\n")
        for kind, line, name, count in points:
            fh.write(f"C '{key(kind, line, name)}' {count}\n")
    return path


def run(argv):
    """rtl_coverage.main(argv): (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = rtl_coverage.main(argv)
    return rc, out.getvalue(), err.getvalue()


class MergeAndCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.floors = dict(rtl_coverage.FLOORS)
        rtl_coverage.FLOORS.update({"line": 50.0, "toggle": 50.0})

    def tearDown(self):
        rtl_coverage.FLOORS.clear()
        rtl_coverage.FLOORS.update(self.floors)
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def test_counts_sum_across_files_and_kinds_are_apart(self):
        # Each file hits half of the toggle points; together they hit all of them.
        a = dat(self.path("a.dat"), [("line", 1, "block", 3), ("branch", 2, "if", 0),
                                     ("toggle", 3, "s[0]", 1), ("toggle", 3, "s[1]", 0)])
        b = dat(self.path("b.dat"), [("line", 1, "block", 2), ("branch", 2, "if", 0),
                                     ("toggle", 3, "s[0]", 0), ("toggle", 3, "s[1]", 4)])
        counts = {}
        rtl_coverage.read_dat(a, counts)
        rtl_coverage.read_dat(b, counts)
        self.assertEqual(counts[key("line", 1, "block")], 5)
        self.assertEqual(counts[key("toggle", 3, "s[1]")], 4)
        s = rtl_coverage.summarize(counts)
        self.assertEqual(s["line"], (1, 2))  # branch points count as line points
        self.assertEqual(s["toggle"], (2, 2))
        rc, out, _ = run(["--dat", a, b, "--out", self.d, "--check"])
        self.assertEqual(rc, 0, out)
        self.assertIn("line          1 /      2 =  50.0 %", out)
        self.assertIn("toggle        2 /      2 = 100.0 %", out)
        self.assertIn("without a.dat: line 50.0 %, toggle 50.0 %", out)
        merged = {}
        rtl_coverage.read_dat(self.path("merged.dat"), merged)
        self.assertEqual(merged, counts)

    def test_check_fails_below_a_floor(self):
        a = dat(self.path("a.dat"), [("line", 1, "block", 1), ("toggle", 2, "s[0]", 1),
                                     ("toggle", 2, "s[1]", 0), ("toggle", 2, "s[2]", 0)])
        rc, _, err = run(["--dat", a, "--out", self.d, "--check"])
        self.assertEqual(rc, 1)
        self.assertIn("toggle coverage 33.3 % is below its floor 50.0 %", err)
        self.assertNotIn("line coverage", err)
        rc, _, _ = run(["--dat", a, "--out", self.d])  # figures only: no check
        self.assertEqual(rc, 0)

    def test_check_fails_without_a_kind(self):
        # A model built without toggle coverage must not pass for lack of toggle points.
        a = dat(self.path("a.dat"), [("line", 1, "block", 1)])
        rc, _, err = run(["--dat", a, "--out", self.d, "--check"])
        self.assertEqual(rc, 1)
        self.assertIn("no toggle coverage points", err)

    def test_bad_input_is_an_error(self):
        with open(self.path("x.dat"), "w") as fh:
            fh.write("not coverage\n")
        rc, _, err = run(["--dat", self.path("x.dat"), "--out", self.d, "--check"])
        self.assertEqual(rc, 2)
        self.assertIn("not a Verilator coverage file", err)
        rc, _, err = run(["--bin", self.d, "--out", self.d, "--tests", "nope_cov_test"])
        self.assertEqual(rc, 2)
        self.assertIn("nope_cov_test missing", err)

    def test_real_floors_are_stated(self):
        self.assertEqual(sorted(self.floors), ["line", "toggle"])
        for v in self.floors.values():
            self.assertGreater(v, 0.0)


@unittest.skipUnless(os.environ.get("INA_RTL_COVERAGE_OUT"),
                     "needs INA_RTL_COVERAGE_OUT (the ctest rtl_coverage_floor_bites)")
class FloorBites(unittest.TestCase):
    def test_core_tests_alone_fail_and_all_pass(self):
        out = os.environ["INA_RTL_COVERAGE_OUT"]
        core = os.path.join(out, "rtl_core_cov_test.dat")
        cosim = os.path.join(out, "sim_cosim_cov_test.dat")
        with tempfile.TemporaryDirectory() as d:
            rc, o, err = run(["--dat", core, cosim, "--out", d, "--check"])
            self.assertEqual(rc, 0, o + err)
            rc, o, err = run(["--dat", core, "--out", d, "--check"])
            self.assertEqual(rc, 1, o + err)
            self.assertIn("toggle coverage", err)


if __name__ == "__main__":
    unittest.main()
