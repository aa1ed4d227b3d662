#!/usr/bin/env python3
"""Line and toggle coverage of the RTL core over its tests (docs/rtl/coverage.md).

Runs the RTL tests built over the coverage model (CMake -DINA_RTL_COVERAGE=ON: rtl_core_cov_test,
sim_cosim_cov_test; fixed seeds, INA_SEED is cleared), each with INA_RTL_COVERAGE_DIR=OUT/<test>,
where every model writes its counters when it ends (core-<pid>-<n>.dat). Merges them (counts summed
per coverage point, as verilator_coverage does) into OUT/<test>.dat and all into OUT/merged.dat
(for `verilator_coverage --annotate`), and prints per kind the points hit at least once out of all,
then the figures without each test. Kinds: line (Verilator's line and branch points: blocks of
statements and the arms of each if/case) and toggle (one point per bit of each signal up to
--coverage-max-width bits, hit once the bit changed).

--dat FILE...: merge these files instead of running the tests. --check: exit 1 when a kind is
below its floor (FLOORS) or has no points at all. --annotate DIR: verilator_coverage's annotated
sources of the merged counters (lines with a '%' were never hit). Standard library only.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

# Floors in percent, checked by --check (CI: the ctest rtl_coverage_floor). Several points below
# the figures measured (docs/rtl/coverage.md): a small RTL change or a new test does not trip them,
# a test that stops exercising the core does.
FLOORS = {"line": 92.0, "toggle": 58.0}

# The tests built over the coverage model, in the order they run.
TESTS = ["rtl_core_cov_test", "sim_cosim_cov_test"]

_POINT_RE = re.compile(r"^C '(.*)' (\d+)$")
_PAGE_RE = re.compile("\x01page\x02v_([a-z]+)")


def kind(key):
    """The coverage kind of a point from its key's page field (v_line/..., v_toggle/...)."""
    m = _PAGE_RE.search(key)
    k = m.group(1) if m else "other"
    return "line" if k in ("line", "branch") else k


def read_dat(path, counts):
    """Adds the points of one Verilator coverage file to counts (key -> summed count)."""
    with open(path, encoding="latin-1") as fh:
        first = fh.readline()
        if not first.startswith("# SystemC::Coverage"):
            raise ValueError(f"{path}: not a Verilator coverage file")
        for line in fh:
            m = _POINT_RE.match(line.rstrip("\n"))
            if m:
                counts[m.group(1)] = counts.get(m.group(1), 0) + int(m.group(2))


def write_dat(path, counts):
    with open(path, "w", encoding="latin-1") as fh:
        fh.write("# SystemC::Coverage-3\n")
        for k, v in counts.items():
            fh.write(f"C '{k}' {v}\n")


def summarize(counts):
    """kind -> (points hit, points)."""
    total, hit = {}, {}
    for k, v in counts.items():
        c = kind(k)
        total[c] = total.get(c, 0) + 1
        hit[c] = hit.get(c, 0) + (1 if v > 0 else 0)
    return {c: (hit[c], total[c]) for c in total}


def check(summary, floors):
    """The failures of summary against floors (kind -> percent), as messages."""
    failures = []
    for c, floor in floors.items():
        if c not in summary or summary[c][1] == 0:
            failures.append(f"no {c} coverage points (was the model built with --coverage?)")
            continue
        h, t = summary[c]
        pct = 100.0 * h / t
        if pct < floor:
            failures.append(f"{c} coverage {pct:.1f} % is below its floor {floor:.1f} %")
    return failures


