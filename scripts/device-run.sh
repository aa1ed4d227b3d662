#!/usr/bin/env bash
# Everything of issues #21 and #22 that needs the GPU machine (one H200, 16 cores, no package
# access), as ONE run under one deadline: device time is short (minutes) and every start costs, so
# the steps run in the order of what they decide, each under the time left, and OUT/summary.md is
# written after every step (a run cut short keeps what it measured).
#
#   scripts/device-run.sh --deps DIR [--build-dir DIR] [--out DIR] [--deadline-s S] [--quick]
#                         [--steps "build gpu loopback testbed-w4 testbed-w8 scaling testbed-w8-10g
#                                   tree"]
#
# --deps DIR: the packages the GPU box lacks, prepared on a Debian 12 machine, with the probe's
#   configure script beside them (both from shared/probes/offline-gpu-box; DIR must travel with
#   the tree, e.g. an ignored folder named in the device call's carry):
#     ../shared/probes/offline-gpu-box/prepare-deps.sh .device
#     cp ../shared/probes/offline-gpu-box/on-gpu-box.sh .device/
#     echo /.device/ >> .git/info/exclude
#   Without --deps the build directory must be configured already (a machine with packages).
# --deadline-s: the whole run's limit (default 540, under one device call's 600 s); a step starts
#   only with at least its minimum left, and runs under what is left.
# --steps: which of the steps below run (default all, in this order); a second call on the warm
#   machine (its build directory is kept) can run what the first had no time for.
# --quick: bench-16core.sh's --quick sizes (checks the script on a 2-core machine; figures mean
#   nothing); gpu-check then fails at once where there is no GPU, which the summary says.
#
# Steps, in order:
#   1. build (configure with --deps; 16 cores: ~2 min for the GPU targets, ~15 s for the rest);
#   2. gpu   scripts/gpu-check.sh --no-build: every kernel test at every alignment and K, NCCL with
#            host and GPU buffers, torch CUDA tensors (#22); its JSON line goes to the summary;
#   3. loopback: one box, ina-bench K=2048 vs Gloo at 4 and 8 workers, on 1, 2 and 4 switch cores;
#   4. testbed-w4: 4 workers, 1 Gbit/s, then 10 Gbit/s, MTU 9000, 4 switch cores (vs Gloo);
#   5. testbed-w8: 8 workers, 1 Gbit/s, 8 switch cores;
#   6. scaling: one job on 1/2/4/8 switch cores over UDP (the 0.7 N target; DPDK where built);
#   7. testbed-w8-10g: 8 workers at 10 Gbit/s;
#   8. tree: two-level aggregation on loopback, 8 workers, a spine and 2 leaves on 1, 2 and 4
#            cores each, beside one flat switch on as many.
# Exit status: 0 when every step that ran exited 0, 1 otherwise, 2 on bad usage.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$ROOT/build
OUT=device-run-out
DEADLINE_S=540
DEPS=""
QUICK=0
ALL_STEPS="build gpu loopback testbed-w4 testbed-w8 scaling testbed-w8-10g tree"
STEPS=$ALL_STEPS
while [[ $# -gt 0 ]]; do
  case $1 in
    --deps) DEPS=$(cd "$2" 2>/dev/null && pwd) || { echo "device-run: no folder $2" >&2; exit 2; }
            shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --deadline-s) DEADLINE_S=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --steps) STEPS=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "device-run: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $DEADLINE_S =~ ^[0-9]+$ ]] || { echo "device-run: --deadline-s wants seconds" >&2; exit 2; }
for s in $STEPS; do
  [[ " $ALL_STEPS " == *" $s "* ]] || { echo "device-run: unknown step '$s' ($ALL_STEPS)" >&2; exit 2; }
done
wants() { [[ " $STEPS " == *" $1 "* ]]; }
if [[ -n $DEPS && ! -f $DEPS/on-gpu-box.sh ]]; then
  echo "device-run: $DEPS has no on-gpu-box.sh (see --help for preparing it)" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUM=$OUT/summary.md
T0=$(date +%s)
FAILED=0
cd "$ROOT" || exit 2

