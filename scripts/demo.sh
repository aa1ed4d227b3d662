#!/usr/bin/env bash
# The main job: installs what is missing, builds, then runs ina-switchd and 4 worker processes
# all-reducing a synthetic gradient set (4M floats) a few times on loopback, with 0.1% packet
# loss injected at the switch, verifies the result on every worker and compares with Gloo's ring all-reduce.
#   scripts/demo.sh [--dataplane sw|rtl] [extra ina-bench flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/bin/ina-bench --workers 4 --elements 4194304 --iters 5 --drop-rate 0.001 "$@"
