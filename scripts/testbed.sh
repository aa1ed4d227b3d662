#!/usr/bin/env bash
# Rate-limited multi-host testbed: a star of network namespaces on one machine.
#
#   scripts/testbed.sh [--workers N] [--rate 200mbit] [--sizes "1048576 4194304"] [--iters I]
#                      [--systems ina,gloo,mpi] [--window W] [--overhead B] [--out DIR]
#                      [--build DIR] [--timeout-s S] [--seed S] [--mpi-alg A]
#                      [--dpdk-pmd af_packet|af_xdp] [--dpdk-backoff-us U] [--rto-min-us U|auto]
#                      [--mtu 1500|9000] [--k auto|K] [--switch-cores N] [--sec crc,mac,...]
#
# One namespace per worker (<prefix>-w<i>) and one for the switch (<prefix>-sw), prefix
# "inatb<pid>". Worker i has a veth pair to the switch namespace, 10.77.<i>.2/24 on its side and
# 10.77.<i>.1/24 on the switch's; the switch namespace forwards between the pairs, so worker to
# worker traffic (Gloo, MPI) crosses two links, like a ToR switch. Each direction of each link is
# shaped by `tc tbf` to --rate, counting --overhead extra bytes per frame (24 = Ethernet preamble,
# FCS and inter-frame gap, so the shaper counts what a real wire carries); GSO is off on the veths
# so TCP's per-segment headers are counted too. Addresses never leave the namespaces. --mtu sets
# every veth's MTU (9000: jumbo frames, Gloo's and MPI's TCP segments grow to 8948 bytes too);
# --k is ina's elements per packet, auto (default) the largest whose frame fits the MTU (256 at
# 1500, 2048 at 9000), and --window, unless given, is then 256 slots for K <= 256, else as many
# as keep a window within 1 MiB (128 at K=2048), below the shapers' 2 MiB queues. --switch-cores N
# puts ina's job on N switch cores (ina-switchd --cores N --core-ports 1, N lanes per worker).
# --sec LIST (comma-separated crc, mac, mac_encrypt; default crc): ina's security modes
# (docs/security.md), each run in turn per size on the same links and data (Gloo with the first
# only), so a keyed job's cost is measured side by side with the CRC-only one. With a keyed mode
# the switch runs with a fresh admin key file (mode 0600, in the run's temporary directory), and
# before each keyed ina run a fresh job secret is installed with ina-jobkey from the first worker's
# namespace and handed to the workers through INA_JOB_KEY.
#
# Per size it runs ina-bench (ina over UDP through ina-switchd in the switch namespace, then
# Gloo's ring on the same links, same worker processes, same data) and, with mpi in --systems,
# ina-mpi-bench (MPI_Allreduce) launched by mpirun from the switch namespace with one
# "host" per worker namespace (tools/mpi/netns_agent.sh is mpirun's rsh agent); --mpi-alg picks
# OpenMPI's allreduce algorithm (0: its own choice, 4: ring; see below).
#
# System ina-dpdk (--systems ina,ina-dpdk,...): ina again, every worker on the DPDK transport
# (net_af_packet on its own veth end, --no-huge, its own --file-prefix) and a second ina-switchd
# with --io dpdk in the switch namespace, one net_af_packet port per worker-facing veth, at
# 10.77.255.1:47999 (an address no kernel owns: DPDK does the addressing, no ARP). af_packet's
# qdisc bypass is turned off so its frames go through the tbf shapers like the kernel's; the kernel
# still sees a copy of every frame (af_packet taps, it does not steal), so the DPDK addresses
# (10.77.i.3 for worker i) are blackhole routes in the kernels, which drop their copies silently. That switch runs only during the ina-dpdk runs (its af_packet
# sockets would otherwise copy Gloo's and MPI's traffic). Its result must be bit-identical to the
# UDP run's ("fingerprint_equal_udp"). --dpdk-pmd af_xdp uses net_af_xdp instead (XDP on the
# veths; its TX does not pass the qdisc, so the links are NOT shaped for it: a packets/s check,
# not a line-rate one). --dpdk-backoff-us caps the idle-poll back-off of workers and switch
# (default 200), which is what keeps 9 polling processes on a 2-core machine.
#
# Output in --out (default testbed-out/): results.jsonl (one JSON object per run, ina-bench's or
# ina-mpi-bench's line plus "system", "rate_bps", "overhead", "bound_ms", "cpus"), summary.tsv and
# testbed.png beside them (scripts/plot/plot.py testbed; skipped, with a word, without gnuplot).
# Exit status: 0 if every run verified, 1 otherwise, 2 on bad usage or a setup failure.
# Every namespace and process made here is removed on exit, also on failure and on INT/TERM.
set -euo pipefail

