#!/usr/bin/env python3
"""Draws the figure of a benchmark script's JSON output as a PNG, with gnuplot.

  scripts/plot/plot.py KIND OUT.png INPUT... [--note TEXT]

KIND             INPUT (written by)                               figure
testbed          results.jsonl (scripts/testbed.sh)               time vs size: ina, its line-rate
                                                                  bound, Gloo, MPI, ina-dpdk
switch-scaling   JSON line(s) (scripts/bench-switch-scaling.sh)   packets/s vs switch cores, the
                                                                  ideal N x (1 core) and 0.7 N lines
pps              JSON line(s) (scripts/bench-pps.sh)              ina beside its plain-DPDK ceiling
sharing          results.jsonl (scripts/sharing_testbed.sh)       each job's and the aggregate
                                                                  throughput vs jobs, the bound
quant            Google Benchmark JSON (scripts/bench-quant.sh)   GiB/s per kernel and variant
rtl              rtl-bench.jsonl (scripts/bench-rtl.sh)           beat efficiency, Gbit/s and
                                                                  simulation speed vs K
collnet          JSON lines (scripts/nccl-collnet-bench.sh)       MB/s per node
torch            torch.json (scripts/torch_testbed.sh)            DDP median step, ina beside gloo
scale-size, scale-workers, scale-contention
                 ina-scale-sim's JSON lines (scripts/scale-sim.sh) the model's sweeps
scale-calib, scale-jumbo
                 the sweep's JSON lines, then testbed.sh          model beside the testbed runs
                 results.jsonl files (optional)

The figure's title says the machine (the JSON's "cpus") and the run's parameters; --note adds a
line. Each kind turns its input into tab-separated tables in a temporary folder and runs
scripts/plot/<figure>.gp on them (bars.gp: grouped bars, used by several kinds).
Exit status: 0 when OUT.png was written, and also when gnuplot is missing (said on stderr: a
benchmark never fails for want of a plot); 1 on input it cannot plot; 2 on bad usage.
Python standard library only.
"""
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


class PlotError(Exception):
    pass


def load(path):
    """JSON objects of a file: one JSON document, or one per line (lines not starting '{' skipped)."""
    with open(path) as f:
        text = f.read()
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def load_all(paths):
    rows = []
    for p in paths:
        rows += load(p)
    if not rows:
        raise PlotError("no JSON objects in " + ", ".join(paths))
    return rows


