# ina-switchd's RoCE port (--io roce, netns sw, 10.0.1.2:4791) with 4 ina-bench workers on rxe
# devices (ranks 0, 2 on rxe0; 1, 3 on rxe1), each a communicator over the verbs transport:
#  1. float and int32 all-reduces with loss injected at the switch (its FaultPort drops 1% of the
#     ina packets each way: ina's own recovery resends), verified by ina-bench (exact quantized
#     sum, bit-identical ranks) and bit-identical to the fingerprint of the same run over UDP
#     (ina-bench's own switch on loopback, same seed and sizes); then the float run through a
#     memory domain, its payloads sent from the domain's NIC buffer (GPUDirect RDMA's path);
#  2. a worker killed mid-run: the others end with an error within a bound, not a hang;
#  4. the float run again through --io roce --dpdk (net_af_packet) from a third rxe device;
#  3. (sent first, at the same switch) bad RoCE packets (wrong QPN, repeated PSN, wrong opcode,
#     bad ICRC, short, wrong Q_Key): each counted once under its roce_* counter, none reaching the
#     engine as data, none counted from the real rxe traffic.
# Prints WORKER lines: packets/s of a worker (ina-bench's ina_pps) beside 20_perftest_ceiling's,
# and STAGE lines (guest uptime) to see where the time goes.
set -u
. /share/tests/lib.sh
B=$INA_BUILD/bin
for f in $B/ina-switchd $B/ina-bench; do
  [ -x $f ] || { echo "FAIL: $f not built"; exit 1; }