def run_tests(bin_dir, out, tests):
    """Runs each coverage test with its models' counters going to out/<test>/, merges them into
    out/<test>.dat and removes the per-model files (one per model adds up to tens of MB). Returns
    the merged files, and how many models wrote counters."""
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ)
    env.pop("INA_SEED", None)  # the fixed seeds CI runs
    merged, models = [], 0
    for t in tests:
        exe = os.path.join(bin_dir, t)
        if not os.path.exists(exe):
            raise FileNotFoundError(f"{exe} missing (configure with -DINA_RTL_COVERAGE=ON)")
        d = os.path.join(out, t)
        os.makedirs(d, exist_ok=True)
        for f in glob.glob(os.path.join(d, "*.dat")):
            os.remove(f)
        env["INA_RTL_COVERAGE_DIR"] = os.path.abspath(d)
        r = subprocess.run([exe, "--gtest_brief=1"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stdout.write(r.stdout)
            raise RuntimeError(f"{t} failed (exit {r.returncode})")
        files = glob.glob(os.path.join(d, "core-*.dat"))
        if not files:
            raise RuntimeError(f"{t} wrote no counters (is it linked with ina_sim_cov?)")
        counts = {}
        for f in files:
            read_dat(f, counts)
            os.remove(f)
        models += len(files)
        merged.append(os.path.join(out, t + ".dat"))
        write_dat(merged[-1], counts)
    return merged, models


def line_of(summary, floors):
    parts = []
    for c in sorted(summary):
        h, t = summary[c]
        floor = floors.get(c)
        note = f"  (floor {floor:.1f} %)" if floor is not None else ""
        parts.append(f"  {c:8s} {h:6d} / {t:6d} = {100.0 * h / t:5.1f} %{note}")
    return parts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin", help="folder of the *_cov_test binaries")
    ap.add_argument("--out", default="build/rtl-coverage", help="folder for the counters")
    ap.add_argument("--tests", default=",".join(TESTS),
                    help="comma-separated tests to run (default: %(default)s)")
    ap.add_argument("--dat", nargs="+", metavar="FILE", help="merge these instead of running")
    ap.add_argument("--check", action="store_true", help="exit 1 below the floors")
    ap.add_argument("--annotate", metavar="DIR", help="write annotated sources to DIR")
    a = ap.parse_args(argv)

    try:
        if a.dat:
            files, models = a.dat, None
        else:
            files, models = run_tests(a.bin, a.out, [t for t in a.tests.split(",") if t])
        per_file = []
        for f in files:
            c = {}
            read_dat(f, c)
            per_file.append(c)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"rtl_coverage: {e}", file=sys.stderr)
        return 2
    counts = {}
    for c in per_file:
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
    os.makedirs(a.out, exist_ok=True)
    merged = os.path.join(a.out, "merged.dat")
    write_dat(merged, counts)

    summary = summarize(counts)
    of_models = f" ({models} models)" if models is not None else ""
    print(f"rtl_coverage: {len(files)} files{of_models}, {len(counts)} points, "
          f"merged into {merged}")
    print("\n".join(line_of(summary, FLOORS)))
    # What each input adds: the figures without it (a test whose loss passes the floors adds
    # little that the others do not cover).
    if len(files) > 1:
        for i, f in enumerate(files):
            rest = {}
            for j, c in enumerate(per_file):
                if j != i:
                    for k, v in c.items():
                        rest[k] = rest.get(k, 0) + v
            s = summarize(rest)
            figs = ", ".join(f"{c} {100.0 * s[c][0] / s[c][1]:.1f} %" for c in sorted(s))
            print(f"  without {os.path.basename(f)}: {figs}")
    if a.annotate:
        r = subprocess.run(["verilator_coverage", "--annotate", a.annotate, "--annotate-min", "1",
                            merged], stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            print("rtl_coverage: verilator_coverage --annotate failed", file=sys.stderr)
            return 2
        print(f"rtl_coverage: annotated sources in {a.annotate} (lines never hit start with %)")
    if a.check:
        failures = check(summary, FLOORS)
        for f in failures:
            print(f"rtl_coverage: FAIL: {f}", file=sys.stderr)
        if failures:
            return 1
        print("rtl_coverage: every kind at or above its floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
