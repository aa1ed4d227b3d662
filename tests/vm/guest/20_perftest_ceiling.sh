# The ceiling under emulation: ib_send_bw (UD) and ib_write_bw (UC) between rxe0 and rxe1 at the
# ina frame size (22-byte header + 256 int32 = 1046 bytes), in the same boot as the transport
# tests. Prints the figures (MB/s and Mpkt/s); they are indicative only (TCG-emulated CPU).
set -u
. /share/tests/lib.sh
SIZE=${INA_FRAME_BYTES:-1046}
pf() {  # pf PROG ARGS...: server on rxe0, client on rxe1
  local prog=$1; shift
  timeout 60 $prog -d rxe0 -x $RXE_GID_rxe0 "$@" > /tmp/pf_srv.log 2>&1 & local sp=$!
  wait_listen 18515 $sp || return 1
  timeout 60 $prog -d rxe1 -x $RXE_GID_rxe1 "$@" 127.0.0.1 > /tmp/pf_cli.log 2>&1; local crc=$?
  wait $sp; local src=$?
  cat /tmp/pf_cli.log
  echo "$prog: server rc=$src client rc=$crc"
  [ $src = 0 ] && [ $crc = 0 ] || return 1
  # bytes, iterations, BW peak, BW average [MB/sec], MsgRate [Mpps]
  awk -v p="$prog $*" '$1 ~ /^[0-9]+$/ && NF >= 5 {print "CEILING " p ": " $4 " MB/s, " $5 " Mpkt/s"}' /tmp/pf_cli.log
}
# perftest calibrates the cycle counter and gives up ("Correlation coefficient r^2 < 0.9, Can't
# produce a report") when the emulated CPU is too noisy: such a run is retried, up to 3 tries.
retry() { local i; for i in 1 2 3; do "$@" && return 0; echo "(try $i failed)"; sleep 1; done; return 1; }
retry pf ib_send_bw -c UD -s $SIZE -D 2 || exit 1
retry pf ib_write_bw -c UC -s $SIZE -D 2 || exit 1