done
W=$(mktemp -d /tmp/roce.XXXXXX)
fails=0
stage() { echo "STAGE $(cut -d' ' -f1 /proc/uptime)s: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# rxe1 (10.0.2.1) reaches the switch's 10.0.1.2 through sw too (not out of vA0 with a foreign
# source address).
ip rule add pref 12 from 10.0.2.1 to 10.0.1.2 lookup 102
ip route add 10.0.1.2 via 10.0.2.2 dev vB0 src 10.0.2.1 table 102
cleanup() {
  [ -n "${SWP:-}" ] && kill $SWP 2>/dev/null
  ip rule del pref 12 2>/dev/null; ip route flush table 102 2>/dev/null
}
trap cleanup EXIT

start_switch() {  # start_switch LOG [flags]: ina-switchd --io roce in sw, until it listens
  local log=$1; shift
  ip netns exec sw $B/ina-switchd --io roce --bind 10.0.1.2 --job-timeout-ms 3000 "$@" > $log 2>&1 &
  SWP=$!
  for i in $(seq 100); do grep -q "listening on" $log && return 0; sleep 0.1; done
  echo "switch did not start:"; cat $log; return 1
}
stop_switch() {  # stop_switch: SIGTERM, wait; its JSON counters are the last line of its log
  kill -TERM $SWP; wait $SWP; local rc=$?; SWP=
  return $rc
}
counter() { grep -o "\"$2\": [0-9]*" $1 | tail -1 | grep -o '[0-9]*$'; }
json() { grep -o "\"$2\": [^,}]*" $1 | tail -1 | sed 's/.*: //; s/"//g'; }

# run_verbs TAG PORT ARGS...: the parent on 127.0.0.1:PORT and 4 workers on rxe0/rxe1 (rank r on
# rxe(r % 2)) to the switch at 10.0.1.2; VERBS_SWITCH and VERBS_DEVS (one device for all) change
# both.
run_verbs() {
  local tag=$1 port=$2; shift 2
  $B/ina-bench --listen 127.0.0.1:$port --switch ${VERBS_SWITCH:-10.0.1.2}:4791 --transport verbs --workers 4 \
    --k $K --no-gloo --timeout-s 60 "$@" > $W/$tag.parent 2>&1 & local pp=$!
  local pids="" r dev
  for r in 0 1 2 3; do
    dev=${VERBS_DEVS:-rxe$((r % 2))}; eval gid=\$RXE_GID_$dev
    INA_VERBS_DEVICE=$dev INA_VERBS_GID=$gid timeout 70 $B/ina-bench --role worker \
      --coordinator 127.0.0.1:$port --rank $r > $W/$tag.w$r 2>&1 & pids="$pids $!"
    echo $! > $W/$tag.pid$r
  done
  wait $pp; local prc=$?
  for p in $pids; do wait $p; done
  return $prc
}

# Window 64: rxe under emulation drains slowly, and the veths' backlog (netdev_max_backlog 1000)
# drops what 4 x 256 slots in flight would send at once (ina recovers, slowly).
# K pinned: the fingerprints below compare RoCE with UDP on loopback, where --k auto would differ.
ELEMS=16384 ITERS=1 SEED=11 WIN=64 K=256
stage start
# 1. float and int32 over RoCE with loss, against the UDP fingerprint.
start_switch $W/sw1.log --drop-rate 0.01 --seed 3 || exit 1
# 3. (first, on the same switch) Bad RoCE packets: 6 kinds, each from a UDP socket in the initial
# namespace (DF: IP ID 0, so the ICRC of the datagram the kernel emits is known), after one good
# one (QP 0x777, a garbage ina message) that opens its PSN sequence.
python3 - <<'EOF'
import socket, struct, zlib
SW, ME = "10.0.1.2", "10.0.1.1"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF, IP ID 0
s.bind((ME, 0))
sport = s.getsockname()[1]
def ip4(a): return socket.inet_aton(a)
def pkt(op=0x64, qpn=0x100, psn=0, qkey=0x494E4100, payload=b"\0" * 28, bad_icrc=False, cut=0):
    body = struct.pack(">BBHII", op, 0, 0xFFFF, qpn, psn) + struct.pack(">II", qkey, 0x777) + payload
    udp_len = 8 + len(body) + 4
    iph = struct.pack(">BBHHHBBH4s4s", 0x45, 0xFF, 20 + udp_len, 0, 0x4000, 0xFF, 17, 0xFFFF, ip4(ME), ip4(SW))
    udph = struct.pack(">HHHH", sport, 4791, udp_len, 0xFFFF)
    bth = bytearray(body); bth[4] = 0xFF
    icrc = zlib.crc32(b"\xff" * 8 + iph + udph + bytes(bth)) ^ (1 if bad_icrc else 0)
    out = body + struct.pack("<I", icrc)
    return out[:len(out) - cut] if cut else out
send = lambda b: s.sendto(b, (SW, 4791))
send(pkt(psn=5))                 # accepted (garbage ina message: the engine counts it malformed)
send(pkt(psn=5))                 # roce_bad_psn (a repeat)
send(pkt(psn=6, qpn=0x101))      # roce_wrong_qpn
send(pkt(psn=6, op=0x65))        # roce_bad_opcode
send(pkt(psn=6, bad_icrc=True))  # roce_bad_icrc
send(pkt(psn=6, qkey=0x80010000))  # roce_bad_key
send(pkt(psn=6)[:10])            # roce_short
print("sent 7 crafted RoCE packets from %s:%d" % (ME, sport))
EOF
for dt in float int32; do
  port=47101; [ $dt = int32 ] && port=47102
  stage "$dt over RoCE"
  run_verbs $dt $port --elements $ELEMS --iters $ITERS --seed $SEED --dtype $dt --window $WIN \
    --rto-initial-us 20000; rc=$?
  tail -3 $W/$dt.parent
  stage "$dt over UDP"
  $B/ina-bench --workers 4 --elements $ELEMS --iters $ITERS --seed $SEED --dtype $dt --k $K --no-gloo \
    --window $WIN --rto-initial-us 20000 --quiet > $W/$dt.udp 2>&1 || fail "$dt: the UDP reference run failed: $(tail -2 $W/$dt.udp)"
  v=$(json $W/$dt.parent verified) fv=$(json $W/$dt.parent fingerprint) fu=$(json $W/$dt.udp fingerprint)
  echo "$dt: rc=$rc verified=$v fingerprint roce=$fv udp=$fu retransmissions=$(json $W/$dt.parent retransmissions)"
  [ $rc = 0 ] && [ "$v" = true ] || { fail "$dt over RoCE"; for r in 0 1 2 3; do grep -v "^  --" $W/$dt.w$r | tail -5; done; }
  [ -n "$fv" ] && [ "$fv" = "$fu" ] || fail "$dt: fingerprint over RoCE ($fv) != over UDP ($fu)"
  echo "WORKER ina verbs worker via ina-switchd --io roce ($dt, 4 workers, K=256, 1% drop): $(json $W/$dt.parent ina_pps) pkt/s per worker, $(json $W/$dt.parent ina_ms_median) ms per all-reduce of $ELEMS"
done
# 1b. The float run again through a memory domain (--memory host-async, HostDomain): GPUDirect
# RDMA's send path on rxe (each block's payload posted from the domain's NIC buffer in a gather
# list, its trailer sealed by combining the header's CRC with the domain's payload CRC), under the
# same 1% loss; the fingerprint must be the UDP run's, and the bad-packet counters below must not
# move (a wrong ICRC or trailer from a gather list would).
stage "float over RoCE from the NIC buffer"
run_verbs gdr 47105 --elements $ELEMS --iters $ITERS --seed $SEED --dtype float --window $WIN \
  --rto-initial-us 20000 --memory host-async; rc=$?
tail -3 $W/gdr.parent
v=$(json $W/gdr.parent verified) fg=$(json $W/gdr.parent fingerprint) fu=$(json $W/float.udp fingerprint)
pd=$(json $W/gdr.parent worker_packets_from_device)
echo "float from the NIC buffer: rc=$rc verified=$v fingerprint=$fg udp=$fu packets_from_device=$pd"
[ $rc = 0 ] && [ "$v" = true ] || { fail "float from the NIC buffer"; for r in 0 1 2 3; do grep -v "^  --" $W/gdr.w$r | tail -5; done; }
[ -n "$fg" ] && [ "$fg" = "$fu" ] || fail "fingerprint from the NIC buffer ($fg) != over UDP ($fu)"
[ "${pd:-0}" -gt 0 ] || fail "no packet left from the NIC buffer (worker_packets_from_device=${pd:-missing})"
grep -h "GPUDirect RDMA off" $W/gdr.w* && fail "a worker fell back to host staging"
stop_switch || fail "switch exit status"
tail -1 $W/sw1.log
echo "switch: tx_packets=$(counter $W/sw1.log tx_packets) tx_errors=$(counter $W/sw1.log tx_errors) roce_psn_gaps=$(counter $W/sw1.log roce_psn_gaps) result_resends=$(counter $W/sw1.log result_resends)"
inj=$(( $(counter $W/sw1.log inj_rx_drops) + $(counter $W/sw1.log inj_tx_drops) ))
[ "$inj" -gt 0 ] || fail "no loss was injected"
[ "$(counter $W/sw1.log results)" -gt 0 ] || fail "switch: no results"
# Each bad kind exactly once: the crafted ones, none from real rxe traffic.
for c in roce_bad_psn roce_wrong_qpn roce_bad_opcode roce_bad_icrc roce_bad_key roce_short; do
  n=$(counter $W/sw1.log $c); echo "$c=$n"
  [ "$n" = 1 ] || fail "$c is ${n:-missing}, want 1"
done
bad=$(( $(counter $W/sw1.log drop_malformed) + $(counter $W/sw1.log drop_bad_version) ))
[ $bad -le 1 ] || fail "$bad engine drops of malformed messages, want at most the crafted one"

# 4. RoCE over DPDK: the float run again, through ina-switchd --io roce --dpdk on net_af_packet
# (vC1 in netns swd, no kernel address there: DPDK does the addressing and answers no ARP, so
# vC0 has a permanent neighbour entry for vC1's MAC), 4 workers on rxe2 (vC0, 10.0.3.1), loss
# injected at the switch; the fingerprint must be the UDP run's.
stage "float over RoCE over DPDK"
mkdir -p /var/run/dpdk  # the EAL's runtime directory (the guest root has no /var/run)
chmod go-w /  # the EAL loads no PMD from under a world-writable directory (the guest's / is)
ip netns add swd; ip link add vC0 mtu 9000 type veth peer name vC1 mtu 9000
ip link set vC1 netns swd; ip addr add 10.0.3.1/24 dev vC0; ip link set vC0 up
ip -n swd link set lo up; ip -n swd link set vC1 up
sysctl -qw net.ipv4.conf.vC0.rp_filter=0
ip neigh replace 10.0.3.2 lladdr $(ip netns exec swd cat /sys/class/net/vC1/address) dev vC0 nud permanent
rdma link add rxe2 type rxe netdev vC0
for f in /sys/class/infiniband/rxe2/ports/1/gids/*; do
  case "$(cat $f)" in 0000:0000:0000:0000:0000:ffff:*)
    [ "$(cat /sys/class/infiniband/rxe2/ports/1/gid_attrs/types/${f##*/} 2>/dev/null)" = "RoCE v2" ] \
      && { RXE_GID_rxe2=${f##*/}; break; } ;;
  esac