note() { printf '%s\n' "$@" | tee -a "$SUM"; }
# Seconds left, never below 0: past the deadline is 0 left, not a negative figure.
left() {
  local l=$((DEADLINE_S - ($(date +%s) - T0)))
  echo $((l < 0 ? 0 : l))
}
# step NAME MIN_S LOG CMD...: runs CMD under the time left (at most STEP_CAP_S where the call sets
# it: `STEP_CAP_S=330 step ...`), or skips it (noted) with less than MIN_S left.
step() {
  local name=$1 min=$2 log=$3 rc t0 limit
  shift 3
  if (($(left) < min)); then
    note "" "## $name: SKIPPED ($(left) s left, it needs at least $min s)"
    return 0
  fi
  limit=$(left)
  ((${STEP_CAP_S:-0} > 0 && STEP_CAP_S < limit)) && limit=$STEP_CAP_S
  note "" "## $name ($(left) s left, limit $limit s)" "" "\`$*\`"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  note "" "exit $rc in $(($(date +%s) - t0)) s (log: ${log#"$OUT"/})"
  ((rc == 124 || rc == 137)) && note "**cut at its limit**"
  ((rc == 0)) || FAILED=1
  return "$rc"
}
# bench NAME MIN_S TAG ARGS...: one bench-16core.sh run, its summary appended to ours.
bench() {
  local name=$1 min=$2 tag=$3 q=()
  shift 3
  wants "$tag" || return 0
  ((QUICK)) && q=(--quick)
  # Each of its runs under the time left too, so that a run cut short is noted in its summary.
  step "$name" "$min" "$OUT/$tag.log" scripts/bench-16core.sh --build-dir "$BUILD_DIR" \
    --out "$OUT/$tag" --phase-timeout-s "$(left)" "${q[@]}" "$@"
  [[ -f $OUT/$tag/summary.md ]] && grep -v '^# \|^- host\|^- phases' "$OUT/$tag/summary.md" >>"$SUM"
}

note "# device run (#21, #22), $(date -u +%Y-%m-%dT%H:%MZ)" "" \
  "- host: $(nproc) CPUs, $(uname -r); GPUs: $(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)$(
      nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c |
        awk '{c=$1; $1=""; printf " (%d x%s)", c, $0}' || true)" \
  "- commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); deadline $DEADLINE_S s$( ((QUICK)) && echo '; --quick')"

# 1. build
if [[ -n $DEPS ]]; then
  # Sourced: its environment (the carried libraries and tools, pip NCCL's folder, INA_TORCH_PYTHON)
  # stays for every later step.
  note "" "## configure with $DEPS/on-gpu-box.sh"
  # shellcheck disable=SC1091
  if ! . "$DEPS/on-gpu-box.sh" "$DEPS" "$BUILD_DIR" >"$OUT/configure.log" 2>&1; then
    note "configure failed (log: configure.log): nothing else can run"
    exit 1
  fi
fi
if wants build; then
  # Everything the later steps run, in one parallel build: the switch and benches, gpu-check's
  # binaries, the GPU kernel tests and bench (scripts/gpu/quant-check.sh then builds nothing), the
  # torch backend where CMake found torch.
  targets=(ina-switchd ina-bench ina-dpdk-worker)
  have=$(cmake --build "$BUILD_DIR" --target help 2>/dev/null | sed -n 's/^\([A-Za-z0-9_.-]*\):.*/\1/p')
  for t in $have; do
    [[ $t =~ ^(nccl-net-ina|ina-nccl-allreduce|ina-gpu-allreduce|ina-gpu-quant-bench|ina_torch_ext|drv_gpu_.*_test)$ ]] &&
      targets+=("$t")
  done
  step build 60 "$OUT/build.log" cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${targets[@]}" \
    -- -k 0 || note "some target did not build (see the log); the steps that need it will fail"
fi

# 2. the GPU checks (#22)
if wants gpu; then
  # At most 330 s (gpu-check is meant to take under 5 minutes; a hang, such as NCCL's with GPU
  # buffers before, must not eat the time of the figures after it). Its logs stay in gpu-check/.
  STEP_CAP_S=330 step gpu 120 "$OUT/gpu-check.log" scripts/gpu-check.sh --no-build \
    --build-dir "$BUILD_DIR" --out "$OUT/gpu-check"
  # Its one-line JSON verdict, where it ran far enough to print one.
  if verdict=$(grep '^{' "$OUT/gpu-check.log" 2>/dev/null | tail -1) && [[ -n $verdict ]]; then
    printf '%s\n' '```' "$verdict" '```' >>"$SUM"
  fi
fi

# 3.-7. the 16-core figures (#21), the most decisive first
# Loopback on 1, 2 and 4 switch cores: each worker then runs as many lanes (threads), so 4 cores
# at 8 workers is 36 threads on 16 CPUs; which count is best there is what this measures.
bench "loopback (one box)" 60 loopback --phases loopback --workers-list "4 8" --cores-list "2 4"
bench "testbed 4 workers, 1 and 10 Gbit/s, 4 switch cores" 90 testbed-w4 --phases testbed \
  --workers-list 4 --rates "1gbit 10gbit" --cores-list 4
bench "testbed 8 workers, 1 Gbit/s, 8 switch cores" 60 testbed-w8 --phases testbed \
  --workers-list 8 --rates 1gbit --cores-list 8
bench "one job on 1/2/4/8 switch cores" 60 scaling --phases scaling
bench "testbed 8 workers, 10 Gbit/s, 8 switch cores" 45 testbed-w8-10g --phases testbed \
  --workers-list 8 --rates 10gbit --cores-list 8
bench "two-level tree, 8 workers, switches on 1/2/4 cores" 45 tree --phases tree \
  --workers-list 8 --cores-list "2 4"
note "" "done in $(($(date +%s) - T0)) s: $( ((FAILED)) && echo 'some step failed (see above)' || echo 'every step that ran exited 0')"
exit "$FAILED"
