#!/usr/bin/env bash
# Installs what is missing, checks C++ formatting, builds with warnings as errors (INA_WERROR), and
# runs the whole test suite with ctest. Extra args go to ctest (e.g. -L unit, -R Engine).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-format.sh   # C++ formatting is part of CI
scripts/build.sh -DINA_WERROR=ON
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
