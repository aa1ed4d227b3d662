#!/usr/bin/env bash
# Configures and builds ina into build/ (binaries in build/bin/). Extra args go to cmake.
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
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@" >build/configure.log 2>&1; then
  cat build/configure.log
  echo "build.sh: configure failed (log: build/configure.log)" >&2
  exit 1
fi
grep -v -E '^-- (The (C|CXX) compiler|Detecting|Check for|Checking for|Looking for|Performing Test|Found|Could NOT find|Executing Verilator|Configuring done|Generating done|Build files have been written)|^\s*$' \
  build/configure.log || true
cmake --build build -j "$(nproc)"
