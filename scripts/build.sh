#!/usr/bin/env bash
# Configures and builds ina into build/ (binaries in build/bin/). Extra args go to cmake.
# One configuration for every caller (the demo, the test command, CI): warnings are errors
# (INA_WERROR) and the RTL coverage model is configured (INA_RTL_COVERAGE; ctest checks its
# floors), so the demo's build is the test command's and nothing is built twice. INA_BUILD_TARGETS
# ("ina-switchd ina-bench"): build only those (the demo); default: everything.
# Configure output goes to build/configure.log; what ina's CMake says about the parts it builds or
# skips (e.g. "verilator not found; skipped") and any CMake warning are printed, CMake's own probe
# chatter is not. A failed configure prints the whole log.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ina-ccache}
# Paths relative to the checkout and no cwd in the hash: a cache filled in one checkout (or
# worktree) serves another at a different path.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
mkdir -p build
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DINA_WERROR=ON \
     -DINA_RTL_COVERAGE=ON "$@" >build/configure.log 2>&1; then
  cat build/configure.log
  echo "build.sh: configure failed (log: build/configure.log)" >&2
  exit 1
fi
grep -v -E '^-- (Caffe2: |The (C|CXX) compiler|Detecting|Check for|Checking for|Looking for|Performing Test|Found|Could NOT find|Executing Verilator|Configuring done|Generating done|Build files have been written)|^\s*$' \
  build/configure.log || true
targets=()
for t in ${INA_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
echo "build.sh: building ${INA_BUILD_TARGETS:-everything} (ninja prints [done/total])"
cmake --build build -j "$(nproc)" "${targets[@]}"
