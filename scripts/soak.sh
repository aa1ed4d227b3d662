#!/usr/bin/env bash
# Soak (docs/soak.md): one ina-switchd at 1% loss each way (--drop-rate), two jobs of 4
# ina-soak-worker processes each, for --minutes M (default 10); every minute one worker (the jobs
# and ranks in turn) is killed with SIGKILL and started again at once. The switch's RSS is sampled
# every 5 s. At the end it prints the figures and fails (exit 1) when:
#   - any successful call was not exact (a `wrong` line: every worker checks its result against
#     the sum it computes itself from every rank's inputs, so exact also means bit-identical),
#   - any worker was silent for longer than the hang bound (no log line for join_timeout +
#     progress_timeout + 5 s = 20 s) or did not exit on SIGTERM,
#   - a failure came later than the documented bound (docs/host.md: progress_timeout_ms + one
#     poll interval after the last accepted result; --slack-ms (default 100) is added for the
#     1 ms polling and a loaded machine),
#   - the switch's RSS grew by more than 10% (and 2 MiB) from the first minute to the end.
# Usage: scripts/soak.sh [--minutes M] [--build DIR] [--out DIR] [--slack-ms S]
# Needs ina-switchd and ina-soak-worker built in DIR (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
build=build
out=""
slack_ms=100
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --slack-ms) slack_ms=$2; shift 2 ;;
    *) echo "usage: scripts/soak.sh [--minutes M] [--build DIR] [--out DIR] [--slack-ms S]" >&2; exit 2 ;;
  esac
done
switchd=$build/bin/ina-switchd
worker=$build/bin/ina-soak-worker
for b in "$switchd" "$worker"; do
  [ -x "$b" ] || { echo "soak.sh: $b not built (cmake --build $build --target $(basename "$b"))" >&2; exit 1; }
done
out=${out:-$(mktemp -d /tmp/ina-soak.XXXXXX)}
mkdir -p "$out"
seconds=$((minutes * 60))
port=$((20000 + RANDOM % 20000))
jobs=(101 102)
world=4

