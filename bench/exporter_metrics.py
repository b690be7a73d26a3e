#!/usr/bin/env python3
"""What the process_* series cost a scrape: wrk against demo mode's /metrics with them (the
default) and with --web.disable-exporter-metrics, identity and gzip, in alternating rounds so
that the machine's drift falls on both sides.

Usage: python3 bench/exporter_metrics.py      (needs cargo, wrk)
Environment: ROUNDS (2), SECONDS (8 per wrk run), CONNECTIONS (32), BENCH_SKIP_BUILD, BENCH_WORK.
"""

import os
import re

import harness as h


def wrk(url, gzip, seconds, connections):
    args = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency",
            "-H", f"Accept-Encoding: {'gzip' if gzip else 'identity'}", url]
    text = h.run_tool(args, seconds + 30)
    rps = re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1)
    p50 = re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1)
    p99 = re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1)
    return rps, p50, p99


def run():
    rounds = h.env_int("ROUNDS", 2)
    seconds = h.env_int("SECONDS", 8)
    connections = h.env_int("CONNECTIONS", 32)
    h.need("wrk", "wrk")
    h.build(os.environ.get("BENCH_SKIP_BUILD") != "1")
    with h.Bench("mailhost-exporter-metrics.", os.environ.get("BENCH_WORK")) as b:
        r = h.Report(b.path("report.md"))
        r(f"## process_* series on /metrics: wrk -t2 -c{connections} -d{seconds}s, demo mode")
        r()
        r(f"- Date: {h.now_utc()}")
        r(f"- Machine: {h.machine()}")
        r(f"- Revision: {h.revision()}")
        r(f"- Load average (1, 5, 15 min) at the start: {h.loadavg()}")
        r()
        r("| Round | process_* | Encoding | Requests/s | p50 | p99 |")
        r("|---|---|---|---|---|---|")
        for round_ in range(1, rounds + 1):
            for flags, label in [((), "on (default)"),
                                 (("--web.disable-exporter-metrics",), "off")]:
                exporter = b.start_exporter(extra=flags, log=f"exporter.{round_}.{len(flags)}.log")
                b.wait_ready(exporter)
                for gzip in (False, True):
                    rps, p50, p99 = wrk(f"{exporter.url}/metrics", gzip, seconds, connections)
                    r(f"| {round_} | {label} | {'gzip' if gzip else 'identity'} | {rps} | {p50} | {p99} |")
                b.stop(exporter.proc)
        r()
        r(f"- Load average at the end: {h.loadavg()}")


if __name__ == "__main__":
    h.main(run)
