# Sourced by scripts/testbed.sh and scripts/torch_testbed.sh: the rate-limited star of network
# namespaces they both run on (the layout is described at the head of testbed.sh).
#
#   star_up SW PREFIX WORKERS RATE OVERHEAD
# makes namespace SW (forwarding on) and PREFIX-w0 .. PREFIX-w<WORKERS-1>; worker i has a veth
# pair w<i> (10.77.i.2/24, its side) <-> s<i> (10.77.i.1/24, SW's side), GSO off, and every
# direction shaped by tc tbf to RATE counting OVERHEAD bytes per frame. Each namespace is appended
# to the caller's NAMESPACES array as soon as it exists, so the caller's cleanup removes what was
# made even when a later step fails.
star_up() {
  local sw=$1 prefix=$2 workers=$3 rate=$4 overhead=$5 i ns
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
    ip -n "$ns" link set "w$i" gso_max_size 1500 up
    ip -n "$sw" link set "s$i" gso_max_size 1500 up
    ip -n "$ns" route add default via "10.77.$i.1"
    star_shape "$ns" "w$i" "$rate" "$overhead"
    star_shape "$sw" "s$i" "$rate" "$overhead"
  done
}

# tbf: burst 64 KiB (well above rate/HZ at these rates), queue up to 2 MiB (more than a window of
# ina packets, so ina never loses packets to the shaper; TCP fills it, as it would a switch port).
star_shape() {
  tc -n "$1" qdisc add dev "$2" root tbf rate "$3" burst 64kb limit 2mb overhead "$4" \
    mpu $((60 + $4))
}
