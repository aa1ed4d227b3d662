#!/usr/bin/env bash
# Runs one libFuzzer target (docs/fuzzing.md) for SECONDS, built with the `fuzz` preset (clang,
# -fsanitize=fuzzer,address,undefined) in build-fuzz/.
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   scripts/fuzz.sh --list
# The committed corpus seeds the run; new inputs go to build-fuzz/corpus/TARGET (not committed).
# A crash leaves its input in build-fuzz/crashes/TARGET/ and exits non-zero. To refresh the
# committed corpus after a run (minimized, a few dozen files):
#   scripts/fuzz.sh TARGET 0 --merge
# Other env: JOBS (build parallelism, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A CORPUS=(
  [host_result_fuzzer]=tests/host/comm/fuzz/corpus
  [host_join_fuzzer]=tests/host/comm/fuzz/join_corpus
  [dp_switch_fuzzer]=tests/dataplane/control/fuzz/corpus
  [switchd_leaf_fuzzer]=tests/dataplane/switchd/fuzz/corpus
  [dp_differential_fuzzer]=tests/dataplane/fuzz/corpus
  [proto_roce_fuzzer]=tests/proto/fuzz/corpus
  [net_roce_rx_fuzzer]=tests/net/roce/fuzz/corpus
)
if [ "${1:-}" = --list ] || [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [--merge | libFuzzer flags...]; targets:"
  printf '  %s\n' "${!CORPUS[@]}" | sort
  [ "${1:-}" = --list ]
  exit
fi
target=$1
seconds=$2
shift 2
committed=${CORPUS[$target]:-}
if [ -z "$committed" ]; then
  echo "fuzz.sh: unknown target $target (scripts/fuzz.sh --list)" >&2
  exit 2
fi

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ina-ccache}
# Paths relative to the checkout and no cwd in the hash: a cache filled in one checkout (or
# worktree) serves another at a different path.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [ ! -f build-fuzz/build.ninja ]; then
  mkdir -p build-fuzz
  if ! cmake --preset fuzz >build-fuzz/configure.log 2>&1; then
    cat build-fuzz/configure.log
    echo "fuzz.sh: configure failed" >&2
    exit 1
  fi
fi
cmake --build build-fuzz -j "${JOBS:-$(nproc)}" --target "$target"
bin=build-fuzz/bin/$target
work=build-fuzz/corpus/$target
crashes=build-fuzz/crashes/$target
mkdir -p "$work" "$crashes" "$committed"

if [ "${1:-}" = --merge ]; then
  # Minimize the committed corpus plus what runs found into the committed directory: the fewest
  # files that keep every coverage edge (-use_counters=0: edges, not hit counts, so a few dozen
  # files rather than hundreds).
  tmp=$(mktemp -d)
  "$bin" -merge=1 -use_counters=0 "$tmp" "$committed" "$work" 2>&1 | tail -1
  rm -f "$committed"/*
  cp "$tmp"/* "$committed"/
  rm -rf "$tmp"
  echo "fuzz.sh: $committed now has $(ls "$committed" | wc -l) files"
  exit 0
fi

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
"$bin" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$crashes/" \
  -timeout=10 -rss_limit_mb=2048 "$@" "$work" "$committed"
