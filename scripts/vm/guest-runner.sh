# guest-runner.sh: runs inside the VM (chroot). Sets up the soft-RoCE network once, then runs every
# /share/tests/[0-9]*.sh (in name order; /share/only filters by regex), each bounded by a timeout, with
# its log in /share/results/<name>.log and a line in /share/results/summary.txt.
#
# Network (rdma_rxe in 6.1 only works on netdevs of the initial namespace, so both rxe devices
# live there; the "switch" lives in netns sw):
#   vA0 (init ns, rxe0, 10.0.1.1) <-> vA1 (netns sw, 10.0.1.2)
#   vB0 (init ns, rxe1, 10.0.2.1) <-> vB1 (netns sw, 10.0.2.2)
# Policy routing sends rxe0<->rxe1 traffic out through sw (forwarding on) instead of via lo.
# Tests get: RXE_GID_rxe0 / RXE_GID_rxe1 (the RoCE v2 IPv4 GID index), INA_BUILD=/build.
R=/share/results
T() { cut -d' ' -f1 /proc/uptime; }
gidx() {  # the RoCE v2 IPv4-mapped GID index of device $1
  for f in /sys/class/infiniband/$1/ports/1/gids/*; do
    i=${f##*/}
    case "$(cat $f)" in 0000:0000:0000:0000:0000:ffff:*)
      [ "$(cat /sys/class/infiniband/$1/ports/1/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ] && { echo $i; return; } ;;
    esac
  done; echo 1
}
echo "[guest] runner start at $(T)s"
{
  set -x
  ip link set lo up; ip netns add sw; ip -n sw link set lo up
  for x in A:1 B:2; do n=${x%:*}; s=${x#*:}
    # MTU 9000: rxe's active MTU becomes 4096, so one ina frame (22 + 4*256 bytes) is one packet.
    ip link add v${n}0 mtu 9000 type veth peer name v${n}1 mtu 9000; ip link set v${n}1 netns sw
    ip addr add 10.0.$s.1/24 dev v${n}0; ip link set v${n}0 up
    ip -n sw addr add 10.0.$s.2/24 dev v${n}1; ip -n sw link set v${n}1 up
  done
  ip netns exec sw sysctl -qw net.ipv4.ip_forward=1
  ip rule add pref 10 iif lo to 10.0.2.1 lookup 100
  ip route add 10.0.2.1 via 10.0.1.2 dev vA0 src 10.0.1.1 table 100
  ip rule add pref 11 iif lo to 10.0.1.1 lookup 101
  ip route add 10.0.1.1 via 10.0.2.2 dev vB0 src 10.0.2.1 table 101
  ip rule add pref 1000 lookup local; ip rule del pref 0
  for i in all default vA0 vB0; do
    sysctl -qw net.ipv4.conf.$i.accept_local=1 net.ipv4.conf.$i.rp_filter=0
  done
  rdma link add rxe0 type rxe netdev vA0
  rdma link add rxe1 type rxe netdev vB0
  rdma link show; ibv_devices
  # Resolve the neighbours now: while ARP is pending the kernel queues only unres_qlen_bytes
  # (~94 RoCE packets of 1 KiB) and drops the rest of a first burst (seen: 94 of 200 UD SENDs).
  ping -c 1 -W 5 10.0.1.2; ping -c 1 -W 5 10.0.2.2
  set +x
} > $R/setup.log 2>&1
export RXE_GID_rxe0=$(gidx rxe0) RXE_GID_rxe1=$(gidx rxe1) INA_BUILD=/build INA_SRC=/src
echo "rxe0 gid $RXE_GID_rxe0, rxe1 gid $RXE_GID_rxe1" >> $R/setup.log
echo "[guest] network ready at $(T)s"
ONLY=$(cat /share/only 2>/dev/null)
: > $R/summary.txt
FAILS=0
for t in /share/tests/[0-9]*.sh; do
  name=$(basename $t .sh)
  if [ -n "$ONLY" ] && ! echo "$name" | grep -qE "$ONLY"; then continue; fi
  t0=$(T)
  timeout -k 5 ${GUEST_TEST_TIMEOUT:-240} bash $t > $R/$name.log 2>&1
  rc=$?
  echo $rc > $R/$name.rc
  if [ $rc = 0 ]; then r=PASS; else r="FAIL(rc=$rc)"; FAILS=$((FAILS + 1)); fi
  line="$r $name ($(awk "BEGIN{printf \"%.1f\", $(T) - $t0}")s)"
  echo "[guest] $line"
  echo "$line" >> $R/summary.txt
done
dmesg > $R/dmesg.txt 2>&1
echo "[guest] done at $(T)s"
[ $FAILS -gt 0 ] && exit 1
exit 0
