#!/usr/bin/env bash
# The RTL core's beat efficiency, cycles per packet and Verilator simulation speed
# (docs/rtl/benchmarks.md): runs ina-rtl-bench, prints its lines as they come, writes them to
# --out (default rtl-bench-out/) as rtl-bench.jsonl (one JSON object per line: the model's
# PoolSlots and MaxK, then one per order and K) and the figure beside it (rtl-bench.png: beat
# efficiency against its ceiling of 1, the frames' Gbit/s at 250 MHz against one beat per cycle
# and the 512-bit bus, simulation speed against issue #13's 1 M cycles/s; scripts/plot/plot.py,
# skipped with a word where gnuplot is missing).
#
#   scripts/bench-rtl.sh [--build DIR] [--out DIR]
#
# Builds nothing (cmake --build build --target ina-rtl-bench; needs Verilator).
set -euo pipefail
BUILD=build OUT=rtl-bench-out
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "bench-rtl: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$BUILD/bin/ina-rtl-bench
[[ -x $BIN ]] || { echo "bench-rtl: no $BIN (cmake --build $BUILD --target ina-rtl-bench)" >&2; exit 1; }
mkdir -p "$OUT"
"$BIN" | tee "$OUT/rtl-bench.txt"
# "same-slot K=64 packets=20000 ... cycles/packet=6.000 line_rate@250MHz=108.0 Gbit/s ..." as
# {"order": "same-slot", "k": 64, "packets": 20000, ..., "cycles_per_packet": 6.000,
# "line_rate_gbps": 108.0, ...}; words without "=" are units.
awk -v cpus="$(nproc)" '
  $1 == "ina_core" {
    for (i = 2; i <= NF; i++) { split($i, a, "="); v[a[1]] = a[2] }
    printf "{\"pool_slots\": %s, \"max_k\": %s, \"cpus\": %s}\n", v["PoolSlots"], v["MaxK"], cpus
    next
  }
  $2 ~ /^K=/ {
    s = "{\"order\": \"" $1 "\""
    for (i = 2; i <= NF; i++) {
      if (index($i, "=") == 0) continue
      split($i, a, "=")
      k = a[1] == "K" ? "k" : a[1] == "line_rate@250MHz" ? "line_rate_gbps" : a[1]
      gsub("/", "_per_", k)
      s = s ", \"" k "\": " a[2]
    }
    print s "}"
  }' "$OUT/rtl-bench.txt" > "$OUT/rtl-bench.jsonl"
python3 "$(dirname "$0")/plot/plot.py" rtl "$OUT/rtl-bench.png" "$OUT/rtl-bench.jsonl" \
  --note "$BIN; world 4, full packets, window 8" || echo "bench-rtl: no plot" >&2
