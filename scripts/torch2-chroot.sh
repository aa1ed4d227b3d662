#!/usr/bin/env bash
# torch2-chroot.sh [CHROOT]: runs ALL of the project's torch tests (ctest -L torch -LE hw) against
# PyTorch 2.x (Debian 13's python3-torch 2.6, CPU) without touching the host's Debian 12 (torch
# 1.13). docs/pytorch.md, "Which torch".
#   1. a Debian 13 "trixie" chroot (debootstrap --variant=minbase) at CHROOT (default
#      /var/tmp/ina-trixie), debootstrap installed on the host through apt if missing;
#      SUITE=forky makes a Debian testing chroot instead (default CHROOT /var/tmp/ina-forky): at
#      this writing torch 2.14, Python 3.14, CMake 4.3, pybind11 3.1, GCC 15 (the newest torch
#      and build tools Debian has; CI runs trixie);
#   2. inside it, through apt: python3-torch / libtorch-dev and the build tools (PKGS below);
#   3. this checkout's committed HEAD copied to CHROOT/src (git archive: uncommitted changes are
#      not copied), configured into CHROOT/build, and only the targets the torch tests use built;
#   4. the torch tests, inside the chroot; the script exits with ctest's status.
# Idempotent: a second run skips debootstrap and the installed packages, re-copies /src, re-runs
# cmake and ninja (incremental) and the tests. Measured on 2 busy cores (docs/benchmarks.md):
# first run about 13 min plus the tests, a rerun about 1.5 min plus the tests.
# Needs root and Debian's archive (deb.debian.org or MIRROR). Environment knobs:
#   TARGETS   ninja targets (default: ina-switchd ina_torch_ext, what the torch tests use; "all")
#   JOBS      ninja -j (default: the number of cores); compiles run under nice -n 10
#   TESTS=0   build only; TESTS=<regex> runs only the torch tests matching it (ctest -R)
#   KEEP_MOUNTS=1  leaves proc/sys/dev mounted on exit (default: unmounted)
set -euo pipefail

SUITE=${SUITE:-trixie}
ROOT=${1:-/var/tmp/ina-$SUITE}
SRC=$(cd "$(dirname "$0")/.." && pwd)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
TARGETS=${TARGETS:-"ina-switchd ina_torch_ext"}
JOBS=${JOBS:-$(nproc)}
TESTS=${TESTS:-1}

# Torch, the pybind11 headers Debian's torch is built with, the build tools, what the root
# CMakeLists requires (GTest, benchmark), and python3-sklearn (examples/train_ddp.py, the DDP
# tests, loads scikit-learn's digits offline), libssl-dev (libcrypto: ina::sec) and ccache. No
# libgloo-dev: the backend reaches Gloo through torch's Python binding, not its headers.
PKGS=(python3-torch libtorch-dev pybind11-dev build-essential cmake ninja-build pkg-config
      python3-dev libgtest-dev libgmock-dev libbenchmark-dev python3-sklearn libssl-dev ccache)

log() { printf '== %s: %s\n' "$(date +%T)" "$*"; }
[ "$(id -u)" -eq 0 ] || { echo "torch2-chroot.sh: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
git -C "$SRC" rev-parse HEAD >/dev/null 2>&1 ||
  { echo "torch2-chroot.sh: $SRC is not a git checkout (the chroot gets its HEAD)" >&2; exit 1; }
t_start=$(date +%s)

# --- 1. the chroot --------------------------------------------------------------------------
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap on the host"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
fi
if [ ! -f "$ROOT/.ina-debootstrap-done" ]; then
  # Bookworm's debian-archive-keyring (2023.3+deb12u1 and later) has trixie's signing keys; an
  # older keyring fails with "Release signed by unknown key": update debian-archive-keyring.
  log "debootstrap $SUITE into $ROOT (about 1.5 min, 214 MB)"
  mkdir -p "$ROOT"
  # Bookworm's debootstrap has no script named after suites newer than trixie; sid's fits them.
  script=()
  [ -e "/usr/share/debootstrap/scripts/$SUITE" ] || script=(/usr/share/debootstrap/scripts/sid)
  debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" "${script[@]}"
  touch "$ROOT/.ina-debootstrap-done"
fi

# proc, sys, dev, dev/pts and a private /dev/shm (torch.multiprocessing needs shared memory);
# only what this run mounted is unmounted on exit, in reverse order.
MOUNTED=()
mnt() {  # mnt TARGET mount-args...
  local t="$ROOT/$1"; shift
  mountpoint -q "$t" && return 0
  mkdir -p "$t"; mount "$@" "$t"; MOUNTED=("$t" "${MOUNTED[@]}")
}
cleanup() {
  [ "${KEEP_MOUNTS:-0}" = 1 ] && return 0
  for t in "${MOUNTED[@]}"; do umount "$t" || umount -l "$t"; done
}
trap cleanup EXIT
mnt proc -t proc proc
mnt sys --bind /sys
mnt dev --bind /dev
mnt dev/pts --bind /dev/pts
mnt dev/shm -t tmpfs -o mode=1777 shm
# The chroot's compiles go through ccache (found by the root CMakeLists), cached on the host beside
# the main build's cache (a different compiler, so a cache of its own): a clean checkout's run
# recompiles only what changed since the cache was filled.
CCACHE_HOST=${CCACHE_CHROOT_DIR:-$HOME/.cache/ina-ccache-$SUITE}
mkdir -p "$CCACHE_HOST"
mnt ccache --bind "$CCACHE_HOST"
# Name resolution for apt, and the host name for Gloo (without it Gloo warns "Unable to resolve
# hostname to a (local) address" and falls back to the loopback address).
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
grep -qw "$(hostname)" "$ROOT/etc/hosts" 2>/dev/null ||
  printf '127.0.1.1\t%s\n' "$(hostname)" >> "$ROOT/etc/hosts"

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
              LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/ccache \
              CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1 "$@"; }

