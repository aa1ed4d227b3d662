#!/usr/bin/env bash
# The Debian packages, installed and used as an operator would (docs/packaging.md):
#  1. cpack -G DEB from the build;
#  2. in a throwaway copy-on-write view of this Debian 12 system (overlayfs over /, its own mount
#     and network namespaces: nothing reaches the real system), dpkg -i every package, then
#     apt-get -f install;
#  3. the service's command line, read from the installed systemd unit (ExecStart) with the
#     installed /etc/ina/switchd.conf, serves: a C program built against the installed libina-dev
#     (pkg-config ina) runs 2 ranks, the installed python3-ina-torch runs a 2-rank torch
#     all-reduce, and the switch's metrics endpoint shows both jobs; SIGTERM stops it with 0;
#  4. dpkg --purge removes every file the packages installed, /etc/ina included.
# usage: deb_test.sh BUILD_DIR SOURCE_DIR   (exit 77: skipped, with the reason)
set -euo pipefail
BUILD=$(realpath "$1")
SRC=$(realpath "$2")
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg in a mount namespace)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || skip "no overlayfs in this kernel"
[ -f "$BUILD/CPackConfig.cmake" ] || skip "no CPackConfig.cmake in $BUILD"

T=$(mktemp -d /tmp/ina-deb-test.XXXXXX)
trap 'umount -R "$T/tmpfs" 2>/dev/null || true; rm -rf "$T"' EXIT
echo "== cpack -G DEB"
(cd "$BUILD" && cpack -G DEB -B "$T/debs" >"$T/cpack.log" 2>&1) || { cat "$T/cpack.log"; exit 1; }
ls "$T/debs"/*.deb
for p in libina0.1 libina-dev ina-switchd ina-tools python3-ina-torch; do
  ls "$T/debs/${p}_"*.deb >/dev/null || { echo "FAIL: no package $p"; exit 1; }
done

# Runs inside the new namespaces: builds the overlay root and runs the steps in it.
cat >"$T/outer.sh" <<'OUTER'
set -euo pipefail
T=$1 SRC=$2
mount -t tmpfs tmpfs "$T/tmpfs"
mkdir -p "$T/tmpfs/upper" "$T/tmpfs/work" "$T/tmpfs/root"
R=$T/tmpfs/root
mount -t overlay overlay -o "lowerdir=/,upperdir=$T/tmpfs/upper,workdir=$T/tmpfs/work" "$R"
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
mount -t tmpfs tmpfs "$R/tmp"
mount -t tmpfs tmpfs "$R/run"
cp -r "$T/debs" "$R/tmp/debs"
cp "$SRC/tests/host/install/consumer/consumer.c" "$SRC/tests/packaging/deb/torch_rank.py" "$R/tmp/"
cp "$SRC/tests/packaging/deb/inside.sh" "$R/tmp/"
ip link set lo up
exec chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  DEBIAN_FRONTEND=noninteractive /bin/bash /tmp/inside.sh
OUTER
mkdir -p "$T/tmpfs"
echo "== into a copy-on-write view of / (mount + network namespaces)"
timeout 600 unshare --mount --propagation private --net bash "$T/outer.sh" "$T" "$SRC"
