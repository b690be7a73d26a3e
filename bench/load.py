#!/usr/bin/env python3
"""Load benchmark of /metrics while the upstream is slow and flapping.

Starts mailhost_sim (demo fleet, traffic generator) and mailhost_exporter (every collector on a
short interval, API timeout shorter than the injected latency) on free loopback ports, then:
  1. a baseline: wrk against /metrics with a healthy upstream;
  2. the load: the same wrk run while a background loop turns every polled route, every
     FLAP_EVERY seconds, through latency past the timeout, 500, 503, 429 with Retry-After,
     malformed bodies and no fault;
and prints a Markdown report: machine, revision, commands, throughput, latency percentiles,
non-2xx responses, socket errors, resident memory, and the exporter's own failure counters.

Usage: python3 bench/load.py      (from anywhere; needs cargo, wrk)
Environment: DURATION (30s), THREADS (2), CONNECTIONS (64), FLAP_EVERY (2), BASELINE (1 = run
the healthy baseline first, 0 = skip it), API_TIMEOUT (1s), COLLECTOR_INTERVAL (2s),
BENCH_SKIP_BUILD (1 = use existing release binaries), BENCH_WORK (directory for logs and raw
outputs; default a new one under /tmp).
"""

import os
import re
import subprocess
import sys
import time

import harness as h

LUA = os.path.join(h.ROOT, "bench", "wrk_report.lua")


def figures(text):
    """The "bench <key> <value>" lines of wrk_report.lua, in their order."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "bench":
            out[parts[1]] = parts[2]
    return out


def row(text, label):
    """One row of the results table from a wrk run's output."""
    f = figures(text)

    def fig(key):
        return f.get(key, "?")

    def ms(key):
        return "?" if key not in f else f"{int(f[key]) / 1000:.2f} ms"

    rps = ("?" if "requests" not in f or "duration_us" not in f else
           f"{int(f['requests']) / (int(f['duration_us']) / 1e6):.0f}")
    # wrk's own "Non-2xx or 3xx responses" line, or 0 when it prints none.
    wrk_non2xx = next((line.split()[-1] for line in text.splitlines()
                       if "Non-2xx or 3xx responses" in line), "0")
    statuses = ", ".join(f"{k[len('status_'):]}: {v}" for k, v in f.items()
                         if k.startswith("status_"))
    cells = [label, rps, ms("latency_p50_us"), ms("latency_p75_us"), ms("latency_p90_us"),
             ms("latency_p99_us"), ms("latency_max_us"), fig("requests"), fig("non_2xx"),
             wrk_non2xx,
             f"connect {fig('errors_connect')}, read {fig('errors_read')}, "
             f"write {fig('errors_write')}, timeout {fig('errors_timeout')}",
             statuses]
    return "| " + " | ".join(cells) + " |"


def scrape(url, path, what):
    """GET /metrics into a file of the work directory; the run ends if it fails."""
    body = h.get(f"{url}/metrics", timeout=5)
    if body is None:
        h.die(f"/metrics failed {what}")
    with open(path, "wb") as f:
        f.write(body)
    return body.decode(errors="replace")


def recovered(url, path):
    """After healing, how long until every collector succeeds again: at most 90 s, because a
    circuit breaker opened by the faults stays open for its cool-down (60 s by default) before a
    probe may close it."""
    for i in range(180):
        body = h.get(f"{url}/metrics", timeout=2)
        if body is not None:
            with open(path, "wb") as f:
                f.write(body)
            lines = body.decode(errors="replace").splitlines()
            if (any(line.startswith("mailhost_collector_success") for line in lines) and
                    all(re.search(r" 1(\.0)?$", line) for line in lines
                        if line.startswith("mailhost_collector_success{"))):
                return f"{i // 2}.{i % 2 * 5} s"
        time.sleep(0.5)
    return "not within 90 s"


