#!/bin/busybox sh
# /init of the ina test VM: loads the modules, builds a tmpfs root with the host's /usr and /etc
# (9p, read-only), the source tree at /src, the build tree at /build (ro) and the results share at
# /share (rw), then runs /share/guest-runner.sh under chroot. Exit code through a file and
# isa-debug-exit (qemu exits with (rc << 1) | 1).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
echo "[init] kernel up at $(cut -d' ' -f1 /proc/uptime)s"
for m in $(cat /modules.order); do insmod /mods/$m || echo "[init] insmod $m failed"; done
R=/newroot; mkdir -p $R; mount -t tmpfs -o size=512m tmpfs $R
mkdir -p $R/usr $R/etc $R/proc $R/sys $R/dev $R/tmp $R/run $R/var/tmp $R/share $R/root $R/src $R/build
O=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $O,ro,cache=loose usr $R/usr || echo "[init] 9p usr failed"
mount -t 9p -o $O,ro,cache=loose etc $R/etc || echo "[init] 9p etc failed"
mount -t 9p -o $O,ro src $R/src || echo "[init] 9p src failed"
mount -t 9p -o $O,ro build $R/build || echo "[init] 9p build failed"
mount -t 9p -o $O share $R/share || echo "[init] 9p share failed"
for l in bin sbin lib lib64; do ln -s usr/$l $R/$l; done
mount --move /proc $R/proc; mount --move /sys $R/sys; mount --move /dev $R/dev
echo "[init] root ready at $(cut -d' ' -f1 $R/proc/uptime)s"
chroot $R /usr/bin/env -i PATH=/usr/sbin:/usr/bin HOME=/root TERM=dumb /bin/bash /share/guest-runner.sh
rc=$?; [ $rc -gt 127 ] && rc=127
echo "[init] guest runner exit code: $rc"
echo $rc > $R/share/results/rc; sync
printf "\\$(printf %o $rc)" | dd of=$R/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
