#!/usr/bin/env python3
"""Fleet benchmark: one process polling a large fleet of Delivery accounts (100,000 by default)
through one token, or split among `--tenants` tenants (one token each, each seeing its share),
against the release binaries on loopback, with every upstream answer delayed.

Reports how long the first refresh took against the bound that concurrency and upstream latency
set (accounts x latency / (tenants x api.concurrency): each tenant has its own limit), the slowest
`/metrics` answer while it ran (scraped every 200 ms), the exporter's peak memory (VmHWM), how
many warn lines it logged, and the size of the landing page. Everything it starts is stopped at
the end; every wait is bounded.

    python3 bench/fleet.py [--accounts 100000] [--tenants 10] [--latency-ms 50] [--concurrency 64]

Build first (`cargo build --release --bins`) or pass --build.
"""

import argparse
import sys
import threading
import time

import harness as h
from harness import first_member, http, http_gzip, status_kib

FIRST = h.FIRST_EXTRA
RUN_FINISHED = 'mailhost_collector_duration_seconds{collector="delivery_account"}'


def fleet_config(b, sim, args):
    """The config: one token with every account, or one tenant per share of them."""
    common = dict(timeout="10s", concurrency=args.concurrency, **h.schedule(args.interval))
    if args.tenants == 0:
        return h.delivery_config(sim, token_file=b.token_file(),
                                 accounts=range(FIRST, FIRST + args.accounts), **common)
    share = -(-args.accounts // args.tenants)
    tenants = [(name, path, range(FIRST + t * share,
                                  min(FIRST + (t + 1) * share, FIRST + args.accounts)))
               for t, (name, path) in enumerate(b.tenant_tokens(args.tenants))]
    return h.delivery_config(sim, tenants=tenants, **common)


def watch_more_runs(exporter, body, args, finished):
    """Waits for `args.runs - 1` more refreshes (each tenant's last success moving on), scraping
    with gzip every 200 ms meanwhile; returns (seconds until published, slowest scrape) each."""
    def stamps(text):
        keys = [m.replace("duration_seconds", "last_success_timestamp_seconds") for m in finished]
        return [next((l.rsplit(" ", 1)[1] for l in text.splitlines() if l.startswith(k)), None)
                for k in keys]
    out = []
    before = stamps(body)
    for _ in range(args.runs - 1):
        t0 = time.time()
        slowest = 0.0
        while time.time() - t0 < args.patience:
            s0 = time.time()
            gz = http_gzip(f"{exporter}/metrics")
            slowest = max(slowest, time.time() - s0)
            now = stamps(first_member(gz))
            if all(a != b for a, b in zip(now, before)):
                before = now
                break
            time.sleep(0.2)
        else:
            sys.exit(f"a later refresh did not finish within {args.patience}s")
        out.append((time.time() - t0, slowest))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accounts", type=int, default=100_000)
    ap.add_argument("--latency-ms", type=int, default=50, help="delay of every upstream answer")
    ap.add_argument("--concurrency", type=int, default=64, help="api.concurrency (per tenant)")
    ap.add_argument("--tenants", type=int, default=0,
                    help="split the accounts among this many tenants (0: one token, no tenants:)")
    ap.add_argument("--patience", type=int, default=900, help="seconds to wait for the refresh")
    ap.add_argument("--interval", type=int, default=3600,
                    help="the collector's interval in seconds (its deadline is 90%% of it)")
    ap.add_argument("--runs", type=int, default=1,
                    help="refreshes to watch: a second one renders while the first one's body is held")
    ap.add_argument("--binary", help="the exporter binary to measure (default: the release build)")
    args = h.parse_args(ap)
    with h.Bench("mailhost-fleet-") as b:
        sim = b.start_sim(args.accounts, tenants=args.tenants, patience=120)
        b.fault("delivery_account_get", {"latency_ms": args.latency_ms}, "POST")

        config = b.write("config.yml", fleet_config(b, sim, args))
        started = time.time()
        server = b.start_exporter(config, patience=60, binary=args.binary)
        exporter, exporter_proc, exp_log = server.url, server.proc, server.log

        finished = ([RUN_FINISHED] if args.tenants == 0 else
                    [f'mailhost_collector_duration_seconds{{tenant="t{t}",collector="delivery_account"}}'
                     for t in range(args.tenants)])
        # Scrape every 200 ms until the first run of every tenant is on /metrics, timing each.
        latencies = []
        body = ""
        done = threading.Event()

        def scraper():
            nonlocal body
            while not done.is_set():
                t0 = time.time()
                try:
                    text = http("GET", f"{exporter}/metrics")
                except OSError as e:
                    latencies.append(time.time() - t0)
                    print(f"scrape failed after {time.time() - t0:.1f} s: {e}", file=sys.stderr)
                    continue
                latencies.append(time.time() - t0)
                if all(marker in text for marker in finished):
                    body = text
                    done.set()
                    return
                time.sleep(0.2)

        thread = threading.Thread(target=scraper, daemon=True)  # ends with `done`, or with us
        thread.start()
        thread.join(timeout=args.patience)
        if not done.is_set():
            done.set()
            sys.exit(f"the first refresh did not finish within {args.patience}s")
        wall = time.time() - started
        later = []
        if args.runs > 1:
            later = watch_more_runs(exporter, body, args, finished)
        run = max(float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
                  if any(l.startswith(marker) for marker in finished))
        shown = sum(1 for l in body.splitlines()
                    if l.startswith("mailhost_delivery_remaining_messages{"))
        bound = args.accounts * args.latency_ms / 1000 / args.concurrency / max(args.tenants, 1)
        # A few scrapes more of the full body, now that it is there.
        after = []
        for _ in range(5):
            t0 = time.time()
            http("GET", f"{exporter}/metrics")
            after.append(time.time() - t0)
        landing = http("GET", f"{exporter}/")
        warns = [l for l in open(exp_log, encoding="utf-8", errors="replace") if "level=warn" in l]
        latencies.sort()
        print(f"accounts: {args.accounts} over {max(args.tenants, 1)} token(s), "
              f"upstream latency {args.latency_ms} ms, api.concurrency {args.concurrency} per token")
        print(f"first run: {run:.1f} s (bound {bound:.1f} s: {run / bound:.3f}x); "
              f"{wall:.1f} s from the exporter's start to the values on /metrics; "
              f"{shown} accounts shown")
        print(f"/metrics during the run: {len(latencies)} scrapes, slowest {latencies[-1] * 1000:.0f} ms, "
              f"median {latencies[len(latencies) // 2] * 1000:.0f} ms; "
              f"full body ({len(body):,} bytes): slowest of 5 {max(after) * 1000:.0f} ms")
        for i, (took, slowest) in enumerate(later, start=2):
            print(f"run {i}: published {took:.1f} s after run 1's values; "
                  f"slowest /metrics meanwhile {slowest * 1000:.0f} ms")
        print(f"exporter VmHWM {status_kib(exporter_proc.pid, 'VmHWM') / 1024:.1f} MiB, "
              f"VmRSS {status_kib(exporter_proc.pid, 'VmRSS') / 1024:.1f} MiB")
        print(f"warn lines logged: {len(warns)}; landing page {len(landing):,} bytes")


if __name__ == "__main__":
    h.main(main)
