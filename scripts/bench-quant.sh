#!/usr/bin/env bash
# Quantization kernel throughput (docs/benchmarks-quant.md): ina-quant-bench (Google Benchmark)
# over every kernel variant the CPU offers, its table printed as it comes, its JSON written to
# --out (default quant-out/) as quant.json and its figure beside it (quant.png: GiB/s per kernel,
# the variants side by side; scripts/plot/plot.py, skipped with a word where gnuplot is missing).
#
#   scripts/bench-quant.sh [--build DIR] [--out DIR] [--min-time S] [--filter REGEX]
#
# Defaults are the doc's command: --min-time 0.5 --filter /65536 (256 KiB of floats, cache
# resident). Builds nothing (cmake --build build --target ina-quant-bench).
set -euo pipefail
BUILD=build OUT=quant-out MIN_TIME=0.5 FILTER=/65536
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --min-time) MIN_TIME=$2; shift 2 ;;
    --filter) FILTER=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "bench-quant: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$BUILD/bin/ina-quant-bench
[[ -x $BIN ]] || { echo "bench-quant: no $BIN (cmake --build $BUILD --target ina-quant-bench)" >&2; exit 1; }
mkdir -p "$OUT"
"$BIN" --benchmark_min_time="$MIN_TIME" --benchmark_filter="$FILTER" \
  --benchmark_out="$OUT/quant.json" --benchmark_out_format=json
python3 "$(dirname "$0")/plot/plot.py" quant "$OUT/quant.png" "$OUT/quant.json" \
  --note "$BIN --benchmark_min_time=$MIN_TIME --benchmark_filter='$FILTER'" ||
  echo "bench-quant: no plot" >&2
