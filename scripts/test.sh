#!/usr/bin/env bash
# Installs what is missing, checks C++ formatting, builds (scripts/build.sh: the demo's
# configuration, warnings as errors), and runs the whole test suite with ctest. Extra args go to
# ctest (e.g. -L unit, -R Engine). The sanitizer builds are CI's (.ci/run) and
# scripts/sanitize.sh's, not this command's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-format.sh   # C++ formatting is part of CI
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)" "$@")
