#!/bin/bash
# deb_test.sh's steps inside the throwaway root (see there). /tmp holds the packages and sources.
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
cd /tmp
PKGS="libina0.1 libina-dev ina-switchd ina-tools ina-nccl-plugin python3-ina-torch"
[ -n "$(ls debs/ina-wireshark-dissector_*.deb 2>/dev/null)" ] && PKGS="$PKGS ina-wireshark-dissector"

echo "== dpkg -i, apt-get -f install"
dpkg -i debs/*.deb >dpkg.log 2>&1 || echo "dpkg -i left dependencies to resolve"
# Resolves what dpkg -i could not (none here: the build machine has every dependency); offline.
apt-get -f install -y -qq -o Acquire::Retries=0 >apt.log 2>&1 || { cat dpkg.log apt.log; fail "apt-get -f install"; }
for p in $PKGS; do
  [ "$(dpkg-query -W -f='${Status}' "$p")" = "install ok installed" ] || fail "$p is not installed"
done
dpkg-query -W $PKGS
for p in $PKGS; do dpkg -L "$p"; done | sort -u >files.txt
test -f /etc/ina/switchd.conf || fail "no /etc/ina/switchd.conf"
if [[ " $PKGS " == *" ina-wireshark-dissector "* ]] && command -v tshark >/dev/null; then
  # Installed where Debian's tshark looks (its global Lua plugin folder), so it loads without -X.
  tshark -G plugins 2>/dev/null | grep -E "^ina\.lua\s.*lua script" ||
    { grep wireshark files.txt; fail "tshark does not load the packaged ina.lua"; }
fi
grep -qx /etc/ina/switchd.conf /var/lib/dpkg/info/ina-switchd.conffiles || fail "switchd.conf is not a conffile"

echo "== the service's command line"
UNIT=/lib/systemd/system/ina-switchd.service
EXEC=$(sed -n 's/^ExecStart=//p' "$UNIT")
[ -n "$EXEC" ] || fail "no ExecStart in $UNIT"
echo "$EXEC"
$EXEC >switchd.out 2>&1 &
SW=$!
for _ in $(seq 100); do grep -q "listening on" switchd.out && break; sleep 0.1; done
grep -q "listening on 0.0.0.0:47000" switchd.out || { cat switchd.out; fail "switch not listening"; }
grep -q "metrics at http://127.0.0.1:9470/metrics" switchd.out || fail "no metrics endpoint"

echo "== C API: 2 ranks of a program built against the installed libina-dev"
# shellcheck disable=SC2046
cc -std=c11 -O1 -o consumer consumer.c $(pkg-config --cflags --libs ina)
lib=$(ldd consumer | sed -n 's/.*libina.so[^ ]* => \([^ ]*\) .*/\1/p')
[ "$(readlink -f "$lib")" = /usr/lib/libina.so.0.1.0 ] || { ldd consumer; fail "consumer does not load the packaged libina"; }
for r in 0 1; do
  INA_SWITCH=127.0.0.1:47000 INA_JOB=11 INA_RANK=$r INA_WORLD=2 timeout 60 ./consumer >c$r.out 2>&1 &
done
wait %2 %3 2>/dev/null || true
for r in 0 1; do grep -q "rank $r/2: ok" c$r.out || { cat c$r.out; fail "C rank $r"; }; done
cat c0.out

echo "== torch: 2 ranks through the installed python3-ina-torch"
timeout 180 python3 torch_rank.py 127.0.0.1:47000 >torch.out 2>&1 || { cat torch.out; fail "torch all-reduce"; }
cat torch.out

echo "== NCCL plugin: found by name, as NCCL_NET_PLUGIN=ina makes NCCL dlopen it"
python3 - <<'PY' || fail "libnccl-net-ina.so"
import ctypes
lib = ctypes.CDLL("libnccl-net-ina.so")  # the loader's search path, as NCCL's dlopen
for sym in ("ncclNetPlugin_v11", "ncclCollNetPlugin_v11"):
    getattr(lib, sym)
print("libnccl-net-ina.so loads by name and exports ncclNetPlugin_v11, ncclCollNetPlugin_v11")
PY

echo "== metrics"
python3 - <<'PY' || fail "metrics"
import urllib.request
text = urllib.request.urlopen("http://127.0.0.1:9470/metrics", timeout=5).read().decode()
admitted = sum(float(l.split()[-1]) for l in text.splitlines()
               if l.startswith("ina_switch_jobs_admitted_total"))
print(f"ina_switch_jobs_admitted_total {admitted:.0f}")
assert admitted >= 2, text
PY
kill -TERM $SW
wait $SW || fail "ina-switchd exited $? on SIGTERM"
grep -q '"switch_counters"' switchd.out || fail "no summary line at exit"

echo "== ina-jobkey: a job's key into a keyed switch, both from the packages"
command -v ina-jobkey >/dev/null || fail "ina-jobkey is not installed"
(umask 077
 od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >admin.key
 od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >job.key)
ina-switchd --bind 127.0.0.1 --port 47001 --admin-key-file admin.key --require-job-keys 1 \
  >keyed.out 2>&1 &
KSW=$!
for _ in $(seq 100); do grep -q "listening on" keyed.out && break; sleep 0.1; done
grep -q "listening on 127.0.0.1:47001" keyed.out || { cat keyed.out; fail "keyed switch not listening"; }
timeout 30 ina-jobkey --switch 127.0.0.1:47001 --admin-key-file admin.key --job 7 \
  --secret-file job.key || { cat keyed.out; fail "ina-jobkey did not install the key"; }
kill -TERM $KSW
wait $KSW || fail "the keyed ina-switchd exited $? on SIGTERM"
grep -q '"keys_installed": 1[,}]' keyed.out || { tail -3 keyed.out; fail "the switch counted no installed key"; }

echo "== dpkg --purge"
# shellcheck disable=SC2086
dpkg --purge $PKGS >purge.log 2>&1 || { cat purge.log; fail "dpkg --purge"; }
left=0
while read -r f; do
  case "$f" in /. | /etc | /usr | /usr/* | /lib | /lib/systemd | /lib/systemd/system) [ -d "$f" ] && continue ;; esac
  if [ -e "$f" ] && [ ! -d "$f" ]; then echo "left behind: $f"; left=1; fi
done <files.txt
[ ! -e /etc/ina ] || { ls -la /etc/ina; fail "/etc/ina left behind"; }
[ $left -eq 0 ] || fail "files left after purge"
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed" && fail "$p still installed"
done
echo "PASS: packages installed, served a C and a torch all-reduce, purged cleanly"
