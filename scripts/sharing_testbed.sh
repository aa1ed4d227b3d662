#!/usr/bin/env bash
# Jobs sharing one switch on the rate-limited testbed (docs/sharing.md).
#
#   scripts/sharing_testbed.sh [--jobs "1 2 4"] [--workers 2] [--rate 100mbit]
#                              [--elements 1048576] [--iters 10] [--slots 256] [--window 256]
#                              [--lease-calls 4] [--min-window 8] [--overhead 24] [--out DIR]
#                              [--build DIR] [--timeout-s S] [--rto-min-us U|auto]
#
# The star of network namespaces of scripts/testbed.sh (scripts/netns_star.sh): --workers worker
# namespaces, each with its own link to the switch namespace, shaped by tc tbf to --rate each
# way. One ina-switchd (--slots, --lease-calls, --min-window) in the switch namespace. For each
# J in --jobs, J ina-bench instances start at once, each a job of --workers ranks (job 100+j),
# rank r of every job in worker namespace r: the jobs share every link and the switch's slot
# pool, as jobs sharing hosts and a ToR switch do. Each verifies its results (ina-bench's
# "verified") and reports its median all-reduce time; its throughput is the tensor's bytes per
# median call (algorithm bandwidth). Per J: every job's throughput, Jain's fairness index
# (sum x)^2 / (J sum x^2) and the aggregate throughput over that of one job alone (the first J
# in --jobs should be 1).
#
# Output in --out (default sharing-out/): results.jsonl (ina-bench's lines with "jobs", "job",
# "rate_bps", "slots", "lease_calls", "overhead" and "cpus" added), summary.tsv and sharing.png
# beside them (each job's and the aggregate throughput per J, the line-rate bound and the fair
# share drawn; scripts/plot/plot.py, skipped with a word where gnuplot is missing). Exit status: 0 if every run verified, 1 otherwise, 2 on bad usage or a
# setup failure. Every namespace and process made here is removed on exit.
set -euo pipefail

JOBS_LIST="1 2 4"
WORKERS=2
RATE=100mbit
ELEMENTS=1048576
ITERS=10
SLOTS=256
WINDOW=256
LEASE=4
MIN_WINDOW=8
OVERHEAD=24
OUT=sharing-out
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
TIMEOUT_S=900
RTO_MIN_US=auto

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) JOBS_LIST=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --elements) ELEMENTS=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --slots) SLOTS=$2; shift 2 ;;
    --window) WINDOW=$2; shift 2 ;;
    --lease-calls) LEASE=$2; shift 2 ;;
    --min-window) MIN_WINDOW=$2; shift 2 ;;
    --overhead) OVERHEAD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --timeout-s) TIMEOUT_S=$2; shift 2 ;;
    --rto-min-us) RTO_MIN_US=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "sharing_testbed: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "sharing_testbed: $*" >&2; exit 2; }
[[ $WORKERS =~ ^[0-9]+$ && $WORKERS -ge 1 && $WORKERS -le 64 ]] || die "--workers wants 1..64"
for j in $JOBS_LIST; do [[ $j =~ ^[0-9]+$ && $j -ge 1 && $j -le 16 ]] || die "--jobs: 1..16 each"; done
RATE_BPS=$(awk -v r="$RATE" 'BEGIN {
  n = r + 0; u = tolower(substr(r, length(n "") + 1));
  m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9;
  if (n <= 0 || !(u in m)) exit 1; printf "%.0f", n * m[u] }') ||
  die "--rate wants a tc rate such as 100mbit"
if [[ $RTO_MIN_US == auto ]]; then  # as scripts/testbed.sh: a window's drain time on one link
  RTO_MIN_US=$(awk -v w="$WINDOW" -v o="$OVERHEAD" -v r="$RATE_BPS" \
                 'BEGIN { printf "%.0f", w * (64 + 1024 + o) * 8 / r * 1e6 }')
fi
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, tc)"
BENCH=$BUILD/bin/ina-bench
SWITCHD=$BUILD/bin/ina-switchd
[[ -x $BENCH && -x $SWITCHD ]] || die "no $BENCH or $SWITCHD (build first)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export INA_UDP_GSO=${INA_UDP_GSO:-0}  # one datagram per frame, as scripts/testbed.sh

