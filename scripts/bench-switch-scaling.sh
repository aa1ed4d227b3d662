#!/bin/bash
# ina-switchd --cores N scaling over UDP on loopback (or over DPDK memif, IO=dpdk below): for N in 1 2 4 8 (each N only where the
# machine has at least 2N cores: N switch cores plus N workers), one job per core (job ids
# 0..N-1, steered one to each core), one ina-dpdk-worker per job (INA_TRANSPORT=udp, world 1,
# K 256, window 256), REPEATS float all-reduces of ELEMENTS each. Prints per N the packets/s
# the switch handled (data packets in, rx_data, over the wall time of the slowest worker; one
# result goes back per packet) and the sum of the workers' own rates; the last line is JSON.
# That JSON also goes to OUT (default switch-scaling-out/) as switch-scaling.json
# (switch-scaling-one-job.json with ONE_JOB=1), its figure beside it (.png: packets/s against
# cores, the ideal N x the 1-core rate and the 0.7 N target drawn; scripts/plot/plot.py,
# skipped with a word where gnuplot is missing).
# usage: scripts/bench-switch-scaling.sh [ELEMENTS=1048576] [REPEATS=20]   (BUILD=build OUT=DIR)
# ALL=1 runs every N even without the CPUs, unpinned (checks the script; the rates mean nothing).
# ONE_JOB=1: one job on every core instead (ina-switchd --cores N --core-ports 1; one worker with
# N lanes, INA_SWITCH_CORES=N, lane l to core l: docs/switchd.md "One job on every core").
# K=256 (default) or another K for every worker (INA_K).
# IO=dpdk (with ONE_JOB=1; root): the same over DPDK instead of UDP: ina-switchd --io dpdk with one
# net_memif server port of N queues (--core-ports 1: core c owns queue c), the worker a memif
# client whose lane l sends on queue l (docs/switchd.md "Over DPDK: one queue per core"); --no-huge
# EALs; K above 256 runs at MTU 9000 with 16 KiB memif buffers.
set -u
E=${1:-1048576}
K=${K:-256}
ONE_JOB=${ONE_JOB:-0}
IO=${IO:-udp}
case $IO in
  udp) ;;
  dpdk) [ "$ONE_JOB" = 1 ] || { echo "IO=dpdk needs ONE_JOB=1"; exit 2; } ;;
  *) echo "IO=$IO: udp or dpdk"; exit 2 ;;
esac
R=${2:-20}
B=${BUILD:-build}/bin
for f in "$B/ina-switchd" "$B/ina-dpdk-worker"; do
  [ -x "$f" ] || { echo "missing $f (cmake --build $BUILD --target ina-switchd ina-dpdk-worker)"; exit 2; }
