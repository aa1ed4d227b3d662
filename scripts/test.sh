#!/usr/bin/env bash
# Installs what is missing, checks C++ formatting, builds with warnings as errors (INA_WERROR), and
# runs the whole test suite with ctest. Extra args go to ctest (e.g. -L unit, -R Engine).
# Without extra args (CI) it then runs scripts/sanitize.sh: the unit, prop, fuzz-replay and
# loopback e2e tests under ASan + UBSan, the communicator and switch tests under TSan, each in its
# own build dir (build-asan, build-tsan). INA_SANITIZE=0 skips that step.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-format.sh   # C++ formatting is part of CI
# INA_RTL_COVERAGE: the RTL coverage model too, so that ctest checks the coverage floors
# (rtl_coverage_floor, docs/rtl/coverage.md; about 4 minutes of the build and 1 of the tests).
scripts/build.sh -DINA_WERROR=ON -DINA_RTL_COVERAGE=ON
(cd build && ctest --output-on-failure -j "$(nproc)" "$@")
if [ $# -eq 0 ] && [ "${INA_SANITIZE:-1}" != 0 ]; then
  scripts/sanitize.sh
fi