done
echo "rxe2 gid ${RXE_GID_rxe2:-none}"
ip netns exec swd $B/ina-switchd --io roce --bind 10.0.3.2 --job-timeout-ms 3000 --drop-rate 0.01 \
  --seed 3 --dpdk-backoff-us 200 --dpdk "--no-huge -m 128 --no-pci --no-telemetry --file-prefix inaswd \
  -l 0 --log-level=*:warning --vdev net_af_packet0,iface=vC1" > $W/sw3.log 2>&1 &
SWP=$!
for i in $(seq 200); do grep -q "listening on" $W/sw3.log && break; kill -0 $SWP 2>/dev/null || break; sleep 0.1; done
if ! grep -q "listening on" $W/sw3.log; then
  fail "the switch on DPDK did not start: $(tail -5 $W/sw3.log)"; kill $SWP 2>/dev/null; SWP=
else
  VERBS_SWITCH=10.0.3.2 VERBS_DEVS=rxe2 run_verbs dpdk 47103 --elements $ELEMS --iters $ITERS \
    --seed $SEED --dtype float --window $WIN --rto-initial-us 20000; rc=$?
  tail -3 $W/dpdk.parent
  v=$(json $W/dpdk.parent verified) fv=$(json $W/dpdk.parent fingerprint) fu=$(json $W/float.udp fingerprint)
  echo "float over RoCE over DPDK: rc=$rc verified=$v fingerprint=$fv udp=$fu retransmissions=$(json $W/dpdk.parent retransmissions)"
  [ $rc = 0 ] && [ "$v" = true ] || { fail "float over RoCE over DPDK"; grep -h -i -E "error|fail|unavail|denied|timeout|exceeded" $W/dpdk.w0 $W/dpdk.parent | head; }
  [ -n "$fv" ] && [ "$fv" = "$fu" ] || fail "fingerprint over RoCE over DPDK ($fv) != over UDP ($fu)"
  echo "WORKER ina verbs worker via ina-switchd --io roce --dpdk (af_packet; float, 4 workers on one rxe, 1% drop): $(json $W/dpdk.parent ina_pps) pkt/s per worker"
  stop_switch || fail "switch (DPDK) exit status"
  grep "port_counters" $W/sw3.log | tail -1
  tail -1 $W/sw3.log
  inj=$(( $(counter $W/sw3.log inj_rx_drops) + $(counter $W/sw3.log inj_tx_drops) ))
  [ "$inj" -gt 0 ] || fail "DPDK switch: no loss was injected"
  [ "$(counter $W/sw3.log roce_bad_icrc)" = 0 ] || fail "DPDK switch: bad ICRCs from rxe"
