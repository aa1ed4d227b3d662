#!/usr/bin/env bash
# run-vm.sh: boots Debian's stock kernel under qemu (TCG) with soft-RoCE (rdma_rxe) and runs every
# guest test of tests/vm/guest/ in ONE boot, under chroot into the host's /usr and /etc (9p, ro),
# so host-built binaries run unchanged. Results come back per test in $OUT/results/<test>.{rc,log}.
#
#   scripts/vm/run-vm.sh --build BUILD_DIR [--out DIR] [--tests DIR] [--only REGEX] [--timeout S]
#
# Exit: 0 all guest tests passed; 1 some failed; 2 the guest gave no result (boot failure or
# timeout); 77 skipped (qemu, busybox-static or the kernel package cannot be had; reason printed).
# The kernel .deb is fetched once with `apt-get download` (never installed) into
# ${INA_VM_CACHE:-~/.cache/ina-vm}; the initramfs is rebuilt only when its inputs change.
# Env: INA_VM_ACCEL (default "-accel tcg,thread=multi -cpu max"; this machine's /dev/kvm cannot
# boot it), INA_VM_SMP (2), INA_VM_MEM (1024).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD="" OUT="" TESTS="$SRC/tests/vm/guest" ONLY="" TIMEOUT=240
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --tests) TESTS=$(cd "$2" && pwd); shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    *) echo "run-vm: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$BUILD" ] || { echo "run-vm: --build BUILD_DIR is required" >&2; exit 2; }
OUT=${OUT:-$BUILD/vm}
skip() { echo "run-vm: SKIP: $*"; exit 77; }
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not found (scripts/setup.sh installs qemu-system-x86)"
# grep without -q: it reads the whole list (-q exits at the match, busybox may then die of SIGPIPE,
# which pipefail turned into a spurious skip).
[ -x /bin/busybox ] && /bin/busybox --list | grep -x insmod > /dev/null || skip "/bin/busybox (static, with insmod) not found (busybox-static)"

CACHE=${INA_VM_CACHE:-$HOME/.cache/ina-vm}
mkdir -p "$CACHE" "$OUT"
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s.%N)
el() { awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $T0}"; }

