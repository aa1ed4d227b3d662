#!/usr/bin/env bash
# The #21 figures that need a 16-core machine (the GPU box: see shared/probes/offline-gpu-box for
# carrying a build there), in one prepared run that writes its summary as it goes, so a run cut
# short by the machine's time limit still leaves what it measured:
#   1. testbed:  scripts/testbed.sh --mtu 9000 --systems ina,gloo at --workers 4 and 8, --rate 1gbit
#                and 10gbit, each with --switch-cores for every N of --cores-list (default "4 8";
#                1 is the job on one switch core), --sizes 16777216;
#   2. scaling:  ONE_JOB=1 scripts/bench-switch-scaling.sh (one job on 1/2/4/8 switch cores; the
#                0.7 N target), over UDP and then over DPDK memif (IO=dpdk: a queue per core);
#   3. loopback: ina-bench --k 2048 --elements 16777216 at --workers 4 and 8 against Gloo's ring
#                (one box), on one switch core and on every other N of --cores-list;
#   4. tree:     two-level aggregation on loopback (docs/hierarchy.md, "A leaf on every core"): a
#                spine and 2 leaves, each ina-switchd on 1 and on every other N of --cores-list
#                cores (leaf core c under spine core c), the workers half on each leaf with lanes
#                on N switch cores; beside each, the same workers on one flat switch of N cores.
#                Not in the default phases (3 switches and the workers oversubscribe 16 CPUs
#                sooner; device-run.sh runs it last).
#
#   scripts/bench-16core.sh [--quick] [--build-dir DIR] [--out DIR] [--phases "testbed scaling
#                           loopback tree"] [--cores-list "4 8"] [--workers-list "4 8"]
#                           [--rates "1gbit 10gbit"] [--size N] [--iters I] [--phase-timeout-s S]
#                           [--build] [--deps DIR]
#
# --quick: the same phases at sizes that run end to end on a 2-core machine in a few minutes
# (2 workers, 1gbit, cores "1 2", 256K floats, 2 iterations; the figures then mean nothing; it
# checks the script). --build: cmake --build DIR for the binaries the phases use first (the tree
# configured already, or after --deps DIR, which sources shared/probes/offline-gpu-box/
# on-gpu-box.sh DIR DIR_BUILD to configure against the carried packages).
# Each phase and each run has a time limit (--phase-timeout-s, default 900 s per run): a run that
# hangs is killed and noted, the rest go on.
# Output in --out (default bench-16core-out/): summary.md (appended after every run: the command,
# its exit status, the figures: testbed's summary.tsv rows, the scaling JSON, ina-bench's JSON line),
# and per run its own folder or log. Needs root for the testbed (network namespaces) as testbed.sh.
# Exit status: 0 when every run exited 0, 1 otherwise, 2 on bad usage.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$ROOT/build
OUT=bench-16core-out
PHASES="testbed scaling loopback"
CORES_LIST="4 8"
WORKERS_LIST="4 8"
RATES="1gbit 10gbit"
SIZE=16777216
ITERS=5
RUN_TIMEOUT_S=900
QUICK=0
DO_BUILD=0
DEPS=""
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) QUICK=1; shift ;;
    --build-dir) BUILD_DIR=$(cd "$2" 2>/dev/null && pwd || echo "$2"); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --phases) PHASES=$2; shift 2 ;;
    --cores-list) CORES_LIST=$2; shift 2 ;;
    --workers-list) WORKERS_LIST=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --phase-timeout-s) RUN_TIMEOUT_S=$2; shift 2 ;;
    --build) DO_BUILD=1; shift ;;
    --deps) DEPS=$2; DO_BUILD=1; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-16core: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $QUICK == 1 ]]; then
  CORES_LIST="1 2" WORKERS_LIST=2 RATES=1gbit SIZE=262144 ITERS=2
fi
for p in $PHASES; do
  case $p in testbed|scaling|loopback|tree) ;; *) echo "bench-16core: unknown phase '$p'" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUM=$OUT/summary.md
FAILED=0