WORKERS=4
RATE=200mbit
SIZES="1048576 4194304"
ITERS=3
SYSTEMS=ina,gloo,mpi
WINDOW=256
OVERHEAD=24
OUT=testbed-out
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/netns_star.sh
source "$ROOT/scripts/netns_star.sh"
BUILD=$ROOT/build
TIMEOUT_S=600
SEED=1
MPI_ALG=0
DPDK_PMD=af_packet
DPDK_BACKOFF_US=200
RTO_MIN_US=0
MTU=1500
K=auto
WINDOW_SET=0
SWITCH_CORES=1
SECS=crc

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --workers) WORKERS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --systems) SYSTEMS=$2; shift 2 ;;
    --window) WINDOW=$2; WINDOW_SET=1; shift 2 ;;
    --mtu) MTU=$2; shift 2 ;;
    --k) K=$2; shift 2 ;;
    --switch-cores) SWITCH_CORES=$2; shift 2 ;;
    --sec) SECS=$2; shift 2 ;;
    --overhead) OVERHEAD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --timeout-s) TIMEOUT_S=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --mpi-alg) MPI_ALG=$2; shift 2 ;;
    --dpdk-pmd) DPDK_PMD=$2; shift 2 ;;
    --dpdk-backoff-us) DPDK_BACKOFF_US=$2; shift 2 ;;
    --rto-min-us) RTO_MIN_US=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "testbed: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "testbed: $*" >&2; exit 2; }
