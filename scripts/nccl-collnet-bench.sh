#!/usr/bin/env bash
# CollNet all-reduce throughput through libnccl-net-ina.so on loopback, without NCCL or a GPU:
# an ina-switchd plus --nodes nccl_abi_peer processes in "bench" mode, which issue the plugin
# what NCCL's proxy issues for a large float32 all-reduce (512 KiB steps, 2 channels x 8 steps
# in flight, tested in order) for --rounds x 8 MiB. One JSON line per node (MB/s of data
# reduced), also written to --out (default collnet-out/) as collnet.jsonl, with the figure beside
# it (collnet.png: MB/s per node; scripts/plot/plot.py, skipped with a word where gnuplot is
# missing). A figure, not a check; on a loaded 2-core machine it measures the CPUs.
#
#   scripts/nccl-collnet-bench.sh [--nodes N] [--rounds R] [--build-dir DIR] [--out DIR]
set -euo pipefail
here=$PWD  # --out is relative to where it was run from
cd "$(dirname "$0")/.."
NODES=2
ROUNDS=8
BUILD_DIR=build
OUT=collnet-out
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) NODES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "nccl-collnet-bench: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for f in bin/ina-switchd bin/nccl_abi_peer lib/libnccl-net-ina.so; do
  [[ -e $BUILD_DIR/$f ]] || { echo "nccl-collnet-bench: $BUILD_DIR/$f not built" >&2; exit 1; }
done
[[ $OUT == /* ]] || OUT=$here/$OUT
mkdir -p "$OUT"
: > "$OUT/collnet.jsonl"
DIR=$(mktemp -d /tmp/ina-nccl-bench-XXXXXX)
"$BUILD_DIR/bin/ina-switchd" --port 0 --bind 127.0.0.1 >"$DIR/switchd.log" 2>&1 &
SW=$!
trap 'kill "$SW" 2>/dev/null || true; wait "$SW" 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do grep -q 'listening on' "$DIR/switchd.log" && break; sleep 0.1; done
PORT=$(sed -n 's/^ina-switchd listening on .*:\([0-9]*\)$/\1/p' "$DIR/switchd.log")
[[ -n $PORT ]] || { echo "nccl-collnet-bench: ina-switchd did not start" >&2; exit 1; }
pids=()
for r in $(seq 0 $((NODES - 1))); do
  # Each node's line as it comes, and into the file (a line per write: appends do not mix).
  (INA_SWITCH=127.0.0.1:$PORT "$BUILD_DIR/bin/nccl_abi_peer" bench \
    --plugin "$BUILD_DIR/lib/libnccl-net-ina.so" --dir "$DIR" --rank "$r" --nodes "$NODES" \
    --rounds "$ROUNDS" 2>"$DIR/peer$r.log" | tee -a "$OUT/collnet.jsonl") &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[[ $rc == 0 ]] || tail -n 3 "$DIR"/peer*.log >&2
python3 scripts/plot/plot.py collnet "$OUT/collnet.png" "$OUT/collnet.jsonl" \
  --note "$ROUNDS rounds x 8 MiB, 512 KiB steps, 2 channels x 8 steps in flight; $(nproc) CPUs" ||
  echo "nccl-collnet-bench: no plot" >&2
exit $rc