note() { printf '%s\n' "$@" | tee -a "$SUM"; }
# run NAME LOG CMD...: runs CMD under the time limit with its output in LOG; notes the outcome.
run() {
  local name=$1 log=$2; shift 2
  local t0 rc
  t0=$(date +%s)
  note "" "### $name" "" "\`$*\`" ""
  timeout --kill-after=20 "$RUN_TIMEOUT_S" "$@" >"$log" 2>&1
  rc=$?
  if [[ $rc == 124 || $rc == 137 ]]; then
    note "**timed out** after ${RUN_TIMEOUT_S} s (log: $log)"
  else
    note "exit $rc in $(( $(date +%s) - t0 )) s (log: $log)"
  fi
  [[ $rc == 0 ]] || FAILED=1
  return $rc
}

# 1 and then every other count of --cores-list.
with_one_core() { echo "1 $(echo "$CORES_LIST" | tr ' ' '\n' | grep -vx 1 | tr '\n' ' ')"; }

# ina-bench's JSON line and timing lines from LOG, into the summary.
summarize() {
  { echo '```'; grep -E 'ina:|gloo:' "$1" | tail -3
    grep '^{' "$1" | tail -1 | sed 's/, "switch_counters".*/}/'
    echo '```'; } >>"$SUM"
}

# tree_run W C: a spine and 2 leaves, each ina-switchd on C cores (--core-ports 1 above 1), W
# workers (ranks 0 .. W/2-1 on leaf 0, the rest on leaf 1, as docs/hierarchy.md assigns them),
# then the same workers on one flat switch of C cores. Loopback ports from a base of this
# script's pid, 20 apart per switch (C <= 16).
tree_run() {
  local w=$1 c=$2 base=$((20000 + ($$ % 400) * 100)) cp=() pids=() list="" r i args
  ((c > 1)) && cp=(--cores "$c" --core-ports 1)
  "$BUILD_DIR/bin/ina-switchd" --port "$base" "${cp[@]}" >"$OUT/tree-w$w-c$c-spine.log" 2>&1 &
  pids+=($!)
  for i in 0 1; do
    "$BUILD_DIR/bin/ina-switchd" --port $((base + 20 + 20 * i)) "${cp[@]}" \
      --upstream "127.0.0.1:$base" --leaf-index "$i" --leaves 2 \
      >"$OUT/tree-w$w-c$c-leaf$i.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 50); do
    [[ $(cat "$OUT"/tree-w$w-c$c-*.log 2>/dev/null | grep -c 'listening on') -ge 3 ]] && break
    sleep 0.1
  done
  for ((r = 0; r < w; r++)); do
    list+="${list:+,}127.0.0.1:$((base + 20 + 20 * (r >= w / 2)))"
  done
  args=(--workers "$w" --elements "$SIZE" --iters "$ITERS" --k 2048 --no-gloo
        --switch "127.0.0.1:$((base + 20))" --worker-switch "$list")
  ((c > 1)) && args+=(--switch-cores "$c")
  run "tree: $w workers, spine and 2 leaves on $c cores each" "$OUT/tree-w$w-c$c.log" \
    "$BUILD_DIR/bin/ina-bench" "${args[@]}"
  summarize "$OUT/tree-w$w-c$c.log"
  kill -INT "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  args=(--workers "$w" --elements "$SIZE" --iters "$ITERS" --k 2048 --no-gloo)
  ((c > 1)) && args+=(--switch-cores "$c")
  run "flat beside it: $w workers, one switch on $c cores" "$OUT/tree-flat-w$w-c$c.log" \
    "$BUILD_DIR/bin/ina-bench" "${args[@]}"
  summarize "$OUT/tree-flat-w$w-c$c.log"
}

cd "$ROOT" || exit 2
note "# #21 16-core figures, $(date -u +%Y-%m-%dT%H:%MZ)" ""
note "- host: $(nproc) CPUs, $(uname -r); build: $BUILD_DIR; commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
note "- phases: $PHASES; workers: $WORKERS_LIST; rates: $RATES; switch cores: $CORES_LIST; size $SIZE floats, $ITERS iterations$([[ $QUICK == 1 ]] && echo ' (--quick)')"