# 1. the kernel package that linux-image-amd64 depends on, downloaded once, partly extracted.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$KPKG" ] || skip "apt-cache knows no linux-image-amd64 (no Debian package index)"
KV=${KPKG#linux-image-}
if ! ls "$CACHE"/${KPKG}_*.deb >/dev/null 2>&1; then
  (cd "$CACHE" && apt-get download "$KPKG" >/dev/null 2>&1) || skip "apt-get download $KPKG failed"
fi
DEB=$(ls "$CACHE"/${KPKG}_*.deb | head -1)
KROOT=$CACHE/kroot-$KV
if [ ! -f "$KROOT/boot/vmlinuz-$KV" ]; then
  rm -rf "$KROOT.tmp"; mkdir -p "$KROOT.tmp"
  M="./lib/modules/$KV/kernel"
  dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$KROOT.tmp" --wildcards "./boot/vmlinuz-$KV" \
    "$M/drivers/infiniband/*" "$M/drivers/virtio/*" "$M/drivers/net/veth.ko" \
    "$M/net/*" "$M/fs/9p/*" "$M/fs/configfs/*" "$M/fs/netfs/*" "$M/fs/fscache/*" "$M/crypto/*" \
    "$M/arch/x86/crypto/*"
  rm -rf "$KROOT"; mv "$KROOT.tmp" "$KROOT"
fi
echo "[vm] kernel $KV ($(el)s)"

# 2. initramfs: busybox-static, the modules in dependency order (the .deb has no modules.dep:
#    each .ko's modinfo "depends=" is read), and /init (scripts/vm/init.sh).
INITRD=$CACHE/initrd-$KV-$(cat "$HERE/init.sh" "$HERE/modules.py" /bin/busybox | sha1sum | cut -c1-12).cpio.gz
if [ ! -f "$INITRD" ]; then
  W=$(mktemp -d)
  trap 'rm -rf "$W"' EXIT
  mkdir -p "$W"/bin "$W"/mods "$W"/proc "$W"/sys "$W"/dev
  cp /bin/busybox "$W"/bin/
  python3 "$HERE/modules.py" "$KROOT/lib/modules/$KV" crc32_generic crc32_pclmul virtio_pci \
    9pnet_virtio 9p veth ib_core ib_uverbs rdma_rxe rdma_ucm > "$W/list"
  while read -r p; do cp "$p" "$W"/mods/; basename "$p" >> "$W"/modules.order; done < "$W/list"
  rm "$W/list"
  install -m 755 "$HERE/init.sh" "$W/init"
  (cd "$W" && find . | /bin/busybox cpio -o -H newc 2>/dev/null) | gzip -1 > "$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"
fi
echo "[vm] initramfs $(basename "$INITRD") ($(el)s)"

# 3. the results share: the guest runner, the test scripts, the filter; results/ comes back.
SHARE=$OUT/share
rm -rf "$SHARE"; mkdir -p "$SHARE/results"
cp "$HERE/guest-runner.sh" "$SHARE/"
cp -r "$TESTS" "$SHARE/tests"
printf '%s\n' "$ONLY" > "$SHARE/only"

# 4. boot; qemu is killed on any exit of this script and bounded by timeout.
QPID=""
cleanup() { [ -n "$QPID" ] && kill "$QPID" 2>/dev/null; rm -rf "${W:-/nonexistent}"; }
trap cleanup EXIT INT TERM
set +e
timeout --kill-after=5 "$TIMEOUT" qemu-system-x86_64 ${INA_VM_ACCEL:--accel tcg,thread=multi -cpu max} \
  -smp "${INA_VM_SMP:-2}" -m "${INA_VM_MEM:-1024}" -kernel "$KROOT/boot/vmlinuz-$KV" -initrd "$INITRD" \
  -append "console=ttyS0 quiet loglevel=4 panic=-1" \
  -nographic -no-reboot -nic none -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
  -virtfs local,path=/usr,mount_tag=usr,security_model=none,readonly=on \
  -virtfs local,path=/etc,mount_tag=etc,security_model=none,readonly=on \
  -virtfs local,path="$SRC",mount_tag=src,security_model=none,readonly=on \
  -virtfs local,path="$BUILD",mount_tag=build,security_model=none,readonly=on \
  -virtfs local,path="$SHARE",mount_tag=share,security_model=none \
  < /dev/null > "$OUT/console.log" 2>&1 &
QPID=$!
wait $QPID
q=$?
QPID=""
set -e
echo "[vm] qemu exit status $q ($(el)s); console: $OUT/console.log"
grep -E '^\[(init|guest)\]' "$OUT/console.log" || true
if [ ! -f "$SHARE/results/summary.txt" ]; then
  echo "[vm] FAIL: no result from the guest (timeout ${TIMEOUT}s or boot failure); console tail:"
  tail -20 "$OUT/console.log"
  exit 2
fi
cat "$SHARE/results/summary.txt"
fails=$(grep -c '^FAIL' "$SHARE/results/summary.txt" || true)
n=$(grep -c '' "$SHARE/results/summary.txt" || true)
echo "[vm] $((n - fails))/$n guest tests passed; logs in $SHARE/results/"
[ "$n" -gt 0 ] || { echo "[vm] FAIL: no guest test ran"; exit 1; }
# A failed guest test's own log goes into this output too (CI keeps only what is printed).
for t in $(sed -n 's/^FAIL[^ ]* \([^ ]*\) .*/\1/p' "$SHARE/results/summary.txt"); do
  echo "[vm] ---- $t.log (last 80 lines) ----"
  tail -80 "$SHARE/results/$t.log" 2>/dev/null || echo "[vm] (no log)"
done
[ "$fails" -eq 0 ]