pids=()
cleanup() {
  for p in "${pids[@]}" ${swpid:-}; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

"$switchd" --port "$port" --drop-rate 0.01 --seed 7 --stats-interval-ms 10000 \
  >"$out/switchd.log" 2>&1 &
swpid=$!
sleep 0.5
kill -0 "$swpid" || { cat "$out/switchd.log"; echo "soak.sh: ina-switchd did not start" >&2; exit 1; }

declare -A wpid
start_worker() {  # job index, rank; runs until the soak's end
  local j=$1 r=$2 left=$((end - SECONDS))
  [ "$left" -gt 0 ] || return 0
  "$worker" --switch "127.0.0.1:$port" --job "${jobs[$j]}" --rank "$r" --world "$world" \
    --seconds "$left" --log "$out/job${jobs[$j]}_rank$r.log" 2>>"$out/workers.err" &
  wpid[$j.$r]=$!
  pids+=($!)
}

end=$((SECONDS + seconds))
echo "soak.sh: $minutes min, switch 127.0.0.1:$port (pid $swpid), logs in $out"
for j in 0 1; do for r in $(seq 0 $((world - 1))); do start_worker "$j" "$r"; done; done

rss() { awk '/^VmRSS/ {print $2}' "/proc/$swpid/status"; }
: >"$out/rss.txt"
next_kill=$((SECONDS + 60))
victim=0
kills=0
while [ $SECONDS -lt $end ]; do
  echo "$((SECONDS - end + seconds)) $(rss)" >>"$out/rss.txt"
  if [ $SECONDS -ge $next_kill ] && [ $((end - SECONDS)) -gt 20 ]; then
    j=$((victim % 2))
    r=$(((victim / 2) % world))
    kill -9 "${wpid[$j.$r]}" 2>/dev/null || true
    wait "${wpid[$j.$r]}" 2>/dev/null || true
    echo "kill $(date +%s%3N) job ${jobs[$j]} rank $r" >>"$out/kills.txt"
    start_worker "$j" "$r"
    victim=$((victim + 1))
    kills=$((kills + 1))
    next_kill=$((next_kill + 60))
  fi
  sleep 5
done

# The workers stop by themselves at the end; SIGTERM what is left after a grace period.
hung=0
deadline=$((SECONDS + 30))
for key in "${!wpid[@]}"; do
  p=${wpid[$key]}
  while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null || true
    sleep 1
    if kill -0 "$p" 2>/dev/null; then
      echo "soak.sh: worker $key (pid $p) did not exit: hung" >&2
      hung=$((hung + 1))
    fi
  fi
done
echo "$seconds $(rss)" >>"$out/rss.txt"
kill -INT "$swpid" 2>/dev/null || true
wait "$swpid" 2>/dev/null || true

python3 - "$out" "$seconds" "$slack_ms" "$hung" "$kills" <<'EOF'
import glob, os, sys
out, seconds, slack, hung, kills = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
bound = 5000 + 10 + slack           # docs/host.md: progress_timeout_ms + one poll interval
hang_bound = (10000 + 5000 + 5000)  # join_timeout + progress_timeout + 5 s, in ms
ok = wrong = fails = joins = join_fails = 0
codes, late, gaps, fail_ms = {}, [], [], []
ok_ms = []
for path in sorted(glob.glob(os.path.join(out, "job*_rank*.log"))):
    prev = None
    for line in open(path):
        f = line.split()
        if not f:
            continue
        t = int(f[1])
        if prev is not None:
            gaps.append((t - prev, path))
        prev = t
        if f[0] == "ok":
            ok += 1
            ok_ms.append(float(f[5]))
        elif f[0] == "wrong":
            wrong += 1
            print("WRONG:", path, line.strip())
        elif f[0] == "fail":
            fails += 1
            code, since = f[5], float(f[6])
            codes[code] = codes.get(code, 0) + 1
            fail_ms.append(since)
            if since > bound:
                late.append((since, path, line.strip()))
        elif f[0] == "join":
            joins += 1
        elif f[0] == "join_fail":
            join_fails += 1
# A killed worker's log has a gap from its last line to its restart: at most the kill's
# restart (immediate) plus the next join; gaps are judged per file.
max_gap = max(gaps)[0] if gaps else 0
rss = [tuple(map(int, l.split())) for l in open(os.path.join(out, "rss.txt")) if len(l.split()) == 2]
first = [k for s, k in rss if s <= 60] or [rss[0][1]]
base = max(first)
last = rss[-1][1]
peak = max(k for _, k in rss)
ok_ms.sort()
print(f"soak: {seconds // 60} min, 2 jobs x 4 workers, 1% loss each way, {kills} kills")
print(f"  calls ok {ok} (exact, checked per rank), wrong {wrong}, failed {fails}: " +
      ", ".join(f"{c} {n}" for c, n in sorted(codes.items())))
if ok_ms:
    print(f"  ok call ms: median {ok_ms[len(ok_ms) // 2]:.2f}, p99 {ok_ms[int(len(ok_ms) * 0.99)]:.2f}, max {ok_ms[-1]:.1f}")
if fail_ms:
    print(f"  failure after last progress: max {max(fail_ms):.1f} ms (bound {bound:.0f} ms), {len(late)} over")
print(f"  joins {joins}, refused/timed-out joins {join_fails} (retried)")
print(f"  longest silence of a worker {max_gap / 1000:.1f} s (hang bound {hang_bound / 1000:.0f} s), hung at end {hung}")
print(f"  switch RSS KiB: first minute {base}, end {last}, peak {peak}; samples " +
      " ".join(str(k) for _, k in rss[:: max(1, len(rss) // 12)]))
bad = []
if wrong: bad.append(f"{wrong} wrong results")
if late: bad.append(f"{len(late)} failures later than {bound:.0f} ms, worst {max(late)[0]:.1f}")
if max_gap > hang_bound or hung: bad.append("a worker hung")
if last > base * 1.10 and last - base > 2048: bad.append(f"switch RSS grew {base} -> {last} KiB")
if ok == 0: bad.append("no call succeeded")
# Recovery: from each kill to the first call 0 (a fresh communicator) that succeeded on all ranks
# of that job.
rec = []
kills_path = os.path.join(out, "kills.txt")
for k in (l.split() for l in open(kills_path)) if os.path.exists(kills_path) else []:
    t, job = int(k[1]), k[3]
    firsts = []
    for path in glob.glob(os.path.join(out, f"job{job}_rank*.log")):
        for line in open(path):
            f = line.split()
            if f[0] == "ok" and int(f[1]) > t and f[2] == "0":
                firsts.append(int(f[1]))
                break
    if len(firsts) == 4:
        rec.append((max(firsts) - t) / 1000)
if rec:
    print(f"  after a kill, every rank of the job back (call 0 ok): max {max(rec):.2f} s, " +
          "each: " + " ".join(f"{r:.2f}" for r in rec))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
