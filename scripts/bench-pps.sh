#!/usr/bin/env bash
# Packets/s of one ina worker and one switch core over net_memif at K elements per packet (default
# 256), side by side with the ceiling: plain DPDK (ina-pps-ceiling, raw rte_ethdev) moving frames
# of the same size with the same window over the same kind of link, echo on one side, fresh frames
# written on the other. K above 256 runs jumbo frames (--dpdk-mtu 9000 on both ina sides).
#
#   scripts/bench-pps.sh [--build DIR] [--rounds N] [--elements E] [--seconds S] [--k K]
#                        [--out DIR]
#
# Each round runs ina (`ina-bench --transport memif --workers 1`, E float elements, 10 timed
# all-reduces: frames per second of the median one) and then the ceiling (S seconds); the figures
# are the medians over the rounds, so both see the same machine. Prints one line per run and, last,
# one JSON line: {"ina_pps", "ceiling_pps", "ratio", "ina_payload_gbps", "ceiling_payload_gbps",
# ..., "ina_rounds", "ceiling_rounds"} (payload: K x 4 bytes per frame). That line also goes to
# --out (default pps-out/) as pps-k<K>.json, its figure beside it (.png: ina's bar beside the
# ceiling's, each round a dot, the ceiling drawn; scripts/plot/plot.py, skipped with a word where
# gnuplot is missing). Needs root (DPDK), builds nothing.
set -euo pipefail
here=$PWD  # --out is relative to where it was run from
cd "$(dirname "$0")/.."
BUILD=build ROUNDS=3 ELEMENTS=16777216 SECONDS_=3 K=256 OUT=pps-out
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --elements) ELEMENTS=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    --k) K=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench-pps: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $OUT == /* ]] || OUT=$here/$OUT
[[ $K =~ ^(64|256|512|1024|2048)$ ]] || { echo "bench-pps: --k wants 64, 256, 512, 1024 or 2048" >&2; exit 2; }
MTU=1500 BSIZE=""
# Jumbo: memif buffers that hold a whole frame (ina-bench does the same; net/dpdk.h says why).
[ "$K" -le 256 ] || { MTU=9000; BSIZE=",bsize=16384"; }
B=$BUILD/bin
for x in ina-bench ina-switchd ina-pps-ceiling; do
  [ -x "$B/$x" ] || { echo "bench-pps: $B/$x missing (build with DPDK: scripts/build.sh)" >&2; exit 1; }
done
dir=$(mktemp -d /tmp/ina-pps-XXXXXX)
prefix="inapps$$"
cleanup() {
  if [ -n "${echo_pid:-}" ]; then kill "$echo_pid" 2>/dev/null; wait "$echo_pid" 2>/dev/null; fi
  rm -rf "$dir" /var/run/dpdk/"$prefix"*
}
trap cleanup EXIT
# Pinned as ina-bench pins one worker and its switch: the echo on CPU 0, the client on CPU 1.
[ "$(nproc)" -ge 2 ] || { echo "bench-pps: needs 2 CPUs (one per side)" >&2; exit 1; }
eal="--no-huge -m 256 --no-pci --no-telemetry --log-level=*:error"
field() { grep -o "\"$1\": [0-9.]*" | head -1 | awk '{print $2}'; }

ina=() ceil=() frame=0
for r in $(seq 1 "$ROUNDS"); do
  out=$("$B/ina-bench" --transport memif --workers 1 --elements "$ELEMENTS" --iters 10 --no-gloo \
        --k "$K" --dpdk-mtu "$MTU" --quiet 2>"$dir/ina.err") || { cat "$dir/ina.err" >&2; exit 1; }
  echo "$out" | grep -q '"verified": true' || { echo "bench-pps: ina run not verified: $out" >&2; exit 1; }
  pps=$(echo "$out" | field ina_pps); frame=$(echo "$out" | field data_frame_bytes)
  ina+=("$pps")
  echo "round $r: ina      $pps packets/s (verified, ${frame}-byte frames)"
  "$B/ina-pps-ceiling" --role echo --eal "$eal -l 0 --file-prefix ${prefix}e --vdev net_memif0,role=server,socket=$dir/c.sock$BSIZE" \
      >/dev/null 2>&1 &
  echo_pid=$!
  sleep 1
  out=$("$B/ina-pps-ceiling" --role client --frame-bytes "$frame" --window 256 --seconds "$SECONDS_" \
        --eal "$eal -l 1 --file-prefix ${prefix}c --vdev net_memif0,role=client,socket=$dir/c.sock$BSIZE")
  kill "$echo_pid" 2>/dev/null || true  # it may have stopped itself (link down)
  wait "$echo_pid" 2>/dev/null || true
  echo_pid=
  pps=$(echo "$out" | field ceiling_pps)
  ceil+=("$pps")
  echo "round $r: ceiling  $pps packets/s (plain DPDK echo, window 256)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf("%.0f\n", NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mi=$(median "${ina[@]}") mc=$(median "${ceil[@]}")
ratio=$(awk -v a="$mi" -v b="$mc" 'BEGIN {printf("%.3f", b > 0 ? a / b : 0)}')
gbps() { awk -v p="$1" -v k="$K" 'BEGIN {printf("%.2f", p * k * 4 * 8 / 1e9)}'; }
list() { local IFS=,; echo "[$*]"; }
json="{\"ina_pps\": $mi, \"ceiling_pps\": $mc, \"ratio\": $ratio, \"ina_payload_gbps\": $(gbps "$mi"), \"ceiling_payload_gbps\": $(gbps "$mc"), \"frame_bytes\": $frame, \"k\": $K, \"mtu\": $MTU, \"window\": 256, \"rounds\": $ROUNDS, \"elements\": $ELEMENTS, \"cpus\": $(nproc), \"ina_rounds\": $(list "${ina[@]}"), \"ceiling_rounds\": $(list "${ceil[@]}")}"
echo "$json"
# The file and its figure; what is said about them goes to stderr, so the JSON stays the last line.
if mkdir -p "$OUT" && echo "$json" > "$OUT/pps-k$K.json"; then
  python3 scripts/plot/plot.py pps "$OUT/pps-k$K.png" "$OUT/pps-k$K.json" || echo "bench-pps: no plot" >&2
else
  echo "bench-pps: could not write $OUT/pps-k$K.json" >&2
fi