[[ $WORKERS =~ ^[0-9]+$ && $WORKERS -ge 1 && $WORKERS -le 64 ]] || die "--workers wants 1..64"
[[ $OVERHEAD =~ ^[0-9]+$ ]] || die "--overhead wants bytes"
[[ $SEED =~ ^[0-9]+$ ]] || die "--seed wants a number"
# OpenMPI coll/tuned allreduce algorithm: 0 the library's own choice, 1 basic linear,
# 2 nonoverlapping, 3 recursive doubling, 4 ring, 5 segmented ring, 6 rabenseifner.
[[ $MPI_ALG =~ ^[0-6]$ ]] || die "--mpi-alg wants 0..6"
[[ $TIMEOUT_S =~ ^[0-9]+$ && $TIMEOUT_S -ge 1 ]] || die "--timeout-s wants seconds"
[[ $DPDK_PMD == af_packet || $DPDK_PMD == af_xdp ]] || die "--dpdk-pmd wants af_packet or af_xdp"
[[ $DPDK_BACKOFF_US =~ ^[0-9]+$ ]] || die "--dpdk-backoff-us wants microseconds"
[[ $MTU =~ ^[0-9]+$ && $MTU -ge 1280 && $MTU -le 9000 ]] || die "--mtu wants 1280..9000"
KEYED=0
for s in ${SECS//,/ }; do
  [[ $s =~ ^(crc|mac|mac_encrypt)$ ]] || die "--sec wants a comma-separated list of crc, mac, mac_encrypt"
  [[ $s != crc ]] && KEYED=1
done
# auto: what libina's default (k 0) picks on these links.
[[ $K == auto ]] && K=$(star_auto_k "$MTU")
[[ $K =~ ^(64|256|512|1024|2048)$ ]] || die "--k wants auto, 64, 256, 512, 1024 or 2048"
((22 + 4 * K + 4 + 28 <= MTU)) || die "--k $K needs frames above --mtu $MTU"
[[ $WINDOW_SET -eq 0 ]] && WINDOW=$(star_window "$K")
# tc's rate syntax, converted to bit/s for the bound.
RATE_BPS=$(awk -v r="$RATE" 'BEGIN {
  n = r + 0; u = tolower(substr(r, length(n "") + 1));
  m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9;
  m["bps"] = 8; m["kbps"] = 8e3; m["mbps"] = 8e6; m["gbps"] = 8e9;
  if (n <= 0 || !(u in m)) exit 1; printf "%.0f", n * m[u] }') ||
  die "--rate wants a tc rate such as 200mbit"
# --rto-min-us auto: the time a full window of data frames takes to cross one shaped link, the
# queueing delay a worker's own window can legitimately see (a smaller RTO fires spuriously).
if [[ $RTO_MIN_US == auto ]]; then
  RTO_MIN_US=$(awk -v w="$WINDOW" -v o="$OVERHEAD" -v r="$RATE_BPS" \
                 -v k="$K" 'BEGIN { printf "%.0f", w * (64 + 4 * k + o) * 8 / r * 1e6 }')
fi
[[ $RTO_MIN_US =~ ^[0-9]+$ ]] || die "--rto-min-us wants microseconds or auto"
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, tc)"
BENCH=$BUILD/bin/ina-bench
SWITCHD=$BUILD/bin/ina-switchd
MPIBENCH=$BUILD/bin/ina-mpi-bench
[[ -x $BENCH && -x $SWITCHD ]] || die "no $BENCH or $SWITCHD (build first)"
has() { [[ ",$SYSTEMS," == *",$1,"* ]]; }
if has mpi && { [[ ! -x $MPIBENCH ]] || ! command -v mpirun > /dev/null; }; then
  echo "testbed: no $MPIBENCH or mpirun (apt install openmpi-bin libopenmpi-dev); skipping MPI" >&2
  SYSTEMS=${SYSTEMS//mpi/}
fi
# (No `ldd | grep -q` under pipefail: grep's early exit makes ldd fail with SIGPIPE now and then.)
if has ina-dpdk && [[ $(ldd "$SWITCHD" 2> /dev/null) != *librte_eal* ]]; then
  echo "testbed: $SWITCHD was built without DPDK; skipping ina-dpdk"
  SYSTEMS=${SYSTEMS//ina-dpdk/}
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ina over UDP sends one datagram per frame: no UDP GSO trains (INA_UDP_GSO, the environment
# override of ina-bench's and ina-switchd's --udp-gso; ina-bench hands it to its workers), because a train crosses a veth as one skb and tbf would charge the
# per-frame --overhead once per train instead of once per frame on the wire.
export INA_UDP_GSO=${INA_UDP_GSO:-0}

PREFIX=inatb$$
SW=$PREFIX-sw
NAMESPACES=()
SWITCH_PID=
DSWITCH_PID=
CHILD=
TMP=$(mktemp -d /tmp/ina-testbed.XXXXXX)

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # The run in progress (ina-bench or mpirun under timeout, which passes the signal on): ina-bench
  # stops its workers on SIGTERM.
  if [[ -n $CHILD ]]; then
    kill -TERM "$CHILD" 2> /dev/null || true
    for _ in $(seq 50); do kill -0 "$CHILD" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$CHILD" 2> /dev/null || true
  fi
  [[ -n $SWITCH_PID ]] && kill "$SWITCH_PID" 2> /dev/null && wait "$SWITCH_PID" 2> /dev/null
  [[ -n $DSWITCH_PID ]] && kill "$DSWITCH_PID" 2> /dev/null && wait "$DSWITCH_PID" 2> /dev/null
  # Anything still running inside our namespaces was started by this script.
  for ns in "${NAMESPACES[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -KILL "$pid" 2> /dev/null || true; done
  done
  for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2> /dev/null || true; done
  rm -rf "$TMP" /var/run/dpdk/"$PREFIX"-*
  exit "$rc"
}
trap cleanup EXIT
# Long runs go to the background and are waited for, so that INT/TERM are handled at once (bash
# runs traps only between foreground commands) and the cleanup can stop them.
run_child() {  # command...; sets rc
  "$@" &
  CHILD=$!
  rc=0
  wait "$CHILD" || rc=$?
  CHILD=
}
trap 'exit 130' INT
trap 'exit 143' TERM

star_up "$SW" "$PREFIX" "$WORKERS" "$RATE" "$OVERHEAD" "$MTU" || die "ip netns add failed"
# ina-dpdk: the kernel gets a copy of every af_packet frame. The DPDK addresses are ones no kernel
# owns (switch 10.77.255.1, worker i 10.77.i.3), routed to a blackhole in the namespace that
# receives them, so the kernel drops its copies silently (no ICMP, no forwarding).
DPDK_SW_IP=10.77.255.1
DPDK_SW_PORT=47999
DPDK_LOCAL_PORT=40000
if has ina-dpdk; then
  for ((i = 0; i < WORKERS; i++)); do ip -n "$PREFIX-w$i" route add blackhole "10.77.$i.3/32"; done
fi
if has ina-dpdk; then ip -n "$SW" route add blackhole "$DPDK_SW_IP/32"; fi
echo "testbed: $WORKERS workers in $PREFIX-w*, switch in $SW, every link $RATE each way" \
     "(+$OVERHEAD B/frame, MTU $MTU), ina K=$K window $WINDOW"

# The switch: every worker reaches it at its own gateway address (10.77.i.1), which is also the
# source of the replies it gets, as its connected UDP socket wants.
[[ $SWITCH_CORES =~ ^[0-9]+$ && $SWITCH_CORES -ge 1 && $SWITCH_CORES -le 16 ]] ||
  die "--switch-cores wants 1..16"
SW_FLAGS=()
((SWITCH_CORES > 1)) && SW_FLAGS=(--cores "$SWITCH_CORES" --core-ports 1)
JOBKEY=$BUILD/bin/ina-jobkey
# A fresh 32-byte secret in hex, in a file only its owner may read.
new_secret() { (umask 077 && rm -f "$1" && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$1"); }
if ((KEYED)); then
  [[ -x $JOBKEY ]] || die "--sec: no $JOBKEY (build first)"
  new_secret "$TMP/admin.key" || die "cannot write $TMP/admin.key"
  SW_FLAGS+=(--admin-key-file "$TMP/admin.key")
fi
star_switch "$SW" "$TMP/switchd.out" "$SWITCHD" "${SW_FLAGS[@]}" || die "ina-switchd did not come up"
star_lists "$PREFIX" "$WORKERS" "$PORT"

RESULTS=$OUT/results.jsonl
: > "$RESULTS"
ALL_OK=1
# Appends a JSON line with the testbed's fields added in front.
record() {  # system bound_ms json [more fields]
  local extra="\"system\": \"$1\", \"rate_bps\": $RATE_BPS, \"overhead\": $OVERHEAD"
  extra+=", \"rto_min_us\": $RTO_MIN_US, \"mtu\": $MTU, \"cpus\": $NCPU"
  extra+=", \"bound_ms\": $2${4:+, $4}"
  echo "{$extra, ${3#\{}" >> "$RESULTS"
}
jnum() { sed -n "s/.*\"$1\": \\(-\\{0,1\\}[0-9.e+-]*\\).*/\\1/p" <<< "$2"; }
# CPU milliseconds (user + system) a process has used so far: ina-switchd's, read before and after
# each ina run, gives the switch's CPU per packet (the scale model's switch cost, docs/scale.md).
cpu_ms() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.0f", ($14 + $15) * 1000 / t }' "/proc/$1/stat" 2> /dev/null || echo 0; }
jstr() { sed -n "s/.*\"$1\": \"\\([^\"]*\\)\".*/\\1/p" <<< "$2"; }
# ina's line-rate bound for an ina-bench line: every frame it sends (payload, headers, exponent
# round) plus the shaper's per-frame overhead, at the link rate; up and down links run in parallel.
ina_bound() {
  awk -v b="$(jnum wire_bytes_per_worker "$1")" -v f="$(jnum wire_frames_per_worker "$1")" \
    -v o="$OVERHEAD" -v r="$RATE_BPS" 'BEGIN { printf "%.4f", (b + f * o) * 8 / r * 1e3 }'
}
NCPU=$(nproc)
# EAL arguments shared by the DPDK workers and switch: no hugepages, no PCI, and lcore 0 allowed
# on every CPU (the scheduler places the polling threads; pinning 9 of them would be worse).
DPDK_EAL="--no-huge -m 192 --no-pci --no-telemetry --log-level=*:warning --lcores 0@(0-$((NCPU - 1)))"
dpdk_vdev() {  # index iface
  if [[ $DPDK_PMD == af_xdp ]]; then
    echo "--vdev net_af_xdp$1,iface=$2,start_queue=0,queue_count=1"
  else
    # Jumbo: 10 KiB frames in the packet ring (the default, 2 KiB, holds a 1500-byte MTU's).
    local jumbo=
    ((MTU > 1500)) && jumbo=",framesz=10240,blocksz=20480"
    echo "--vdev net_af_packet$1,iface=$2,qdisc_bypass=0$jumbo"
  fi
}

# Runs ina over DPDK for n elements: the DPDK switch, the workers, then the switch's counters.
run_ina_dpdk() {  # n udp_fingerprint
  local n=$1 udp_fp=$2 eal swlist= i line port_counters=null
  eal="$DPDK_EAL --file-prefix $PREFIX-swd"
  for ((i = 0; i < WORKERS; i++)); do
    eal+=" $(dpdk_vdev "$i" "s$i")"
    swlist+=${swlist:+,}$DPDK_SW_IP:$DPDK_SW_PORT
  done
  ip netns exec "$SW" "$SWITCHD" --bind "$DPDK_SW_IP" --port "$DPDK_SW_PORT" --dpdk "$eal" \
    --dpdk-backoff-us "$DPDK_BACKOFF_US" --dpdk-mtu "$MTU" > "$TMP/dswitchd.out" 2>&1 &
  DSWITCH_PID=$!
  for _ in $(seq 300); do
    grep -q ' listening on ' "$TMP/dswitchd.out" && break
    kill -0 "$DSWITCH_PID" 2> /dev/null || break
    sleep 0.1
  done
  if ! grep -q ' listening on ' "$TMP/dswitchd.out"; then
    echo "testbed: ina-switchd --io dpdk did not come up:" >&2
    cat "$TMP/dswitchd.out" >&2
    kill "$DSWITCH_PID" 2> /dev/null; wait "$DSWITCH_PID" 2> /dev/null; DSWITCH_PID=
    ALL_OK=0
    return
  fi
  local args=(--workers "$WORKERS" --elements "$n" --iters "$ITERS" --window "$WINDOW" --k "$K"
              --seed "$SEED" --quiet --no-gloo --worker-netns "$NSLIST" --worker-switch "$swlist"
              --worker-addr "$ADDRLIST" --timeout-s "$TIMEOUT_S" --transport dpdk
              --dpdk-eal "$DPDK_EAL --file-prefix $PREFIX-w{rank} $(dpdk_vdev 0 'w{rank}')"
              --dpdk-local "10.77.{rank}.3:$DPDK_LOCAL_PORT" --dpdk-backoff-us "$DPDK_BACKOFF_US"
              --dpdk-mtu "$MTU"
              --rto-min-us "$RTO_MIN_US")
  echo "testbed: ina-dpdk ($DPDK_PMD), $n floats ..."
  run_child timeout -k 5 $((TIMEOUT_S + 30)) "$BENCH" "${args[@]}" > "$TMP/bench.out" \
    2> "$TMP/bench.err"
  kill -TERM "$DSWITCH_PID" 2> /dev/null
  wait "$DSWITCH_PID" 2> /dev/null || true
  DSWITCH_PID=
  port_counters=$(sed -n 's/^{"port_counters": \(.*\)}$/\1/p' "$TMP/dswitchd.out" | tail -1)
  line=$(grep '^{' "$TMP/bench.out" | tail -1 || true)
  if [[ $rc -ne 0 || -z $line ]]; then
    ALL_OK=0
    echo "testbed: ina-bench (dpdk) failed (rc $rc):" >&2
    tail -20 "$TMP/bench.err" >&2
  fi
  [[ -n $line ]] || return
  local fp same=null
  fp=$(jstr fingerprint "$line")
  if [[ -n $udp_fp ]]; then
    [[ $fp == "$udp_fp" ]] && same=true || same=false
    [[ $same == true ]] || { ALL_OK=0; echo "testbed: ina-dpdk result differs from UDP's" >&2; }
  fi
  record ina-dpdk "$(ina_bound "$line")" "$line" \
    "\"dpdk_pmd\": \"$DPDK_PMD\", \"fingerprint_equal_udp\": $same, \"port_counters\": ${port_counters:-null}"
  echo "  ina-dpdk $(jnum ina_ms_median "$line") ms (bound $(ina_bound "$line") ms)," \
       "verified $(sed -n 's/.*"verified": \([a-z]*\).*/\1/p' <<< "$line"), same as UDP: $same"
}

# A fresh secret for job $1 in mode $2, installed in the switch (from the first worker's namespace,
# which reaches it at 10.77.0.1); INA_JOB_KEY names it for the workers ina-bench starts.
JOB_SEQ=0
install_job_key() {  # job mode
  new_secret "$TMP/job.key" || return 1
  ip netns exec "$PREFIX-w0" "$JOBKEY" --switch "10.77.0.1:$PORT" --admin-key-file "$TMP/admin.key" \
    --job "$1" --secret-file "$TMP/job.key" --mode "$2" --cores "$SWITCH_CORES" > /dev/null || return 1
  export INA_JOB_KEY=$TMP/job.key
}

for n in $SIZES; do
  udp_fp=
  first_sec=1
  for sec in ${SECS//,/ }; do
    if has ina || has gloo; then
      args=(--workers "$WORKERS" --elements "$n" --iters "$ITERS" --window "$WINDOW" --k "$K"
            --seed "$SEED"
            --quiet
            --worker-netns "$NSLIST" --worker-switch "$SWLIST" --worker-addr "$ADDRLIST"
            --timeout-s "$TIMEOUT_S" --rto-min-us "$RTO_MIN_US" --sec "$sec")
      { has gloo && ((first_sec)); } || args+=(--no-gloo)
      ((SWITCH_CORES > 1)) && args+=(--switch-cores "$SWITCH_CORES")
      if [[ $sec != crc ]]; then
        JOB_SEQ=$((JOB_SEQ + 1))
        args+=(--job $((4000 + JOB_SEQ)))
        install_job_key $((4000 + JOB_SEQ)) "$sec" || {
          ALL_OK=0
          echo "testbed: ina-jobkey could not install the key of job $((4000 + JOB_SEQ))" >&2
          first_sec=0
          continue
        }
      fi
      echo "testbed: ina ($sec)$(has gloo && ((first_sec)) && echo " + gloo"), $n floats ..."
      cpu0=$(cpu_ms "$SWITCH_PID")
      run_child timeout -k 5 $((TIMEOUT_S + 30)) "$BENCH" "${args[@]}" > "$TMP/bench.out" \
        2> "$TMP/bench.err"
      switch_cpu_ms=$(($(cpu_ms "$SWITCH_PID") - cpu0))
      line=$(grep '^{' "$TMP/bench.out" | tail -1 || true)
      if [[ $rc -ne 0 || -z $line ]]; then
        ALL_OK=0
        echo "testbed: ina-bench failed (rc $rc):" >&2
        cat "$TMP/bench.err" >&2
      fi
      if [[ -n $line ]]; then
        bound=$(ina_bound "$line")
        # Every mode must give the first's bits (the same data; the tag changes no sum).
        same_first=null
        if ((first_sec)); then
          udp_fp=$(jstr fingerprint "$line")
        else
          [[ $(jstr fingerprint "$line") == "$udp_fp" ]] && same_first=true || same_first=false
          [[ $same_first == true ]] || { ALL_OK=0; echo "testbed: ina ($sec) result differs" >&2; }
        fi
        # The first mode's run is system "ina" (the summary's and the plot's), the others
        # "ina-<mode>" beside it.
        sys=ina
        ((first_sec)) || sys=ina-$sec
        record "$sys" "$bound" "$line" \
          "\"switch_cpu_ms\": $switch_cpu_ms, \"fingerprint_equal_first\": $same_first"
        ina_ms=$(jnum ina_ms_median "$line")
        gloo_ms=$(jnum gloo_ms_median "$line")
        echo "  ina ($sec) $ina_ms ms (bound $bound ms), gloo $gloo_ms ms," \
             "verified $(sed -n 's/.*"verified": \([a-z]*\).*/\1/p' <<< "$line")"
      fi
    fi
  first_sec=0
  done
  if has ina-dpdk; then run_ina_dpdk "$n" "$udp_fp"; fi
  if has mpi; then
    echo "testbed: mpi, $n floats ..."
    hosts=
    for ((i = 0; i < WORKERS; i++)); do hosts+=${hosts:+,}$PREFIX-w$i; done
    # mpirun runs in the switch namespace (it reaches every worker namespace through its veth);
    # the agent starts each orted in its worker namespace; ranks use TCP on the shaped links only.
    run_child env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout -k 5 "$TIMEOUT_S" ip netns exec "$SW" mpirun --allow-run-as-root \
      --host "$hosts" -np "$WORKERS" --map-by node \
      --mca plm_rsh_agent "$ROOT/tools/mpi/netns_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/16 \
      --mca oob_tcp_if_include 10.77.0.0/16 --mca pml ob1 \
      --mca coll_tuned_use_dynamic_rules $((MPI_ALG > 0)) \
      --mca coll_tuned_allreduce_algorithm "$MPI_ALG" \
      "$MPIBENCH" --elements "$n" --iters "$ITERS" --seed "$SEED" > "$TMP/mpi.out" 2> "$TMP/mpi.err"
    line=$(grep '^{' "$TMP/mpi.out" | tail -1 || true)
    if [[ $rc -ne 0 || -z $line ]]; then
      ALL_OK=0
      echo "testbed: ina-mpi-bench failed (rc $rc):" >&2
      tail -20 "$TMP/mpi.err" >&2
    else
      record mpi -1 "{\"mpi_alg\": $MPI_ALG, ${line#\{}"
      echo "  mpi $(jnum mpi_ms_median "$line") ms," \
           "verified $(sed -n 's/.*"verified": \([a-z]*\).*/\1/p' <<< "$line")"
    fi
  fi
done

# Summary table: elements, ina (the first --sec mode), bound, gloo, mpi, ina-dpdk, then ina in each
# further --sec mode (ms; -1 where not run).
MORE_SECS=$(tr ',' ' ' <<< "$SECS" | cut -s -d' ' -f2-)
{
  hdr="# elements\tina_ms\tbound_ms\tgloo_ms\tmpi_ms\tina_dpdk_ms"
  for s in $MORE_SECS; do hdr+="\tina_${s}_ms"; done
  echo -e "$hdr\tworkers=$WORKERS rate=$RATE mtu=$MTU k=$K sec=$SECS"
  for n in $SIZES; do
    i=$(grep "\"system\": \"ina\"" "$RESULTS" | grep "\"elements\": $n," | tail -1 || true)
    m=$(grep "\"system\": \"mpi\"" "$RESULTS" | grep "\"elements\": $n," | tail -1 || true)
    d=$(grep "\"system\": \"ina-dpdk\"" "$RESULTS" | grep "\"elements\": $n," | tail -1 || true)
    b=$(jnum bound_ms "$i")
    printf "%s\t%s\t%s\t%s\t%s\t%s" "$n" "$(jnum ina_ms_median "$i")" "${b:-$(jnum bound_ms "$d")}" \
      "$(jnum gloo_ms_median "$i")" "$(jnum mpi_ms_median "$m")" "$(jnum ina_ms_median "$d")"
    for s in $MORE_SECS; do
      x=$(grep "\"system\": \"ina-$s\"" "$RESULTS" | grep "\"elements\": $n," | tail -1 || true)
      printf "\t%s" "$(jnum ina_ms_median "$x")"
    done
    printf "\n"
  done
} | sed 's/\t\t/\t-1\t/g; s/\t\t/\t-1\t/g; s/\t$/\t-1/' > "$OUT/summary.tsv"
cat "$OUT/summary.tsv"
python3 "$ROOT/scripts/plot/plot.py" testbed "$OUT/testbed.png" "$RESULTS" ||
  echo "testbed: no plot (the runs' results stand)" >&2
if grep -q '"verified": false' "$RESULTS"; then ALL_OK=0; fi
[[ $ALL_OK -eq 1 ]] && echo "testbed: all runs verified" || echo "testbed: FAILED" >&2
[[ $ALL_OK -eq 1 ]]