done
CPUS=$(nproc)
D=$(mktemp -d /tmp/ina-scale-XXXX)
PFX=inascale$$
trap 'kill $SW 2>/dev/null; rm -rf "$D" /var/run/dpdk/${PFX}_*' EXIT
json="{\"elements\": $E, \"repeats\": $R, \"k\": $K, \"one_job\": $ONE_JOB, \"io\": \"$IO\", \"cpus\": $CPUS, \"runs\": ["
first=1
for N in 1 2 4 8; do
  PIN_SW="taskset -c 0-$((N - 1))"
  pinned=true
  if [ $((2 * N)) -gt "$CPUS" ] && [ "${ALL:-0}" = 1 ]; then
    PIN_SW=""
    pinned=false
  elif [ $((2 * N)) -gt "$CPUS" ]; then
    echo "cores=$N skipped: needs $((2 * N)) CPUs (N switch cores + N workers), have $CPUS"
    continue
  fi
  # Switch threads on CPUs 0..N-1, worker j on CPU N+j (taskset, util-linux), so neither side
  # takes the other's CPUs.
  if [ "$IO" = dpdk ]; then
    EAL="--no-huge -m 256 --no-pci --no-telemetry --log-level=*:warning"
    MEMIF="net_memif0,id=0,socket=$D/m$N.sock"
    MTU=()
    if [ "$K" -gt 256 ]; then MEMIF+=",bsize=16384"; MTU=(--dpdk-mtu 9000); fi
    $PIN_SW "$B/ina-switchd" --bind 10.77.0.1 --port 47000 --cores "$N" --core-ports 1 \
      --dpdk "$EAL --file-prefix ${PFX}_sw$N -l 0 --vdev $MEMIF,role=server" "${MTU[@]}" \
      --dpdk-backoff-us 200 > "$D/sw$N.log" 2>&1 &
  else
    $PIN_SW "$B/ina-switchd" --bind 127.0.0.1 --port 0 --cores "$N" --core-ports "$ONE_JOB" \
      > "$D/sw$N.log" 2>&1 &
  fi
  SW=$!
  # (The log may not exist yet: the background shell opens it.)
  for _ in $(seq 400); do grep -qs "listening on" "$D/sw$N.log" && break; sleep 0.05; done
  ADDR=$(sed -n 's/^ina-switchd listening on //p' "$D/sw$N.log")
  t0=$(date +%s.%N)
  pids=()
  if [ "$IO" = dpdk ]; then  # one worker over memif, lane l on queue l, on CPUs N..2N-1
    INA_TRANSPORT=dpdk INA_SWITCH=10.77.0.1:47000 INA_DPDK_LOCAL=10.77.1.1:40000 \
      INA_DPDK_EAL="$EAL --file-prefix ${PFX}_w$N --lcores 0@$([ "$pinned" = true ] && echo $N || echo 0) --vdev $MEMIF,role=client" \
      INA_DPDK_MTU=$([ "$K" -gt 256 ] && echo 9000 || echo 1500) INA_DPDK_BACKOFF_US=200 \
      INA_JOB=1 INA_WORLD=1 INA_RANK=0 INA_K=$K INA_PROGRESS_THREADS=$N INA_SWITCH_CORES=$N \
      timeout 600 ${PIN_SW:+taskset -c $N-$((2 * N - 1))} "$B/ina-dpdk-worker" "$E" 1 "$R" \
      > "$D/w$N.0.log" 2> /dev/null &
    pids+=($!)
  elif [ "$ONE_JOB" = 1 ]; then  # one worker, a lane per switch core, on CPUs N..2N-1
    INA_TRANSPORT=udp INA_SWITCH=$ADDR INA_JOB=1 INA_WORLD=1 INA_RANK=0 INA_K=$K \
      INA_PROGRESS_THREADS=$N INA_SWITCH_CORES=$N \
      timeout 600 ${PIN_SW:+taskset -c $N-$((2 * N - 1))} "$B/ina-dpdk-worker" "$E" 1 "$R" \
      > "$D/w$N.0.log" 2> /dev/null &
    pids+=($!)
  else
    for j in $(seq 0 $((N - 1))); do
      INA_TRANSPORT=udp INA_SWITCH=$ADDR INA_JOB=$j INA_WORLD=1 INA_RANK=0 INA_K=$K \
        timeout 600 ${PIN_SW:+taskset -c $((N + j))} "$B/ina-dpdk-worker" "$E" $((j + 1)) "$R" \
        > "$D/w$N.$j.log" 2> /dev/null &
      pids+=($!)
    done
  fi
  for p in "${pids[@]}"; do wait "$p"; done
  t1=$(date +%s.%N)
  kill -TERM $SW; wait $SW
  rx=$(grep -o '"switch_counters".*' "$D/sw$N.log" | grep -oE '"rx_data": [0-9]+' | grep -oE '[0-9]+$')
  wsum=$(cat "$D"/w$N.*.log | grep -oE 'packets_per_s=[0-9.]+' | cut -d= -f2 |
    awk '{s += $1} END {printf "%.0f", s}')
  exact=$(cat "$D"/w$N.*.log | grep -c 'exact=1')
  pps=$(awk -v n="${rx:-0}" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
  jobs=$N
  [ "$ONE_JOB" = 1 ] && jobs=1
  echo "cores=$N jobs=$jobs switch_packets_per_s=$pps workers_sum_packets_per_s=${wsum:-0} exact_jobs=$exact/$jobs"
  [ $first -eq 1 ] || json+=", "
  json+="{\"cores\": $N, \"switch_pps\": $pps, \"workers_pps\": ${wsum:-0}, \"exact_jobs\": $exact, \"pinned\": $pinned}"
  first=0
done
echo "$json]}"
# The file and its figure; what is said about them goes to stderr, so the JSON stays the last line.
OUT=${OUT:-switch-scaling-out}
name=switch-scaling
[ "$ONE_JOB" = 1 ] && name=switch-scaling-one-job
[ "$IO" = dpdk ] && name=switch-scaling-one-job-dpdk
if mkdir -p "$OUT" && echo "$json]}" > "$OUT/$name.json"; then
  python3 "$(dirname "$0")/plot/plot.py" switch-scaling "$OUT/$name.png" "$OUT/$name.json" ||
    echo "bench-switch-scaling: no plot" >&2
else
  echo "bench-switch-scaling: could not write $OUT/$name.json" >&2
fi