PREFIX=inash$$
SW=$PREFIX-sw
NAMESPACES=()
SWITCH_PID=
CHILDREN=()
TMP=$(mktemp -d /tmp/ina-sharing.XXXXXX)
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for c in "${CHILDREN[@]}"; do kill -TERM "$c" 2> /dev/null || true; done
  [[ -n $SWITCH_PID ]] && kill "$SWITCH_PID" 2> /dev/null && wait "$SWITCH_PID" 2> /dev/null
  for ns in "${NAMESPACES[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -KILL "$pid" 2> /dev/null || true; done
  done
  for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2> /dev/null || true; done
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=scripts/netns_star.sh
source "$ROOT/scripts/netns_star.sh"
star_up "$SW" "$PREFIX" "$WORKERS" "$RATE" "$OVERHEAD" || die "ip netns add failed"
star_switch "$SW" "$TMP/switchd.out" "$SWITCHD" --slots "$SLOTS" --lease-calls "$LEASE" \
  --min-window "$MIN_WINDOW" || die "ina-switchd did not come up"
star_lists "$PREFIX" "$WORKERS" "$PORT"
echo "sharing_testbed: $WORKERS worker namespaces, $RATE links, switch --slots $SLOTS" \
     "--lease-calls $LEASE --min-window $MIN_WINDOW, window $WINDOW, $ELEMENTS floats"

jnum() { sed -n "s/.*\"$1\": \\(-\\{0,1\\}[0-9.e+-]*\\).*/\\1/p" <<< "$2"; }
RESULTS=$OUT/results.jsonl
: > "$RESULTS"
ALL_OK=1
ALONE=
{
  echo -e "# jobs\tper_job_mbit\tjain\taggregate_mbit\taggregate_over_alone"
} > "$OUT/summary.tsv"
for J in $JOBS_LIST; do
  CHILDREN=()
  for ((j = 0; j < J; j++)); do
    "$BENCH" --workers "$WORKERS" --elements "$ELEMENTS" --iters "$ITERS" --window "$WINDOW" \
      --job $((100 + j)) --seed $((1 + j)) --quiet --no-gloo --worker-netns "$NSLIST" \
      --worker-switch "$SWLIST" --worker-addr "$ADDRLIST" --timeout-s "$TIMEOUT_S" \
      --rto-min-us "$RTO_MIN_US" --progress-timeout-ms 30000 \
      > "$TMP/bench-$J-$j.out" 2> "$TMP/bench-$J-$j.err" &
    CHILDREN+=($!)
  done
  xs=()
  for ((j = 0; j < J; j++)); do
    rc=0
    wait "${CHILDREN[$j]}" || rc=$?
    line=$(grep '^{' "$TMP/bench-$J-$j.out" | tail -1 || true)
    if [[ $rc -ne 0 || -z $line || $line != *'"verified": true'* ]]; then
      ALL_OK=0
      echo "sharing_testbed: job $j of $J failed (rc $rc):" >&2
      tail -20 "$TMP/bench-$J-$j.err" >&2
      continue
    fi
    echo "{\"jobs\": $J, \"job\": $j, \"rate_bps\": $RATE_BPS, \"slots\": $SLOTS, \"lease_calls\": $LEASE, \"overhead\": $OVERHEAD, \"cpus\": $(nproc), ${line#\{}" >> "$RESULTS"
    ms=$(jnum ina_ms_median "$line")
    xs+=("$(awk -v n="$ELEMENTS" -v ms="$ms" 'BEGIN { printf "%.2f", n * 4 * 8 / (ms / 1e3) / 1e6 }')")
  done
  CHILDREN=()
  [[ ${#xs[@]} -eq $J ]] || continue
  read -r jain agg <<< "$(printf '%s\n' "${xs[@]}" |
    awk '{ s += $1; q += $1 * $1; n++ } END { printf "%.4f %.2f", s * s / (n * q), s }')"
  [[ $J -eq 1 ]] && ALONE=$agg
  frac=$([[ -n $ALONE ]] && awk -v a="$agg" -v b="$ALONE" 'BEGIN { printf "%.3f", a / b }' || echo -1)
  echo -e "$J\t$(IFS=,; echo "${xs[*]}")\t$jain\t$agg\t$frac" >> "$OUT/summary.tsv"
  echo "  $J job(s): per job ${xs[*]} Mbit/s, Jain $jain, aggregate $agg Mbit/s ($frac of one alone)"
done
kill -TERM "$SWITCH_PID" 2> /dev/null || true
wait "$SWITCH_PID" 2> /dev/null || true
SWITCH_PID=
sed -n 's/.*\("jobs_queued": [0-9]*\).*\("regrants": [0-9]*\).*/switch: \1, \2/p' \
  "$TMP/switchd.out" | tail -1
cat "$OUT/summary.tsv"
python3 "$ROOT/scripts/plot/plot.py" sharing "$OUT/sharing.png" "$RESULTS" ||
  echo "sharing_testbed: no plot (the runs' results stand)" >&2
[[ $ALL_OK -eq 1 ]] && echo "sharing_testbed: all runs verified" || echo "sharing_testbed: FAILED" >&2
[[ $ALL_OK -eq 1 ]]
