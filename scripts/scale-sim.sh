#!/usr/bin/env bash
# Runs ina-scale-sim (tools/scale_sim, SimGrid) over the sweeps in docs/scale.md, writes one JSON
# line per point and a TSV per figure to --out, and a PNG per sweep beside them
# (scripts/plot/plot.py scale-<sweep>: scale-size.png, ..., scale-calib.png and scale-jumbo.png
# with the --testbed runs beside the model; skipped, with a word, without gnuplot).
#
#   scripts/scale-sim.sh [--build DIR] [--out DIR] [--jobs-parallel P] [--testbed DIR]...
#                        [--tables-only] [SWEEP...]
#
# Sweeps (all by default): size (time against tensor size, 64 and 1024 workers), workers (time
# against workers at 16 MiB), contention (1 to 8 jobs sharing 256 workers' fat tree), calib (the
# testbed points of the calibration table; with --testbed, each a scripts/testbed.sh --out folder,
# calib.md puts the measured times next to the model's), jumbo (the testbed at 1 Gbit/s with
# 9000-byte frames, ina at K=2048 and the ring's TCP at MSS 8948: jumbo.md beside the runs of
# --testbed folders made with --mtu 9000). --tables-only remakes the tables and
# plots from the JSON lines already in --out. Exit status: 0, 1 if a point failed, 2 on bad usage.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
OUT=scale-out
PAR=2
SWEEPS=()
TESTBED=()
TABLES_ONLY=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --jobs-parallel) PAR=$2; shift 2 ;;
    --testbed) TESTBED+=("$(cd "$2" && pwd)"); shift 2 ;;
    --tables-only) TABLES_ONLY=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    size|workers|contention|calib|jumbo) SWEEPS+=("$1"); shift ;;
    *) echo "scale-sim: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ ${#SWEEPS[@]} -gt 0 ]] || SWEEPS=(calib jumbo size workers contention)
SIM=$BUILD/bin/ina-scale-sim
[[ -x $SIM ]] || { echo "scale-sim: no $SIM (build the ina-scale-sim target)" >&2; exit 2; }
mkdir -p "$OUT"

# The fabric of the scale figures: 100 Gbit/s worker links, 1 us per link crossed (cable and a
# cut-through switch), 5 us per ring step (a send/receive through the host's stack), leaves of 32;
# 9000-byte frames, as datacenter Ethernet runs: ina at K=2048 (8 KiB payloads, a window of 128
# slots = 1 MiB), the ring's TCP at MSS 8948.
SCALE="--rate 100gbit --hop-latency-us 1 --ring-step-us 5 --k 2048 --window 128 --mss 8948"
# The jumbo testbed (docs/scale.md, "Calibration at 1 Gbit/s with 9000-byte frames"): the switch's
# CPU per packet measured by scripts/testbed.sh in the same runs (switch_cpu_ms / packets), not
# fitted to the times.
JUMBO="--hop-latency-us 30 --switch-cost-us 14.3 --ring-step-us 0 --tcp-efficiency 0.86"
JUMBO+=" --k 2048 --window 128 --mss 8948"
# The testbed's calibrated parameters (docs/scale.md, "Calibration").
CALIB="--hop-latency-us 30 --switch-cost-us 28 --ring-step-us 0 --tcp-efficiency 0.86"

run() {  # run NAME ARGS...: the points of one sweep, PAR at a time, into $OUT/NAME.jsonl
  local name=$1; shift
  : > "$OUT/$name.jsonl"
  printf '%s\n' "$@" | xargs -P "$PAR" -I{} sh -c "$SIM {} 2>/dev/null" >> "$OUT/$name.jsonl"
  local want=$#
  local got
  got=$(wc -l < "$OUT/$name.jsonl")
  [[ $got -eq $want ]] || { echo "scale-sim: $name: $got of $want points ran" >&2; return 1; }
  echo "scale-sim: $name: $want points in $OUT/$name.jsonl"
}

rc=0
[[ $TABLES_ONLY -eq 0 ]] || SWEEPS=()
for s in "${SWEEPS[@]}"; do
  pts=()
  case $s in
    size)
      for n in 64 1024; do
        for e in 1024 16384 262144 4194304 16777216; do
          for a in ina ring; do pts+=("--algo $a --workers $n --leaf-size 32 --elements $e $SCALE"); done
        done
      done ;;
    workers)
      for n in 4 8 16 32 64 128 256 512 1024; do
        for a in ina ring; do pts+=("--algo $a --workers $n --leaf-size 32 --elements 4194304 $SCALE"); done
      done ;;
    contention)
      for o in 1 4; do
        for j in 1 2 4 8; do
          for a in ina ring; do
            pts+=("--algo $a --workers $((256 / j)) --jobs $j --leaf-size 16 --placement spread --oversub $o --elements 4194304 $SCALE")
          done
        done
      done ;;
    jumbo)
      for n in 4 8; do
        for e in 4194304 16777216; do
          for a in ina ring; do pts+=("--algo $a --workers $n --rate 1gbit --elements $e $JUMBO"); done
        done
      done ;;
    calib)
      for n in 4 8; do
        for r in 50mbit 100mbit 1gbit; do
          for e in 1048576 4194304; do
            for a in ina ring; do pts+=("--algo $a --workers $n --rate $r --elements $e $CALIB"); done
          done
        done
      done ;;
  esac
  run "$s" "${pts[@]}" || rc=1
