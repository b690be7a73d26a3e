#!/usr/bin/env python3
"""Timing of single scrapes with hyperfine, healthy upstream and then slow and flapping upstream,
in the three forms a scraper asks for: classic text, OpenMetrics (what Prometheus asks for), and
gzip. Each timing includes starting curl, so compare the rows with one another rather than
reading them as the exporter's own latency (bench/load.py measures that with wrk).

Usage: python3 bench/scrape_latency.py      (needs cargo, curl, hyperfine)
Environment: RUNS (300 per command), FLAP_EVERY (2), API_TIMEOUT (1s), COLLECTOR_INTERVAL (2s),
BENCH_SKIP_BUILD, BENCH_WORK (see load.py).
"""

import os
import subprocess
import time

import harness as h

NAMES = ["text", "openmetrics", "gzip"]


def run():
    runs = h.env_int("RUNS", 300)
    flap_every = h.env_int("FLAP_EVERY", 2)
    api_timeout = os.environ.get("API_TIMEOUT", "1s")
    interval = os.environ.get("COLLECTOR_INTERVAL", "2s")
    h.need("curl", "curl")
    h.need("hyperfine", "hyperfine")

    with h.Bench("mailhost-scrape.", os.environ.get("BENCH_WORK")) as b:
        exporter = b.start_demo(api_timeout, interval)

        url = f"{exporter.url}/metrics"
        commands = [
            f"curl -sf -o /dev/null {url}",
            f"curl -sf -o /dev/null -H 'Accept: application/openmetrics-text;version=1.0.0' {url}",
            f"curl -sf -o /dev/null -H 'Accept-Encoding: gzip' {url}",
        ]

        def time_scrapes(label):
            args = ["hyperfine", "--time-unit", "millisecond", "-N", "--warmup", "20",
                    "--runs", str(runs), "--style", "none",
                    "--export-markdown", b.path(f"hyperfine.{label}.md")]
            for name, command in zip(NAMES, commands):
                args += ["--command-name", f"{name} ({label})", command]
            # Bounded: RUNS scrapes per command; --time-unit keeps the columns comparable.
            h.run_tool(args, 300, capture=False)

        time_scrapes("healthy")
        flap_log = b.path("flap.log")
        if os.path.exists(flap_log):
            os.remove(flap_log)
        flapper = b.flap(flap_every, 240, flap_log)
        time.sleep(2 * flap_every)
        time_scrapes("flapping")
        flapper.stop()

        version = subprocess.run(["hyperfine", "--version"], capture_output=True, text=True)
        r = h.Report(b.path("report.md"))
        r(f"## Single scrapes with hyperfine ({runs} runs each, curl start-up included)")
        r()
        r(f"- Date: {h.now_utc()}")
        r(f"- Machine: {h.machine()}")
        r(f"- Revision: {h.revision()}")
        r(f"- Load average (1, 5, 15 min): {h.loadavg()}")
        r(f"- {version.stdout.strip()}")
        r()
        with open(b.path("hyperfine.healthy.md")) as f:
            healthy = f.read().splitlines()
        with open(b.path("hyperfine.flapping.md")) as f:
            flapping = f.read().splitlines()
        for line in healthy + flapping[2:]:
            r(line)


if __name__ == "__main__":
    h.main(run)
