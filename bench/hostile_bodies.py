#!/usr/bin/env python3
"""Memory of the exporter against hostile but valid answers (release binaries, loopback only).

  1. tiny objects: every polled route answers ~4 MB (TINY_BYTES) of tiny objects `{"a":1}`
     next to its real records, with api.concurrency 8 and 16 targets (8 single-record calls
     at once); prints the exporter's peak (VmHWM) and current (VmRSS) resident memory;
  2. changing keys: every polled route answers fresh random keys with unreadable values on
     every request (KEYS_COUNT per object), for KEYS_SECONDS; prints VmRSS at the start and
     every SAMPLE_EVERY seconds, and the number of parse-problem warn lines in the log.

Usage: python3 bench/hostile_bodies.py     (from anywhere; needs cargo)
Environment: TINY_SECONDS (30), TINY_BYTES (4000000), KEYS_SECONDS (300), KEYS_COUNT (20),
SAMPLE_EVERY (30), API_TIMEOUT (5s), COLLECTOR_INTERVAL (2s), BENCH_SKIP_BUILD (1 = use
existing release binaries), BENCH_WORK.
"""

import os
import re
import time

import harness as h


def lines(body, pattern):
    """The lines of `body` matching `pattern`, indented as a list's continuation."""
    return [f"    {line}" for line in body.splitlines() if re.search(pattern, line)]


def run():
    tiny_seconds = h.env_int("TINY_SECONDS", 30)
    tiny_bytes = h.env_int("TINY_BYTES", 4000000)
    keys_seconds = h.env_int("KEYS_SECONDS", 300)
    keys_count = h.env_int("KEYS_COUNT", 20)
    sample_every = h.env_int("SAMPLE_EVERY", 30)
    api_timeout = os.environ.get("API_TIMEOUT", "5s")
    interval = os.environ.get("COLLECTOR_INTERVAL", "2s")

    with h.Bench("mailhost-hostile.", os.environ.get("BENCH_WORK")) as b:
        # Eight calls at once: the four accounts and the four mailboxes answer one record each.
        exporter = b.start_demo(api_timeout, interval, concurrency=8)

        def set_all(spec):
            for route in h.ROUTES:
                b.fault(route, spec)

        def alive():
            if not exporter.alive():
                h.die(f"the exporter exited; see {exporter.log}")

        def metrics(name):
            body = h.get(f"{exporter.url}/metrics", timeout=5)
            if body is None:
                h.die("/metrics failed")
            with open(b.path(name), "wb") as f:
                f.write(body)
            return body.decode(errors="replace")

        def kib(field):
            return h.status_kib(exporter.pid, field)

        r = h.Report(b.path("report.md"))
        r(f"## Hostile bodies: {h.machine()}, revision {h.revision()}")
        r()
        r(f"### 1. Tiny objects: {tiny_bytes} bytes per answer, concurrency 8, {tiny_seconds} s")
        rss_before = kib("VmRSS")
        set_all({"body": {"tiny_objects": {"bytes": tiny_bytes}}})
        for _ in range(tiny_seconds):
            alive()
            time.sleep(1)
        body = metrics("metrics.tiny")
        r(f"- VmRSS before: {rss_before} KiB; after: {kib('VmRSS')} KiB; "
          f"peak VmHWM: {kib('VmHWM')} KiB")
        r("- requests answered 200, by endpoint:")
        for line in lines(body, r'^mailhost_api_requests_total\{.*code="200"\}'):
            r(line)
        r("- decode failures, by endpoint:")
        for line in lines(body, r'^mailhost_api_request_failures_total\{.*reason="decode"\}'):
            r(line)
        b.heal()

        r()
        r(f"### 2. Changing keys: {keys_count} fresh keys per object and answer, {keys_seconds} s")
        set_all({"body": {"changing_keys": {"count": keys_count}}})
        time.sleep(5)
        r(f"- t=5s VmRSS {kib('VmRSS')} KiB")
        for t in range(sample_every, keys_seconds + 1, sample_every):
            time.sleep(sample_every)
            alive()
            r(f"- t={t + 5}s VmRSS {kib('VmRSS')} KiB")
        body = metrics("metrics.keys")
        r("- parse problems counted:")
        for line in lines(body, r"^mailhost_parse_problems_total"):
            r(line)
        with open(exporter.log, encoding="utf-8", errors="replace") as f:
            log = f.read().splitlines()
        warned = sum(1 for line in log if "unexpected shape in upstream answer; value skipped "
                     "(logged once per path)" in line)
        muted = sum(1 for line in log if "no longer logged at warn level" in line)
        r(f"- warn lines for parse problems: {warned}; suppression lines: {muted}")
        r(f"- peak VmHWM over the whole run: {kib('VmHWM')} KiB")
        b.heal()


if __name__ == "__main__":
    h.main(run)
