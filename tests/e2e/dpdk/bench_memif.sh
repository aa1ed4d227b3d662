#!/bin/bash
# One worker and ina-switchd over net_memif, then the same over UDP on loopback; prints each
# run's packets/s. Run from the repository root after building build-h8 (needs root).
# usage: tests/e2e/dpdk/bench_memif.sh ELEMENTS REPEATS
B=${BUILD:-build-h8}/bin; D=$(mktemp -d /tmp/ina8b-XXXX)
E="--no-huge -m 192 --no-pci --no-telemetry --log-level=*:warning"
$B/ina-switchd --bind 10.77.0.1 --port 47000 --dpdk "$E --file-prefix ina8bs -l 0 --vdev net_memif0,role=server,socket=$D/w0.sock" > $D/sw.log 2>&1 &
SW=$!; sleep 1
INA_TRANSPORT=dpdk INA_SWITCH=10.77.0.1:47000 INA_WORLD=1 INA_RANK=0 INA_DPDK_EAL="$E --file-prefix ina8bw -l 1 --vdev net_memif0,role=client,socket=$D/w0.sock" INA_DPDK_LOCAL=10.77.1.1:40000 timeout 60 $B/ina-dpdk-worker $1 1 $2 2>/dev/null
kill -TERM $SW; wait $SW; grep -E "port_counters" $D/sw.log; grep -oE '"(retransmissions|duplicates|results)": [0-9]+' $D/sw.log | tr '\n' ' '; echo
$B/ina-switchd --bind 127.0.0.1 --port 47123 > $D/sw2.log 2>&1 &
SW=$!; sleep 0.5
INA_TRANSPORT=udp INA_SWITCH=127.0.0.1:47123 INA_WORLD=1 INA_RANK=0 timeout 60 $B/ina-dpdk-worker $1 1 $2 2>/dev/null
kill -TERM $SW; wait $SW; rm -rf $D /var/run/dpdk/ina8b*