if [[ $DO_BUILD == 1 ]]; then
  if [[ -n $DEPS ]]; then
    # shellcheck disable=SC1091
    . "$ROOT/../shared/probes/offline-gpu-box/on-gpu-box.sh" "$DEPS" "$BUILD_DIR" >"$OUT/configure.log" 2>&1 ||
      . "$ROOT/shared/probes/offline-gpu-box/on-gpu-box.sh" "$DEPS" "$BUILD_DIR" >"$OUT/configure.log" 2>&1 ||
      { note "configure with --deps $DEPS failed (log: $OUT/configure.log)"; exit 1; }
  fi
  run build "$OUT/build.log" cmake --build "$BUILD_DIR" -j "$(nproc)" --target ina-switchd ina-bench \
    ina-dpdk-worker || { note "build failed: nothing measured"; exit 1; }
fi
for b in ina-switchd ina-bench ina-dpdk-worker; do
  [[ -x $BUILD_DIR/bin/$b ]] || { note "missing $BUILD_DIR/bin/$b (--build, or build it)"; exit 2; }
done

for phase in $PHASES; do
  case $phase in
    testbed)
      note "" "## testbed: --mtu 9000, ina vs Gloo's ring"
      for w in $WORKERS_LIST; do
        for rate in $RATES; do
          for c in $CORES_LIST; do
            d=$OUT/testbed-w$w-$rate-c$c
            run "testbed $w workers $rate switch cores $c" "$d.log" \
              scripts/testbed.sh --workers "$w" --rate "$rate" --mtu 9000 --sizes "$SIZE" \
              --iters "$ITERS" --systems ina,gloo --switch-cores "$c" --build "$BUILD_DIR" \
              --out "$d" --timeout-s "$RUN_TIMEOUT_S"
            if [[ -f $d/summary.tsv ]]; then
              { echo '```'; cat "$d/summary.tsv"; echo '```'; } >>"$SUM"
            fi
          done
        done
      done
      ;;
    scaling)
      note "" "## one job on 1/2/4/8 switch cores (--core-ports 1; UDP, then DPDK memif)"
      # Over UDP, then over DPDK memif (a queue per core; needs root, as the testbed does).
      for io in udp dpdk; do
        if [[ $io == dpdk ]] && ! grep -qs '^INA_NET_DPDK_FOUND:INTERNAL=1' "$BUILD_DIR/CMakeCache.txt"; then
          note "" "### scaling dpdk: skipped (this build has no DPDK: libdpdk not found at configure)"
          continue
        fi
        if [[ $QUICK == 1 ]]; then
          run "scaling $io (quick, ALL=1)" "$OUT/scaling-$io.log" env IO=$io ONE_JOB=1 ALL=1 \
            BUILD="$BUILD_DIR" OUT="$OUT/scaling" scripts/bench-switch-scaling.sh 65536 3
        else
          run "scaling $io" "$OUT/scaling-$io.log" env IO=$io ONE_JOB=1 BUILD="$BUILD_DIR" \
            OUT="$OUT/scaling" scripts/bench-switch-scaling.sh
        fi
        { echo '```'; grep -E '^cores=' "$OUT/scaling-$io.log"; grep '^{' "$OUT/scaling-$io.log" | tail -1
          echo '```'; } >>"$SUM"
      done
      ;;
    loopback)
      note "" "## one box (loopback): ina-bench --k 2048 vs Gloo"
      # One switch core, then every other count of --cores-list (cheap runs: a few seconds each).
      for w in $WORKERS_LIST; do
        for c in $(with_one_core); do
          args=(--workers "$w" --elements "$SIZE" --iters "$ITERS" --k 2048)
          [[ $c != 1 ]] && args+=(--switch-cores "$c")
          run "loopback $w workers switch cores $c" "$OUT/loopback-w$w-c$c.log" \
            "$BUILD_DIR/bin/ina-bench" "${args[@]}"
          summarize "$OUT/loopback-w$w-c$c.log"
        done
      done
      ;;
    tree)
      note "" "## two-level tree (loopback): a spine and 2 leaves on N cores each, beside one flat switch"
      for w in $WORKERS_LIST; do
        for c in $(with_one_core); do
          tree_run "$w" "$c"
        done
      done
      ;;
  esac
done
note "" "done: $([[ $FAILED == 0 ]] && echo 'every run exited 0' || echo 'some run failed (see above)')"
exit $FAILED