fi
rdma link del rxe2; ip link del vC0; ip netns del swd

# 2. A worker killed: ina-bench's failure drill (rank 3 raises SIGKILL 1 s into an all-reduce);
# every survivor's communicator must return an error (the switch aborts the job, or the progress
# timeout fires), within the progress timeout and slack, never hang.
stage "kill drill"
start_switch $W/sw2.log || exit 1
t0=$(date +%s)
run_verbs kill 47200 --elements 262144 --iters 1 --seed $SEED --window $WIN --kill-rank 3 \
  --kill-after-ms 1000 --progress-timeout-ms 2000; rc=$?
el=$(( $(date +%s) - t0 ))
grep -E "rank [0-9]:|every surviving" $W/kill.parent
echo "kill: parent rc=$rc after ${el}s, survivors_failed=$(json $W/kill.parent survivors_failed) max_error_ms=$(json $W/kill.parent max_error_ms)"
[ $rc = 0 ] && [ "$(json $W/kill.parent survivors_failed)" = true ] || fail "a survivor did not fail"
ms=$(json $W/kill.parent max_error_ms); ms=${ms%.*}
[ -n "$ms" ] && [ "$ms" -le 12000 ] || fail "survivors failed after ${ms} ms (bound 12000: 2000 progress timeout + emulation slack)"
stop_switch || fail "switch exit status"

stage done
rm -rf $W
exit $fails
