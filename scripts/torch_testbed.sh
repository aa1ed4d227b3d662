#!/usr/bin/env bash
# DDP training step time, backend ina vs gloo, on the rate-limited star of scripts/testbed.sh.
#
#   scripts/torch_testbed.sh [--workers 4] [--rate 200mbit] [--steps 12] [--hidden 1024]
#                            [--layers 3] [--mtu 1500|9000] [--build DIR] [--out DIR]
#                            [--chroot DIR]
#
# --mtu: every veth's MTU, as in testbed.sh (9000: jumbo frames for both backends; Gloo's TCP
# segments grow to 8948 bytes, ina carries K=2048 elements per packet with a window of 128 slots,
# 1 MiB in flight, what testbed.sh picks). ina's K is libina's default (the largest whose frame
# fits the path MTU).
#
# --chroot DIR: the ranks run on the torch of the chroot that scripts/torch2-chroot.sh made (Debian
# 13, torch 2.6), with the backend it built there (DIR/build) and the sources it copied (DIR/src);
# ina-switchd is still this build's (the same protocol).
#
# The same star as scripts/testbed.sh (set up by scripts/netns_star.sh): one namespace per worker with a
# veth pair to a switch namespace that forwards between them, each direction shaped by tc tbf to
# --rate (+24 B per frame), GSO off. ina-switchd runs in the switch namespace; each rank of
# examples/train_ddp.py runs in its own worker namespace (--rank), reaching the switch at its own
# gateway (INA_SWITCH=10.77.i.1:port) and rank 0's store at 10.77.0.2; Gloo (for gloo, and ina's
# own Gloo groups) is bound to the worker's veth (GLOO_SOCKET_IFNAME). Prints both runs' median
# step times and writes the outputs to --out (default build/torch-testbed/): each rank's output,
# torch.json (both medians and the run's parameters) and torch.png beside it (the two backends'
# median step side by side; scripts/plot/plot.py, skipped with a word where gnuplot is missing).
# Needs root.
# Every namespace and process made here is removed on exit, also on failure and on INT/TERM.
set -euo pipefail

WORKERS=4
RATE=200mbit
STEPS=12
HIDDEN=1024
LAYERS=3
OVERHEAD=24
MTU=1500
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
OUT=
CHROOT=
die() { echo "torch_testbed: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --workers) WORKERS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --hidden) HIDDEN=$2; shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --mtu) MTU=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --chroot) CHROOT=$2; shift 2 ;;
    *) die "unknown flag $1" ;;
  esac
done
SWITCHD=$BUILD/bin/ina-switchd
[[ -x $SWITCHD ]] || die "$SWITCHD not built"
[[ $MTU =~ ^[0-9]+$ && $MTU -ge 1280 && $MTU -le 9000 ]] || die "--mtu wants 1280..9000"
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, tc)"
# Where the ranks' python, backend and example come from: this build, or the chroot's.
PY=(/usr/bin/python3)
PYPATH=$BUILD/python
EXAMPLE=$ROOT/examples/train_ddp.py
CHROOT_MOUNTS=()
if [[ -n $CHROOT ]]; then
  [[ -f $CHROOT/build/python/ina_torch/__init__.py ]] ||
    die "$CHROOT/build has no ina_torch (run scripts/torch2-chroot.sh $CHROOT first)"
  PY=(chroot "$CHROOT" /usr/bin/python3)
  PYPATH=/build/python
  EXAMPLE=/src/examples/train_ddp.py
else
  [[ -f $BUILD/python/ina_torch/__init__.py ]] || die "ina_torch not built (target ina_torch_ext)"
fi
OUT=${OUT:-$BUILD/torch-testbed}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export INA_UDP_GSO=0  # one datagram per frame, so tbf charges the overhead per frame
RATE_BPS=$(python3 -c "import re,sys; m=re.fullmatch(r'(\d+)(k|m|g)?bit','$RATE'); \
print(int(m.group(1))*{None:1,'k':10**3,'m':10**6,'g':10**9}[m.group(2)])")
# The K libina picks on these links and the window testbed.sh gives it (scripts/netns_star.sh).
# shellcheck source=scripts/netns_star.sh
source "$ROOT/scripts/netns_star.sh"
K=$(star_auto_k "$MTU")
WINDOW=$(star_window "$K")
# The RTO floor at the window's drain time (docs/host.md, "RTO on slow links").
RTO_MIN_US=$(( WINDOW * (64 + 4 * K + 24) * 8 * 1000000 / RATE_BPS + 1000 ))
export INA_RTO_MIN_US=$RTO_MIN_US INA_RTO_INITIAL_US=$RTO_MIN_US INA_WINDOW=$WINDOW