def run():
    duration, duration_s = h.env_seconds("DURATION", "30s")
    threads = h.env_int("THREADS", 2)
    connections = h.env_int("CONNECTIONS", 64)
    flap_every = h.env_int("FLAP_EVERY", 2)
    baseline = os.environ.get("BASELINE", "1") == "1"
    api_timeout = os.environ.get("API_TIMEOUT", "1s")
    interval = os.environ.get("COLLECTOR_INTERVAL", "2s")
    # The flapping starts a little before the load and may outlive it by a few steps, never more.
    flap_max = duration_s + 10
    h.need("wrk", "wrk")

    with h.Bench("mailhost-bench.", os.environ.get("BENCH_WORK")) as b:
        exporter = b.start_demo(api_timeout, interval)
        url = exporter.url

        wrk_cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}", "--latency",
                   "-s", LUA, f"{url}/metrics"]
        # The command as a reader would type it from the repository root.
        wrk_shown = (f"wrk -t{threads} -c{connections} -d{duration} --latency "
                     f"-s bench/wrk_report.lua {url}/metrics")

        def wrk(name):
            out = h.run_tool(wrk_cmd, duration_s + 60)
            with open(b.path(f"wrk.{name}.txt"), "w") as f:
                f.write(out)
            return out

        # Scrape once: a sanity check of the body, and the counters before any fault.
        before = scrape(url, b.path("metrics.before"), "before the load")
        body_bytes = os.path.getsize(b.path("metrics.before"))
        body_lines = sum(1 for line in before.splitlines() if not line.startswith("#"))
        rss_ready = h.status_kib(exporter.pid, "VmRSS")
        load_start = h.loadavg()

        if baseline:
            h.note(f"baseline: {' '.join(wrk_cmd)} (healthy upstream)")
            wrk_baseline = wrk("baseline")
            body = h.get(f"{url}/metrics", timeout=5)
            if body is not None:
                with open(b.path("metrics.after_baseline"), "wb") as f:
                    f.write(body)

        # The upstream turns slow and flapping for the whole load.
        flap_log = b.path("flap.log")
        if os.path.exists(flap_log):
            os.remove(flap_log)
        flapper = b.flap(flap_every, flap_max, flap_log)
        # Two flapping steps before measuring, so every route is already misbehaving.
        time.sleep(2 * flap_every)

        rss_before = h.status_kib(exporter.pid, "VmRSS")
        h.note(f"load: {' '.join(wrk_cmd)} (upstream slow and flapping)")
        wrk_load = wrk("load")
        rss_after = h.status_kib(exporter.pid, "VmRSS")
        rss_peak = h.status_kib(exporter.pid, "VmHWM")
        after = scrape(url, b.path("metrics.after"), "after the load")

        # Stop the flapping (bounded: it notices within one step) and heal the upstream.
        flapper.stop()
        heal_status = b.heal()
        with open(flap_log) as f:
            changes = [line for line in f if " step=" in line]
        fault_refused = sum(1 for line in changes
                            if not re.search(r"status=(200|204)$", line.rstrip("\n")))
        flap_steps = max((int(line.split()[1][len("step="):]) + 1 for line in changes), default=0)

        # Endpoints with at least one target whose circuit breaker is open.
        circuit_open = len({re.sub(r'.*endpoint="([^"]*)".*', r"\1", labels) for labels, open_
                            in h.series(after, "mailhost_api_open_circuits").items() if open_ > 0})
        recovery = recovered(url, b.path("metrics.healed"))
        rss_end = h.status_kib(exporter.pid, "VmRSS")

        def delta(metric):
            return h.total(after, metric) - h.total(before, metric)

        wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
        wrk_version = " ".join(
            ((wrk_version.stdout + wrk_version.stderr).splitlines() or [""])[0].split()[:2])
        r = h.Report(b.path("report.md"))
        r("## Load benchmark: /metrics under a slow and flapping upstream")
        r()
        r(f"- Date: {h.now_utc()}")
        r(f"- Machine: {h.machine()}")
        r(f"- Revision: {h.revision()}")
        r(f"- Load average (1, 5, 15 min) at the start: {load_start}; at the end: {h.loadavg()} "
          "(other work on the machine skews the figures)")
        r(f"- wrk: {wrk_version}")
        r(f"- Command: `{wrk_shown}` (the port is picked at random; run by `bench/load.py`)")
        r(f"- Exporter: every collector, interval {interval}, `api.timeout` {api_timeout}; "
          f"/metrics body {body_bytes} bytes, {body_lines} samples (text format, no gzip: wrk "
          "sends no Accept-Encoding)")
        r(f"- Upstream during the load: every {flap_every} s ({flap_steps} steps, {len(changes)} "
          f"fault changes, {fault_refused} refused) each polled route moves to its next phase "
          f"of: {' '.join(name for name, _ in h.PHASES)}")
        r()
        r("| Run | Requests/s | p50 | p75 | p90 | p99 | Max | Requests | Non-2xx "
          "| wrk \"Non-2xx or 3xx\" | Socket errors | Statuses |")
        r("|---|---|---|---|---|---|---|---|---|---|---|---|")
        if baseline:
            r(row(wrk_baseline, "baseline, healthy upstream"))
        r(row(wrk_load, "load, slow and flapping upstream"))
        r()
        r(f"Resident memory of the exporter (VmRSS, KiB): ready {rss_ready}, before the load "
          f"{rss_before}, after the load {rss_after}, peak (VmHWM) {rss_peak}, after recovery "
          f"{rss_end}.")
        r()
        r(f"Upstream calls during the faulted load (`mailhost_api_requests_total`): "
          f"{delta('mailhost_api_requests_total')}, retries (`mailhost_api_retries_total`): "
          f"{delta('mailhost_api_retries_total')}.")
        r()
        r("| `mailhost_api_request_failures_total` reason | after the load | during the load |")
        r("|---|---|---|")
        # Failures by reason over the load: after minus before; largest first, then by name.
        reasons = "mailhost_api_request_failures_total"
        now, then = h.sum_by(after, reasons, "reason"), h.sum_by(before, reasons, "reason")
        for reason in sorted(now, key=lambda k: (-now[k], f"| {k} |")):
            r(f"| {reason} | {now[reason]} | {now[reason] - then.get(reason, 0)} |")
        r()
        r(f"Circuits open at the end of the load (`mailhost_api_open_circuits` > 0): "
          f"{circuit_open} endpoint(s).")
        r(f"Faults healed (status {heal_status:03d}); every collector successful again after: "
          f"{recovery}.")
        print(file=sys.stderr)
        h.note(f"raw outputs and logs: {b.work} (wrk.*.txt, flap.log, metrics.*, *.log)")


if __name__ == "__main__":
    h.main(run)
