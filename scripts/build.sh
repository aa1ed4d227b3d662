#!/usr/bin/env bash
# Configures and builds ina into build/ (binaries in build/bin/). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ina-ccache}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@" >/dev/null
cmake --build build -j "$(nproc)"