PREFIX=inatt$$
SW=$PREFIX-sw
NAMESPACES=()
SWITCH_PID=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $SWITCH_PID ]]; then
    kill "$SWITCH_PID" 2> /dev/null || true
    wait "$SWITCH_PID" 2> /dev/null || true
  fi
  for ns in "${NAMESPACES[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -KILL "$pid" 2> /dev/null || true; done
  done
  for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2> /dev/null || true; done
  for m in "${CHROOT_MOUNTS[@]}"; do umount "$m" 2> /dev/null || umount -l "$m" || true; done
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# What torch needs in the chroot (shared memory, /proc), mounted unless already there; unmounted
# by cleanup.
if [[ -n $CHROOT ]]; then
  for m in proc dev dev/shm; do
    mountpoint -q "$CHROOT/$m" && continue
    case $m in
      proc) mount -t proc proc "$CHROOT/proc" ;;
      dev) mount --bind /dev "$CHROOT/dev" ;;
      dev/shm) mount -t tmpfs -o mode=1777 shm "$CHROOT/dev/shm" ;;
    esac
    CHROOT_MOUNTS=("$CHROOT/$m" "${CHROOT_MOUNTS[@]}")
  done
fi

star_up "$SW" "$PREFIX" "$WORKERS" "$RATE" "$OVERHEAD" "$MTU" || die "ip netns add failed"
star_switch "$SW" "$OUT/switchd.out" "$SWITCHD" || die "ina-switchd did not come up"
echo "torch_testbed: $WORKERS workers, every link $RATE each way (+$OVERHEAD B/frame, MTU" \
     "$MTU: ina K=$K, window $WINDOW), MLP 64-$HIDDEN x$LAYERS-10, $STEPS steps, rto_min ${RTO_MIN_US} us"

run() {  # backend
  local b=$1 i pids=() rc=0 mport=$((29600 + RANDOM % 1000))
  for ((i = 0; i < WORKERS; i++)); do
    ip netns exec "$PREFIX-w$i" env PYTHONPATH="$PYPATH" INA_SWITCH="10.77.$i.1:$PORT" \
      GLOO_SOCKET_IFNAME="w$i" OMP_NUM_THREADS=1 USE_LIBUV=0 "${PY[@]}" "$EXAMPLE" \
      --backend "$b" --rank "$i" --world "$WORKERS" --master-addr 10.77.0.2 --port "$mport" \
      --steps "$STEPS" --hidden "$HIDDEN" --layers "$LAYERS" --batch 32 \
      > "$OUT/$b.rank$i.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [[ $rc -eq 0 ]] || { tail -5 "$OUT/$b".rank*.out >&2; die "$b run failed"; }
  echo "  $b: $(grep '^time ' "$OUT/$b.rank0.out"); fingerprints:" \
       "$(grep -h 'params sha256' "$OUT/$b".rank*.out | awk '{print $4}' | sort -u | tr '\n' ' ')"
}
run ina
run gloo
grep -h "fabric_calls" "$OUT"/ina.rank*.out | cut -c1-120
median() { sed -n 's/^time .* median step \([0-9.]*\) ms.*/\1/p' "$OUT/$1.rank0.out"; }
calls=$(sed -n 's/.* fabric_calls \([0-9]*\) .*/\1/p' "$OUT/ina.rank0.out")
torch_version=$("${PY[@]}" -c 'import torch; print(torch.__version__)' 2> /dev/null | tail -1)
echo "{\"workers\": $WORKERS, \"torch\": \"$torch_version\", \"rate_bps\": $RATE_BPS, \"overhead\": $OVERHEAD, \"mtu\": $MTU, \"k\": $K, \"steps\": $STEPS," \
     "\"hidden\": $HIDDEN, \"layers\": $LAYERS, \"batch\": 32, \"cpus\": $(nproc)," \
     "\"ina_median_step_ms\": $(median ina), \"gloo_median_step_ms\": $(median gloo)," \
     "\"ina_fabric_calls\": ${calls:-0}}" > "$OUT/torch.json"
python3 "$ROOT/scripts/plot/plot.py" torch "$OUT/torch.png" "$OUT/torch.json" ||
  echo "torch_testbed: no plot" >&2