def q(s):
    """A gnuplot double-quoted string (newlines kept as \\n)."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + s + '"'


def wrap(text, width=95):  # width in characters: about a tenth of the figure's pixels
    """Breaks a title after "; " or ", " so that no line is longer than width (where it can)."""
    lines, cur = [], ""
    for part in text.replace("; ", ";\x00").replace(", ", ",\x00").split("\x00"):
        if cur and len(cur) + 1 + len(part) > width:
            lines.append(cur)
            cur = part
        else:
            cur = f"{cur} {part}" if cur else part
    return "\n".join(lines + [cur])


def garray(name, items):
    if not items:
        return f"array {name}[1]\n"
    return f"array {name}[{len(items)}] = [" + ", ".join(q(i) for i in items) + "]\n"


def num(v):
    return "NaN" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(float(v))


def write_tsv(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write("\t".join(num(c) if not isinstance(c, str) else c for c in r) + "\n")


def rate_text(bps):
    for unit, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= div:
            return f"{bps / div:g} {unit}"
    return f"{bps:g} bit/s"


def cpus_text(rows):
    c = next((r["cpus"] for r in rows if "cpus" in r), None)
    return f"{c} CPUs" if c else "CPUs not recorded"


def floats_text(n):
    for unit, div in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit} floats"
    return f"{n} floats"


def mib(elements):
    return elements * 4.0 / 1048576


# ---- grouped bars (bars.gp) ----
def bars(d, fig, note):
    """fig: title, ylabel, series (legend names), groups: [{label, bars: [(series, value, dots,
    text)], segs: [(segnames index, value, series it spans or None: the whole group)]}],
    segnames, logy. A bar whose value is None is left out."""
    files = {i: [] for i in range(len(fig["series"]))}
    segs = {i: [] for i in range(len(fig.get("segnames", [])))}
    dots, labels, tics = [], [], []
    top = 0.0
    for g, grp in enumerate(fig["groups"]):
        bs = [b for b in grp["bars"] if b[1] is not None]
        w = 0.84 / max(len(bs), 1)
        xs = [g - 0.42 + (i + 0.5) * w for i in range(len(bs))]
        for x, (s, v, ds, text) in zip(xs, bs):
            files[s].append((x, v, w * 0.92))
            labels.append((x, v, text))
            top = max([top, v] + list(ds or []))
            dots += [(x, dv) for dv in ds or []]
        for si, v, span in grp.get("segs", []):
            under = [x for x, b in zip(xs, bs) if span is None or b[0] in span]
            if v is None or not under:
                continue
            a, b = (g - 0.45, g + 0.45) if span is None else (min(under) - w / 2, max(under) + w / 2)
            segs[si].append((a, v, b - a, 0))
            top = max(top, v)
        tics.append((g, grp["label"]))
    for s, rows in files.items():
        write_tsv(os.path.join(d, f"bar{s + 1}.tsv"), rows)
    for s, rows in segs.items():
        write_tsv(os.path.join(d, f"seg{s + 1}.tsv"), rows)
    write_tsv(os.path.join(d, "dots.tsv"), dots)
    write_tsv(os.path.join(d, "labels.tsv"), labels)
    write_tsv(os.path.join(d, "xtics.tsv"), tics)
    segnames = fig.get("segnames") or [""]  # one (empty) at least: see bars.gp
    if not segs:
        write_tsv(os.path.join(d, "seg1.tsv"), [])
    width = fig.get("width", max(900, 140 + 90 * len(labels)))
    # Group labels turned when they would not fit side by side (about 7 px a character).
    rot = 30 if 7 * sum(len(t[1]) for t in tics) > 0.85 * width else 0
    pre = garray("series", fig["series"]) + garray("segnames", segnames)
    pre += (f"nseries = {len(fig['series'])}\nnsegs = {len(segnames)}\n"
            f"ngroups = {len(fig['groups'])}\nhasdots = {1 if dots else 0}\n"
            f"logy = {1 if fig.get('logy') else 0}\nytop = {top!r}\n"
            f"ylab = {q(fig['ylabel'])}\n"
            f"width = {width}\nrot = {rot}\n"
            f"title = {q(wrap(fig['title'], width // 10))}\nnote = {q(wrap(note, width // 10))}\n")
    return "bars.gp", pre


def fmt_ms(v):
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


# ---- kinds ----
def kind_testbed(d, paths, note):
    rows = load_all(paths)
    by = {}
    for r in rows:
        by.setdefault(r["elements"], {})[r.get("system", "ina")] = r
    tab = []
    for e in sorted(by):
        s = by[e]
        ina, mpi, dpdk = s.get("ina"), s.get("mpi"), s.get("ina-dpdk")
        bound = (ina or dpdk or {}).get("bound_ms")
        gloo = ina.get("gloo_ms_median") if ina else None
        pos = lambda v: v if v is not None and v > 0 else None  # noqa: E731
        tab.append((mib(e), pos(ina and ina.get("ina_ms_median")), pos(bound), pos(gloo),
                    pos(mpi and mpi.get("mpi_ms_median")), pos(dpdk and dpdk.get("ina_ms_median"))))
    write_tsv(os.path.join(d, "testbed.tsv"), tab)
    r = next((r for r in rows if r.get("system") in ("ina", "ina-dpdk")), rows[0])
    parts = [f"{r.get('workers', '?')} workers", f"{rate_text(r['rate_bps'])} links"
             if "rate_bps" in r else None, f"MTU {r['mtu']}" if "mtu" in r else None,
             f"K={r['k']}" if "k" in r else None, f"window {r['window']}" if "window" in r else None,
             f"median of {r['iters']}" if "iters" in r else None, cpus_text(rows)]
    title = "all-reduce time vs size: " + ", ".join(p for p in parts if p)
    ran = [int(any(row[c] is not None for row in tab)) for c in (3, 4, 5)]  # gloo, mpi, ina-dpdk
    return "testbed.gp", (f"title = {q(wrap(title))}\nnote = {q(wrap(note))}\n"
                          f"hasgloo = {ran[0]}\nhasmpi = {ran[1]}\nhasdpdk = {ran[2]}\n")


def kind_switch_scaling(d, paths, note):
    rows = load_all(paths)
    names = []
    for i, r in enumerate(rows):
        runs = sorted(r.get("runs", []), key=lambda x: x["cores"])
        one = next((x["switch_pps"] for x in runs if x["cores"] == 1), None)
        tab = [(x["cores"], x["switch_pps"], x["workers_pps"],
                1 if x.get("pinned", True) else 0) for x in runs]
        write_tsv(os.path.join(d, f"run{i + 1}.tsv"), tab)
        # The references start from the 1-core rate: N x it (ideal) and 0.7 N x it (the target).
        ref = [(n, one * n if one else None, 0.7 * one * n if one else None) for n in (1, 2, 4, 8)]
        write_tsv(os.path.join(d, f"ref{i + 1}.tsv"), ref)
        mode = ("one job on every core (--core-ports 1, a lane per core)" if r.get("one_job")
                else "one job per core")
        names.append(f"{mode}, {floats_text(r['elements'])} x {r['repeats']}, K={r['k']}"
                     + (f", {cpus_text([r])}" if len(rows) > 1 else ""))
    unpinned = any(not x.get("pinned", True) for r in rows for x in r.get("runs", []))
    title = "ina-switchd --cores N over UDP on loopback, one worker process per job"
    if len(rows) == 1:
        title += "; " + cpus_text(rows)
    if unpinned:
        note = (note + "; " if note else "") + "open points ran unpinned (fewer than 2N CPUs): their rates mean nothing"
    pre = garray("names", names) + f"nruns = {len(rows)}\ntitle = {q(wrap(title))}\nnote = {q(wrap(note))}\n"
    return "switch-scaling.gp", pre


def kind_pps(d, paths, note):
    rows = load_all(paths)
    groups = []
    for r in rows:
        ratio = r["ina_pps"] / r["ceiling_pps"] if r.get("ceiling_pps") else 0
        groups.append({
            "label": f"K={r['k']}, {r['frame_bytes']}-byte frames, MTU {r['mtu']}",
            "bars": [(0, r["ina_pps"] / 1e6, [v / 1e6 for v in r.get("ina_rounds", [])],
                      f"{r['ina_pps'] / 1e6:.2f} M ({ratio:.2f} of ceiling)"),
                     (1, r["ceiling_pps"] / 1e6, [v / 1e6 for v in r.get("ceiling_rounds", [])],
                      f"{r['ceiling_pps'] / 1e6:.2f} M")],
            "segs": [(0, r["ceiling_pps"] / 1e6, None)]})
    r = rows[0]
    title = (f"one worker + one switch core over net_memif vs plain DPDK, window {r['window']}, "
             f"median of {r['rounds']} rounds ({floats_text(r['elements'])}); {cpus_text(rows)}")
    fig = {"title": title, "ylabel": "packets per second (millions)",
           "series": ["ina (ina-bench --transport memif)", "ceiling: plain DPDK echo (ina-pps-ceiling)"],
           "segnames": ["ceiling"], "groups": groups}
    return bars(d, fig, note)


def kind_sharing(d, paths, note):
    rows = load_all(paths)
    by = {}
    for r in rows:
        by.setdefault(r["jobs"], []).append(r)
    groups = []
    for j in sorted(by):
        rs = sorted(by[j], key=lambda r: r["job"])
        xs = [r["elements"] * 32 / (r["ina_ms_median"] / 1e3) / 1e6 for r in rs]
        agg = sum(xs)
        jain = agg * agg / (len(xs) * sum(x * x for x in xs))
        r = rs[0]
        bound = None
        if "overhead" in r and "wire_bytes_per_worker" in r:
            s = (r["wire_bytes_per_worker"] + r["wire_frames_per_worker"] * r["overhead"]) * 8 / r["rate_bps"]
            bound = r["elements"] * 32 / s / 1e6
        b = [(0, x, None, f"{x:.1f}") for x in xs]
        segs = [(0, bound, (0,))]
        if j > 1:  # one job alone is its own aggregate
            b.append((1, agg, None, f"{agg:.1f}"))
            segs = [(0, bound, (1,)), (1, bound / j if bound else None, (0,))]
        groups.append({"label": f"{j} job{'s' if j > 1 else ''} (Jain {jain:.4f})", "bars": b,
                       "segs": segs})
    r = rows[0]
    title = (f"jobs sharing one ina-switchd: {r['workers']} ranks each, {rate_text(r['rate_bps'])} "
             f"links, {floats_text(r['elements'])}, median of {r['iters']}, pool {r['slots']} slots, "
             f"window {r['window']}, lease {r['lease_calls']} calls; {cpus_text(rows)}")
    fig = {"title": title, "ylabel": "throughput (Mbit/s of tensor per median call)",
           "series": ["each job", "all jobs together"],
           "segnames": ["line-rate bound (all jobs together)", "fair share of the bound"],
           "groups": groups}
    return bars(d, fig, note)


VARIANT_ORDER = ["scalar", "avx2", "avx512"]


def kind_quant(d, paths, note):
    docs = []
    for p in paths:
        with open(p) as f:
            docs.append(json.load(f))
    runs = {}
    for doc in docs:
        for b in doc["benchmarks"]:
            if b.get("run_type", "iteration") != "iteration":
                continue
            kernel, variant, n = b["name"].split("/")[:3]
            runs.setdefault((kernel, n), {}).setdefault(variant, []).append(b["bytes_per_second"] / 2**30)
    if not runs:
        raise PlotError("no benchmark runs in " + ", ".join(paths))
    variants = sorted({v for k in runs.values() for v in k},
                      key=lambda v: (VARIANT_ORDER.index(v) if v in VARIANT_ORDER else 99, v))
    sizes = sorted({n for _, n in runs}, key=int)
    groups = []
    for kernel in dict.fromkeys(k for k, _ in runs):
        for n in sizes:
            if (kernel, n) not in runs:
                continue
            vs = runs[(kernel, n)]
            b = []
            for i, v in enumerate(variants):
                if v in vs:
                    m = statistics.median(vs[v])
                    b.append((i, m, vs[v] if len(vs[v]) > 1 else None, f"{m:.1f}"))
            label = kernel if len(sizes) == 1 else f"{kernel}, {int(n) * 4 // 1024} KiB"
            groups.append({"label": label, "bars": b})
    ctx = docs[0].get("context", {})
    load_avg = ctx.get("load_avg")
    title = (f"ina-quant-bench: quantization kernels over {', '.join(floats_text(int(n)) for n in sizes)} "
             f"(K=256 blocks); {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz"
             + (f", load average {load_avg[0]:.1f}" if load_avg else ""))
    fig = {"title": title, "ylabel": "float data through the kernel (GiB/s, from CPU time)",
           "series": variants, "groups": groups}
    return bars(d, fig, note)


def kind_rtl(d, paths, note):
    rows = load_all(paths)
    head = next((r for r in rows if "pool_slots" in r), {})
    rows = [r for r in rows if "order" in r]
    orders = list(dict.fromkeys(r["order"] for r in rows))
    for i, o in enumerate(orders):
        tab = []
        for r in sorted((r for r in rows if r["order"] == o), key=lambda r: r["k"]):
            beats = r["in_beats"] / r["packets"]
            # One beat per cycle: the line rate if every frame took only its own beats.
            tab.append((r["k"], r["beat_efficiency"], r["line_rate_gbps"],
                        r["line_rate_gbps"] * r["cycles_per_packet"] / beats,
                        r["sim_speed_cpu"] / 1e6, r["sim_speed"] / 1e6))
        write_tsv(os.path.join(d, f"order{i + 1}.tsv"), tab)
    title = (f"ina-rtl-bench: ina_core under saturated input, no backpressure "
             f"(PoolSlots {head.get('pool_slots', '?')}, MaxK {head.get('max_k', '?')}); "
             f"{cpus_text([head] + rows)}")
    pre = garray("orders", orders) + f"norders = {len(orders)}\ntitle = {q(wrap(title))}\nnote = {q(wrap(note))}\n"
    return "rtl.gp", pre


def kind_collnet(d, paths, note):
    rows = sorted(load_all(paths), key=lambda r: r.get("rank", 0))
    groups = [{"label": f"rank {r['rank']}", "bars": [(0, r["mb_per_s"], None, f"{r['mb_per_s']:.0f}")]}
              for r in rows if r.get("ok")]
    if not groups:
        raise PlotError("no node reported ok")
    r = rows[0]
    title = (f"CollNet all-reduce through libnccl-net-ina.so on loopback (no NCCL, no GPU): "
             f"{r['nodes']} nodes, {r['bytes'] // 1048576} MiB each"
             + (f"; {cpus_text(rows)}" if any("cpus" in r for r in rows) else ""))
    fig = {"title": title, "ylabel": "data reduced (MB/s)",
           "series": ["ina CollNet (nccl_abi_peer bench)"], "groups": groups}
    return bars(d, fig, note)


def kind_torch(d, paths, note):
    rows = load_all(paths)
    def label(r):
        text = (f"{rate_text(r['rate_bps'])} links, MLP 64-{r['hidden']} x{r['layers']}-10, "
                f"{r['steps']} steps")
        if "mtu" in r:  # runs that know their MTU and torch (older torch.json files do not)
            text = f"{rate_text(r['rate_bps'])}, MTU {r['mtu']}, torch {r['torch'].split('+')[0]}"
        return text
    groups = [{"label": label(r),
               "bars": [(0, r["ina_median_step_ms"], None, f"{r['ina_median_step_ms']:.0f}"),
                        (1, r["gloo_median_step_ms"], None, f"{r['gloo_median_step_ms']:.0f}")]}
              for r in rows]
    r = rows[0]
    title = (f"PyTorch DDP training step (examples/train_ddp.py), {r['workers']} ranks on the "
             f"rate-limited testbed, batch {r['batch']} per rank, CPU; {cpus_text(rows)}")
    if "mtu" in r:
        title += f"\nMLP 64-{r['hidden']} x{r['layers']}-10, {r['steps']} steps"
    fig = {"title": title, "ylabel": "median step time (ms; steps after the first 2)",
           "series": ["backend ina (ina-switchd)", "backend gloo (ring)"], "groups": groups}
    return bars(d, fig, note)


def scale_keyed(rows, key):
    out = {}
    for r in rows:
        out.setdefault(key(r), {})[r["algo"]] = r
    return out


def kind_scale(fig):
    def run(d, paths, note):
        rows = load_all(paths)
        if fig == "size":
            k = scale_keyed(rows, lambda r: (r["workers"], r["elements"]))
            tab = [(n, e, v["ina"]["time_ms"], v["ina"]["bound_ms"], v["ring"]["time_ms"],
                    v["ring"]["bound_ms"]) for (n, e), v in sorted(k.items()) if len(v) == 2]
        elif fig == "workers":
            k = scale_keyed(rows, lambda r: r["workers"])
            tab = [(n, v["ina"]["time_ms"], v["ring"]["time_ms"], v["ring"]["bound_ms"],
                    v["ina"]["bytes"] * 8 / v["ina"]["rate_bps"] * 1e3)
                   for n, v in sorted(k.items()) if len(v) == 2]
        else:
            k = scale_keyed(rows, lambda r: (r["oversub"], r["jobs"]))
            tab = [(o, j, v["ina"]["time_ms"], v["ring"]["time_ms"])
                   for (o, j), v in sorted(k.items()) if len(v) == 2]
        if not tab:
            raise PlotError(f"no ina/ring pairs for scale-{fig}")
        write_tsv(os.path.join(d, fig + ".tsv"), tab)
        return "scale.gp", f"fig = {q(fig)}\nnote = {q(wrap(note))}\n"
    return run


def kind_scale_model(jumbo):
    """The calibration sweeps: the model's ina and ring beside testbed.sh's measured medians."""
    def run(d, paths, note):
        model = load_all(paths[:1])
        meas = {}
        for p in paths[1:]:
            for m in load(p):
                if m.get("system") != "ina" or (jumbo and (m.get("mtu"), m.get("k")) != (9000, 2048)):
                    continue
                meas.setdefault((m["workers"], m["rate_bps"], m["elements"]), []).append(m)
        groups, matched = [], False
        for (n, rate, e), v in sorted(scale_keyed(model, lambda r: (r["workers"], r["rate_bps"],
                                                                     r["elements"])).items()):
            if len(v) != 2:
                continue
            ms = meas.get((n, rate, e), [])
            matched = matched or bool(ms)
            ina_m = [m["ina_ms_median"] for m in ms]
            gloo_m = [m["gloo_ms_median"] for m in ms if m.get("gloo_ms_median", 0) > 0]
            med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
            b = [(0, med(ina_m), ina_m if len(ina_m) > 1 else None, fmt_ms(med(ina_m)) if ina_m else ""),
                 (1, v["ina"]["time_ms"], None, fmt_ms(v["ina"]["time_ms"])),
                 (2, med(gloo_m), gloo_m if len(gloo_m) > 1 else None, fmt_ms(med(gloo_m)) if gloo_m else ""),
                 (3, v["ring"]["time_ms"], None, fmt_ms(v["ring"]["time_ms"]))]
            groups.append({"label": f"{n} workers, {rate_text(rate)}, {floats_text(e)}", "bars": b,
                           "segs": [(0, v["ina"]["bound_ms"], (0, 1))]})  # over ina's bars
        if not groups:
            raise PlotError("no ina/ring pairs in " + paths[0])
        what = "1 Gbit/s, 9000-byte frames (K=2048)" if jumbo else "the testbed's calibration points"
        title = (f"ina-scale-sim (SimGrid model) beside scripts/testbed.sh, {what}"
                 + ("" if matched else ": model only (no testbed run at these points given)"))
        fig = {"title": title, "ylabel": "time per all-reduce (ms)", "logy": True,
               "series": ["ina measured (testbed)", "ina model", "Gloo ring measured (testbed)",
                          "ring model"],
               "segnames": ["ina line-rate bound (model)"], "groups": groups, "width": 1400}
        return bars(d, fig, note)
    return run


KINDS = {
    "testbed": kind_testbed,
    "switch-scaling": kind_switch_scaling,
    "pps": kind_pps,
    "sharing": kind_sharing,
    "quant": kind_quant,
    "rtl": kind_rtl,
    "collnet": kind_collnet,
    "torch": kind_torch,
    "scale-size": kind_scale("size"),
    "scale-workers": kind_scale("workers"),
    "scale-contention": kind_scale("contention"),
    "scale-calib": kind_scale_model(False),
    "scale-jumbo": kind_scale_model(True),
}


def main(argv):
    note = ""
    if "--note" in argv:
        i = argv.index("--note")
        if i + 1 >= len(argv):
            print("plot: --note wants a text", file=sys.stderr)
            return 2
        note = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 3 or argv[0] not in KINDS:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print("plot: kinds: " + ", ".join(KINDS), file=sys.stderr)
        return 2
    kind, out, inputs = argv[0], argv[1], argv[2:]
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print(f"plot: gnuplot not found (scripts/setup.sh installs gnuplot-nox); {out} not drawn",
              file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory(prefix="ina-plot-") as d:
        try:
            res = KINDS[kind](d, inputs, note)
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError, PlotError) as e:
            print(f"plot: {kind}: cannot plot {', '.join(inputs)}: {type(e).__name__}: {e}",
                  file=sys.stderr)
            return 1
        gp, pre = res
        tmp_out = out + ".tmp"  # a failed run leaves no half-written PNG
        with open(os.path.join(d, "vars.gp"), "w") as f:
            f.write(f"dir = {q(d)}\nout = {q(tmp_out)}\n" + pre)
        r = subprocess.run([gnuplot, os.path.join(d, "vars.gp"), os.path.join(HERE, gp)],
                           capture_output=True, text=True)
        # gnuplot warns about empty series ("Skipping data file with no valid points"): expected.
        err = "\n".join(l for l in r.stderr.splitlines() if "no valid points" not in l and l.strip())
        if r.returncode != 0 or not os.path.exists(tmp_out) or os.path.getsize(tmp_out) == 0:
            print(f"plot: gnuplot failed on {kind} (rc {r.returncode}):\n{err}", file=sys.stderr)
            if os.path.exists(tmp_out):
                os.unlink(tmp_out)
            return 1
        os.replace(tmp_out, out)
    print(f"plot: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
