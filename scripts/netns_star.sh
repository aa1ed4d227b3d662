# Sourced by scripts/testbed.sh, torch_testbed.sh and sharing_testbed.sh: the rate-limited star of
# network namespaces they run on (the layout is described at the head of testbed.sh), the switch in
# its middle, and the per-worker lists ina-bench takes.
#
#   star_up SW PREFIX WORKERS RATE OVERHEAD [MTU]
# makes namespace SW (forwarding on) and PREFIX-w0 .. PREFIX-w<WORKERS-1>; worker i has a veth
# pair w<i> (10.77.i.2/24, its side) <-> s<i> (10.77.i.1/24, SW's side) of MTU bytes (default
# 1500; 9000: jumbo frames, for every system alike), GSO off (no super-packet above one MTU), and
# every direction shaped by tc tbf to RATE counting OVERHEAD bytes per frame. Each namespace is appended
# to the caller's NAMESPACES array as soon as it exists, so the caller's cleanup removes what was
# made even when a later step fails.
star_up() {
  local sw=$1 prefix=$2 workers=$3 rate=$4 overhead=$5 mtu=${6:-1500} i ns
  ip netns add "$sw" || return 1
  NAMESPACES+=("$sw")
  ip -n "$sw" link set lo up
  ip netns exec "$sw" sysctl -q -w net.ipv4.ip_forward=1
  for ((i = 0; i < workers; i++)); do
    ns=$prefix-w$i
    ip netns add "$ns"
    NAMESPACES+=("$ns")
    ip -n "$ns" link set lo up
    ip link add "w$i" netns "$ns" type veth peer name "s$i" netns "$sw"
    ip -n "$ns" addr add "10.77.$i.2/24" dev "w$i"
    ip -n "$sw" addr add "10.77.$i.1/24" dev "s$i"
    ip -n "$ns" link set "w$i" mtu "$mtu" gso_max_size "$mtu" up
    ip -n "$sw" link set "s$i" mtu "$mtu" gso_max_size "$mtu" up
    ip -n "$ns" route add default via "10.77.$i.1"
    star_shape "$ns" "w$i" "$rate" "$overhead"
    star_shape "$sw" "s$i" "$rate" "$overhead"
  done
}

# tbf: burst 64 KiB (well above rate/HZ at these rates, and above a jumbo frame), queue up to 2 MiB
# (more than a window of ina packets: 256 x 1 KiB, or 128 x 8 KiB at K=2048, what testbed.sh
# uses with --mtu 9000; so ina never loses packets to the shaper; TCP fills it, as it would a
# switch port).
star_shape() {
  tc -n "$1" qdisc add dev "$2" root tbf rate "$3" burst 64kb limit 2mb overhead "$4" \
    mpu $((60 + $4))
}

#   star_auto_k MTU / star_window K
# print the elements per packet libina picks on links of MTU bytes by default (k 0: the largest K
# of proto/ina.toml whose message, 22 header + 4K + 4 trailer bytes, fits an IPv4/UDP datagram of
# the MTU), and the window the testbeds give K (256 slots, or 1 MiB in flight above K=256: below
# the shapers' 2 MiB queues, so ina never loses packets to them).
star_auto_k() {
  local k best=0
  for k in 64 256 512 1024 2048; do ((22 + 4 * k + 4 + 28 <= $1)) && best=$k; done
  echo "$best"
}
star_window() {
  if (($1 > 256)); then echo $((1048576 / (4 * $1))); else echo 256; fi
}

#   star_switch SW OUT SWITCHD [flags...]
# starts SWITCHD --bind 0.0.0.0 --port 0 [flags] in namespace SW, output to OUT, and waits up to
# 10 s for it to listen: sets SWITCH_PID (at once, for the caller's cleanup) and PORT (the UDP port
# it got). Returns 1, with its output on stderr, when it did not come up.
star_switch() {
  local sw=$1 out=$2 switchd=$3
  shift 3
  ip netns exec "$sw" "$switchd" --bind 0.0.0.0 --port 0 "$@" > "$out" 2>&1 &
  SWITCH_PID=$!
  PORT=
  for _ in $(seq 100); do
    PORT=$(sed -n 's/.* listening on .*:\([0-9]*\)$/\1/p' "$out" || true)
    [[ -n $PORT ]] && return 0
    sleep 0.1
  done
  cat "$out" >&2
  return 1
}

#   star_lists PREFIX WORKERS PORT
# sets NSLIST (the workers' namespaces), SWLIST (the switch as each reaches it: its gateway
# address, which is also the source of the replies its connected socket wants) and ADDRLIST (each
# worker's own address), comma-separated, as ina-bench's --worker-netns / --worker-switch /
# --worker-addr take them.
star_lists() {
  local prefix=$1 workers=$2 port=$3 i
  NSLIST= SWLIST= ADDRLIST=
  for ((i = 0; i < workers; i++)); do
    NSLIST+=${NSLIST:+,}$prefix-w$i
    SWLIST+=${SWLIST:+,}10.77.$i.1:$port
    ADDRLIST+=${ADDRLIST:+,}10.77.$i.2
  done
}
