#!/usr/bin/env python3
"""ina-switchd --metrics, scraped as Prometheus would: a live switch on loopback, a real job of
2 workers (ina-bench --switch), scrapes over HTTP parsed by Prometheus' own Python client
(prometheus_client.parser). Checks that the counters move with the traffic, that the job shows
while it runs, and that one malformed datagram is counted under its reason, exactly.

usage: metrics_e2e_test.py INA_SWITCHD INA_BENCH   (exit 77: skipped, with the reason)
"""
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("SKIP: python3-prometheus-client is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

SWITCHD, BENCH = sys.argv[1], sys.argv[2]
for prog in (SWITCHD, BENCH):
    if not os.path.exists(prog):  # a build dir that builds only some targets (sanitizers)
        print(f"SKIP: {prog} is not built in this build directory")
        sys.exit(77)
DEADLINE = time.monotonic() + 90


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def scrape(url):
    """{(name, frozenset(labels)): value} of one scrape, checked by the client's parser."""
    with urllib.request.urlopen(url, timeout=5) as r:
        if r.status != 200:
            fail(f"{url}: HTTP {r.status}")
        ctype = r.headers.get("Content-Type", "")
        if not ctype.startswith("text/plain; version=0.0.4"):
            fail(f"{url}: Content-Type {ctype!r}")
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        if not fam.documentation:
            fail(f"family {fam.name} has no HELP")
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def total(m, name, **labels):
    """Sum of a metric's samples whose labels include `labels` (over cores, say)."""
    want = set(labels.items())
    return sum(v for (n, l), v in m.items() if n == name and want <= set(l))


def main():
    sw = subprocess.Popen([SWITCHD, "--port", "0", "--metrics", "127.0.0.1:0"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = addr = None
        while (url is None or addr is None) and time.monotonic() < DEADLINE:
            line = sw.stdout.readline()
            if not line:
                fail("ina-switchd exited before listening")
            if m := re.search(r"metrics at (http://\S+)", line):
                url = m.group(1)
            if m := re.search(r"listening on (\S+)", line):
                addr = m.group(1)
        print(f"switch {addr}, metrics {url}")

        before = scrape(url)
        for name in ("ina_switch_rx_packets_total", "ina_switch_results_total",
                     "ina_switch_dropped_packets_total", "ina_switch_jobs",
                     "ina_switch_pool_slots", "ina_switch_uptime_seconds"):
            if not any(n == name for n, _ in before):
                fail(f"no {name} in the first scrape")
        if total(before, "ina_switch_rx_packets_total") != 0:
            fail("rx_packets is not 0 before any traffic")

        # One malformed datagram (too short for a header): exactly one more malformed drop.
        host, port = addr.rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"\x02\x01", (host, int(port)))
        reason = {"reason": "malformed"}
        for _ in range(100):
            after = scrape(url)
            if total(after, "ina_switch_dropped_packets_total", **reason) >= 1:
                break
            time.sleep(0.05)
        got = total(after, "ina_switch_dropped_packets_total", **reason)
        if got != 1:
            fail(f"dropped_packets_total{{reason=malformed}} is {got} after one malformed datagram")
        print("one malformed datagram: dropped_packets_total{reason=malformed} 0 -> 1")

        # A job of 2 workers for long enough to be seen active (scrapes every 50 ms).
        elements, iters = 1 << 20, 40
        bench = subprocess.Popen(
            [BENCH, "--switch", addr, "--workers", "2", "--elements", str(elements),
             "--iters", str(iters), "--no-gloo"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen_job = None
        while bench.poll() is None and time.monotonic() < DEADLINE:
            m = scrape(url)
            for (n, l), v in m.items():
                if n == "ina_switch_job_world_size" and v == 2:
                    labels = dict(l)
                    if total(m, "ina_switch_jobs", state="active") >= 1:
                        seen_job = labels["job"]
            time.sleep(0.05)
        out, _ = bench.communicate(timeout=max(1, DEADLINE - time.monotonic()))
        if bench.returncode != 0:
            fail(f"ina-bench failed ({bench.returncode}):\n{out}")
        if seen_job is None:
            fail("no scrape saw the job active with ina_switch_job_world_size 2")
        print(f"job {seen_job} seen active, world size 2")

        # The counters moved with the traffic: every data packet of 2 ranks reached the engine.
        end = scrape(url)
        rx_data = total(end, "ina_switch_rx_data_packets_total")
        results = total(end, "ina_switch_results_total")
        k = 2048  # the largest K: whatever K the job runs at, it sends at least this many
        least = 2 * iters * -(-elements // k)
        print(f"rx_data_packets_total {rx_data:.0f}, results_total {results:.0f} "
              f"(at least {least} data packets expected)")
        if rx_data < least or results < least // 2:
            fail("the counters did not move with the traffic")
        if total(end, "ina_switch_rx_packets_total") < rx_data:
            fail("rx_packets_total below rx_data_packets_total")
        if total(end, "ina_switch_jobs_admitted_total") < 1:
            fail("jobs_admitted_total did not move")
        if total(end, "ina_switch_port_rx_packets_total") < rx_data:
            fail("port rx packets below rx_data_packets_total")
        try:
            urllib.request.urlopen(url.replace("/metrics", "/nope"), timeout=5)
            fail("/nope did not answer 404")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                fail(f"/nope answered {e.code}")
        print("PASS")
    finally:
        sw.terminate()
        try:
            sw.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sw.kill()


if __name__ == "__main__":
    main()
