# The verbs transport on rxe0 against roce_reflector (UDP socket on 10.0.1.2:4791 in netns sw,
# a raw socket to see the IP header the ICRC covers): 200 ina messages (K=256, 1046 bytes) out
# as UD SENDs, half zero-copy from registered memory, half bounced; the reflector checks ICRC,
# BTH/DETH and the ina header/payload and answers each (elements + 1, ICRC recomputed); the
# transport receives them intact. Then 200 more as gather lists (GPUDirect RDMA's packets: header
# and trailer from host memory, payload from a separately registered body region), which must
# arrive as whole messages; and a memfd offered as a dma-buf, which rxe must refuse naming
# ibv_reg_dmabuf_mr (the communicator's fallback trigger). Then replies with a bad ICRC and to a wrong QPN: none delivered
# (rxe drops a bad ICRC silently: its counters are printed before and after).
set -u
. /share/tests/lib.sh
B=$INA_BUILD/bin
for f in $B/host_verbs_rxe_test $B/roce_reflector; do
  [ -x $f ] || { echo "FAIL: $f not built (cmake --build build --target ina_vm_guest_bins)"; exit 1; }
done
QPN=0x100 QKEY=0x494E4100
counters() { for c in rcvd_pkts sent_pkts; do
  printf "%s=%s " $c "$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/$c 2>/dev/null)"; done; echo; }
run() {  # run MODE EXPECT COUNT
  ip netns exec sw $B/roce_reflector 10.0.1.2 $QPN $QKEY $1 $3 30 & local rp=$!
  sleep 0.5
  echo "rxe0 counters before ($1): $(counters)"
  INA_VERBS_DEVICE=rxe0 INA_VERBS_GID=$RXE_GID_rxe0 INA_VERBS_FABRIC=10.0.1.2 INA_VERBS_QPN=$QPN \
    INA_VERBS_QKEY=$QKEY INA_VERBS_EXPECT=$2 timeout 60 $B/host_verbs_rxe_test; local trc=$?
  echo "rxe0 counters after ($1): $(counters)"
  wait $rp; local rrc=$?
  echo "mode $1: transport test rc=$trc reflector rc=$rrc"
  [ $trc = 0 ] && [ $rrc = 0 ]
}
fails=0
run ok replies 400 || fails=$((fails + 1))
run badicrc none 200 || fails=$((fails + 1))
run wrongqpn none 200 || fails=$((fails + 1))
exit $fails