done

python3 - "$OUT" "${TESTBED[@]}" <<'PY'
import json, sys, os, collections
out = sys.argv[1]
testbed = sys.argv[2:]
def load(name):
    p = os.path.join(out, name + ".jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
rows = load("size")
if rows:
    with open(os.path.join(out, "size.tsv"), "w") as f:
        f.write("# workers\telements\tina_ms\tina_bound_ms\tring_ms\tring_closed_ms\n")
        key = collections.defaultdict(dict)
        for d in rows: key[(d["workers"], d["elements"])][d["algo"]] = d
        for (n, e), v in sorted(key.items()):
            f.write(f"{n}\t{e}\t{v['ina']['time_ms']}\t{v['ina']['bound_ms']}\t{v['ring']['time_ms']}\t{v['ring']['bound_ms']}\n")
        f.write("\n")
        with open(os.path.join(out, "size.md"), "w") as m:
            m.write("| workers | floats | MiB | ina ms | ina bound ms | ring ms | ring closed form ms | ring / ina |\n"
                    "|---|---|---|---|---|---|---|---|\n")
            for (n, e), v in sorted(key.items()):
                i, r = v["ina"]["time_ms"], v["ring"]["time_ms"]
                m.write(f"| {n} | {e} | {e * 4 / 1048576:g} | {i:.4g} | {v['ina']['bound_ms']:.4g} | "
                        f"{r:.4g} | {v['ring']['bound_ms']:.4g} | {r / i:.2f} |\n")
rows = load("workers")
if rows:
    with open(os.path.join(out, "workers.tsv"), "w") as f:
        f.write("# workers\tina_ms\tring_ms\tring_closed_ms\tS_over_B_ms\tsim_wall_s_ina\tsim_wall_s_ring\n")
        key = collections.defaultdict(dict)
        for d in rows: key[d["workers"]][d["algo"]] = d
        for n, v in sorted(key.items()):
            sb = v['ina']['bytes'] * 8 / v['ina']['rate_bps'] * 1e3
            f.write(f"{n}\t{v['ina']['time_ms']}\t{v['ring']['time_ms']}\t{v['ring']['bound_ms']}\t{sb}\t{v['ina']['sim_wall_s']}\t{v['ring']['sim_wall_s']}\n")
    with open(os.path.join(out, "workers.md"), "w") as m:
        m.write("| workers | ina ms | ina / (S/B) | ring ms | ring / (S/B) | 2(n-1)/n | ring closed form ms | "
                "sim wall s (ina, ring) |\n|---|---|---|---|---|---|---|---|\n")
        for n, v in sorted(key.items()):
            sb = v['ina']['bytes'] * 8 / v['ina']['rate_bps'] * 1e3
            i, r = v["ina"]["time_ms"], v["ring"]["time_ms"]
            m.write(f"| {n} | {i:.4g} | {i / sb:.3f} | {r:.4g} | {r / sb:.3f} | {2 * (n - 1) / n:.3f} | "
                    f"{v['ring']['bound_ms']:.4g} | {v['ina']['sim_wall_s']:.1f}, {v['ring']['sim_wall_s']:.1f} |\n")
rows = load("contention")
if rows:
    with open(os.path.join(out, "contention.tsv"), "w") as f:
        f.write("# oversub\tjobs\tina_max_ms\tina_mean_ms\tring_max_ms\tring_mean_ms\n")
        key = collections.defaultdict(dict)
        for d in rows: key[(d["oversub"], d["jobs"])][d["algo"]] = d
        for (o, j), v in sorted(key.items()):
            m = lambda d: sum(d["job_ms"]) / len(d["job_ms"])
            f.write(f"{o}\t{j}\t{v['ina']['time_ms']}\t{m(v['ina'])}\t{v['ring']['time_ms']}\t{m(v['ring'])}\n")
    with open(os.path.join(out, "contention.md"), "w") as md:
        md.write("| uplinks | jobs x workers | ina slowest job ms | ring slowest job ms | ring / ina |\n"
                 "|---|---|---|---|---|\n")
        for (o, j), v in sorted(key.items()):
            i, r = v["ina"]["time_ms"], v["ring"]["time_ms"]
            md.write(f"| {o:g}:1 | {j} x {v['ina']['workers']} | {i:.4g} | {r:.4g} | {r / i:.2f} |\n")
rows = load("calib")
if rows:
    with open(os.path.join(out, "calib.tsv"), "w") as f:
        f.write("# workers\trate_bps\telements\tina_model_ms\tring_model_ms\n")
        key = collections.defaultdict(dict)
        for d in rows: key[(d["workers"], d["rate_bps"], d["elements"])][d["algo"]] = d
        for (n, r, e), v in sorted(key.items()):
            f.write(f"{n}\t{r}\t{e}\t{v['ina']['time_ms']}\t{v['ring']['time_ms']}\n")
    # Measured (ina-bench's medians; several folders: one column of runs each) vs the model.
    meas = collections.defaultdict(list)
    for d in testbed:
        for l in open(os.path.join(d, "results.jsonl")):
            m = json.loads(l)
            if m.get("system") != "ina":
                continue
            retx = 100.0 * m["retransmissions"] / max(1, m["packets_sent"])
            meas[(m["workers"], m["rate_bps"], m["elements"])].append(
                (m["ina_ms_median"], m["gloo_ms_median"], retx))
    if meas:
        with open(os.path.join(out, "calib.md"), "w") as f:
            f.write("| workers | rate | floats | ina measured ms (retx %) | ina model ms | model / measured | "
                    "Gloo ring measured ms | ring model ms | model / measured |\n|---|---|---|---|---|---|---|---|---|\n")
            for (n, r, e), runs in sorted(meas.items()):
                v = key.get((n, r, e))
                if not v:
                    continue
                mi, mr = v["ina"]["time_ms"], v["ring"]["time_ms"]
                ina_s = ", ".join(f"{a:.0f} ({x:.1f})" for a, _, x in runs)
                ring_s = ", ".join(f"{b:.0f}" for _, b, _ in runs)
                ri = ", ".join(f"{mi / a:.2f}" for a, _, _ in runs)
                rr = ", ".join(f"{mr / b:.2f}" for _, b, _ in runs)
                f.write(f"| {n} | {r / 1e6:g} Mbit/s | {e // 1048576}M | {ina_s} | {mi:.0f} | {ri} | "
                        f"{ring_s} | {mr:.0f} | {rr} |\n")
rows = load("jumbo")
if rows:
    key = collections.defaultdict(dict)
    for d in rows: key[(d["workers"], d["elements"])][d["algo"]] = d
    meas = collections.defaultdict(list)
    for d in testbed:
        for l in open(os.path.join(d, "results.jsonl")):
            m = json.loads(l)
            if m.get("system") == "ina" and m.get("mtu") == 9000 and m.get("k") == 2048:
                meas[(m["workers"], m["elements"])].append(m)
    with open(os.path.join(out, "jumbo.md"), "w") as f:
        f.write("| workers | floats | ina measured ms | ina model ms | model / measured | "
                "switch us/packet measured | Gloo ring measured ms | ring model ms | model / measured |\n"
                "|---|---|---|---|---|---|---|---|---|\n")
        for (n, e), v in sorted(key.items()):
            mi, mr = v["ina"]["time_ms"], v["ring"]["time_ms"]
            runs = meas.get((n, e), [])
            ina_s = ", ".join(f"{m['ina_ms_median']:.0f}" for m in runs) or "-"
            ri = ", ".join(f"{mi / m['ina_ms_median']:.2f}" for m in runs) or "-"
            cost = ", ".join(f"{1000 * m.get('switch_cpu_ms', 0) / max(1, m['packets_sent']):.1f}"
                             for m in runs) or "-"
            ring_s = ", ".join(f"{m['gloo_ms_median']:.0f}" for m in runs) or "-"
            rr = ", ".join(f"{mr / m['gloo_ms_median']:.2f}" for m in runs) or "-"
            f.write(f"| {n} | {e // 1048576}M | {ina_s} | {mi:.0f} | {ri} | {cost} | {ring_s} | "
                    f"{mr:.0f} | {rr} |\n")
PY
# The model's parameters per figure, for its title (the fabric of the scale figures is in scale.gp's).
declare -A NOTE=([calib]="model: ${CALIB//--/}" [jumbo]="model: ${JUMBO//--/}")
[[ $TABLES_ONLY -eq 1 ]] || NOTE[host]="computed on $(nproc) CPUs"
for fig in size workers contention calib jumbo; do
  [[ -s $OUT/$fig.jsonl ]] || continue
  meas=()
  if [[ $fig == calib || $fig == jumbo ]]; then
    for d in "${TESTBED[@]}"; do meas+=("$d/results.jsonl"); done
  fi
  note=${NOTE[$fig]:-}
  [[ -z ${NOTE[host]:-} ]] || note+=${note:+; }${NOTE[host]}
  python3 "$ROOT/scripts/plot/plot.py" "scale-$fig" "$OUT/scale-$fig.png" "$OUT/$fig.jsonl" \
    "${meas[@]}" --note "$note" || echo "scale-sim: no plot of $fig" >&2
done
exit $rc
