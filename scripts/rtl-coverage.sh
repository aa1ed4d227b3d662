#!/usr/bin/env bash
# Line and toggle coverage of the RTL core (docs/rtl/coverage.md): turns on INA_RTL_COVERAGE in the
# build dir (BUILD_DIR, default build/: a `verilator --coverage` model of ina_core and the RTL
# tests over it), builds those, then scripts/rtl_coverage.py runs the tests, merges their counters
# into BUILD_DIR/rtl-coverage/merged.dat and prints the figures. Extra args go to rtl_coverage.py:
#   --check          exit 1 below the floors (CI checks them as the ctest rtl_coverage_floor)
#   --annotate DIR   annotated sources (verilator_coverage), uncovered lines marked '%'
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ina-ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
mkdir -p "$B"
args=(-DINA_RTL_COVERAGE=ON)
# A new build dir gets build.sh's generator and build type; an existing one keeps its own.
[ -f "$B/CMakeCache.txt" ] || args+=(-G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}")
if ! cmake -S . -B "$B" "${args[@]}" >"$B/configure-coverage.log" 2>&1; then
  cat "$B/configure-coverage.log"
  exit 1
fi
cmake --build "$B" -j "$(nproc)" --target rtl_core_cov_test sim_cosim_cov_test
python3 scripts/rtl_coverage.py --bin "$B/bin" --out "$B/rtl-coverage" "$@"