# --- 2. packages ------------------------------------------------------------------------------
# A stable release's Release file has no expiry; testing's carries a Valid-Until a week out, and a
# mirror that is behind (as the one reachable from these machines can be) serves one that apt
# refuses as expired. Only for suites other than the stable one.
if [ "$SUITE" != trixie ]; then
  echo 'Acquire::Check-Valid-Until "false";' > "$ROOT/etc/apt/apt.conf.d/99ina-valid-until"
fi
missing=()
for p in "${PKGS[@]}"; do
  in_root dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]} (about 4 min, 310 MB of downloads; chroot ~2 GB after)"
  in_root apt-get update -qq
  in_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
  in_root apt-get clean  # drops the downloaded .debs (about 330 MB)
fi
log "torch $(in_root python3 -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -1)"

# --- 3. the project: copy, configure, build ------------------------------------------------------
# Only files whose content changed are rewritten (git archive stamps every file with the commit
# time, which would make ninja rebuild everything after each commit).
log "syncing $SRC (git archive HEAD $(git -C "$SRC" rev-parse --short HEAD)) to $ROOT/src"
stage="$ROOT/src.new"
rm -rf "$stage"; mkdir -p "$stage" "$ROOT/src"
git -C "$SRC" archive HEAD | tar -x -C "$stage"
python3 - "$stage" "$ROOT/src" <<'EOF_SYNC'
import filecmp, os, shutil, sys
new, old = sys.argv[1:]
changed = 0
for d, dirs, files in os.walk(new):
    rel = os.path.relpath(d, new)
    os.makedirs(os.path.join(old, rel), exist_ok=True)
    for f in files:
        a, b = os.path.join(d, f), os.path.join(old, rel, f)
        if os.path.islink(a) or os.path.islink(b) or not os.path.isfile(b) or \
                not filecmp.cmp(a, b, shallow=False):
            if os.path.lexists(b):
                os.remove(b)
            if os.path.islink(a):
                os.symlink(os.readlink(a), b)
            else:
                shutil.copy(a, b)  # content and mode; the mtime is now's
            changed += 1
for d, dirs, files in os.walk(old, topdown=False):
    rel = os.path.relpath(d, old)
    for f in files:
        if not os.path.lexists(os.path.join(new, rel, f)):
            os.remove(os.path.join(d, f))
            changed += 1
    if not os.path.isdir(os.path.join(new, rel)):
        os.rmdir(d)
print(f"{changed} files changed")
EOF_SYNC
rm -rf "$stage"
log "cmake configure /src -> /build (full output: $ROOT/build/configure.log)"
in_root sh -c 'mkdir -p /build; cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
                 -DINA_WERROR=ON -DINA_TORCH_PYTHON=/usr/bin/python3 > /build/configure.log 2>&1' ||
  { cat "$ROOT/build/configure.log"; echo "torch2-chroot.sh: configure failed" >&2; exit 1; }
grep -E 'plugins/torch' "$ROOT/build/configure.log" || true
in_root ninja -C /build -t query ina_torch_ext >/dev/null 2>&1 ||
  { echo "torch2-chroot.sh: no ina_torch_ext target (see the plugins/torch line above)" >&2
    exit 1; }
targets=()
for t in $TARGETS; do
  if [ "$t" = all ] || in_root ninja -C /build -t query "$t" >/dev/null 2>&1; then
    targets+=("$t")
  else
    log "no target $t in this configuration; skipped"
  fi
done
log "ninja ${targets[*]}"
in_root nice -n 10 ninja -C /build -j"$JOBS" "${targets[@]}"
log "built in $(( $(date +%s) - t_start )) s"

[ "$TESTS" = 0 ] && { log "done (TESTS=0: no tests): chroot $ROOT /bin/bash"; exit 0; }
# USE_LIBUV=0: Debian's torch 2.6 is built without libuv, while TCPStore defaults to it ("use_libuv
# was requested but PyTorch was build without libuv support"); env:// and tcp:// honour it.
select=(-L torch -LE hw)
[ "$TESTS" = 1 ] || select+=(-R "$TESTS")
log "ctest ${select[*]}"
rc=0
in_root sh -c "cd /build && USE_LIBUV=0 nice -n 10 ctest $(printf '%q ' "${select[@]}") \
                 --output-on-failure" || rc=$?
log "done in $(( $(date +%s) - t_start )) s, ctest status $rc: chroot $ROOT /bin/bash (mount" \
    "proc/sys/dev/dev/pts/dev/shm first, or KEEP_MOUNTS=1)"
exit $rc
