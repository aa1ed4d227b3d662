# Two rxe devices reach each other through netns sw (policy routing): UD and UC pingpong between
# rxe0 and rxe1 with the stock rdma-core programs; the active MTU is 4096 (veth MTU 9000).
set -u
. /share/tests/lib.sh
for d in rxe0 rxe1; do
  mtu=$(ibv_devinfo -d $d | awk '/active_mtu/{print $2}')
  echo "$d active_mtu $mtu"
  [ "$mtu" = 4096 ] || { echo "FAIL: $d active MTU $mtu, want 4096"; exit 1; }
done
pp() {  # pp PROG PORT ARGS...: server on rxe0, client on rxe1
  local prog=$1 port=$2; shift 2
  timeout 60 $prog -d rxe0 -g $RXE_GID_rxe0 -p $port "$@" & local sp=$!
  wait_listen $port $sp || return 1
  timeout 60 $prog -d rxe1 -g $RXE_GID_rxe1 -p $port "$@" 127.0.0.1; local crc=$?
  wait $sp; local src=$?
  echo "$prog: server rc=$src client rc=$crc"
  [ $src = 0 ] && [ $crc = 0 ]
}
pp ibv_ud_pingpong 18520 -n 200 -s 2048 || exit 1
pp ibv_uc_pingpong 18519 -n 200 || exit 1
# the packets really crossed netns sw (forwarded), not a loopback short-cut
fwd=$(ip netns exec sw cat /proc/net/snmp | awk '/^Ip: [0-9]/{print $7}')
echo "netns sw forwarded datagrams: $fwd"
[ "$fwd" -ge 400 ] || { echo "FAIL: only $fwd datagrams forwarded by sw"; exit 1; }
