#!/usr/bin/env python3
"""Many-tenants benchmark: N tenants of one Delivery account each, beside one token with the
same N accounts, on the same interval, against the release binaries on loopback.

For each shape it reports the time from the exporter's start to `/-/ready` answering 200 and to
every account's values on `/metrics`, then, over `--intervals` steady intervals, the CPU the
exporter used per interval (user + system, from /proc), and the most threads, open descriptors
and resident memory seen while it ran (sampled every 100 ms). Everything it starts is stopped
at the end; every wait is bounded.

    python3 bench/tenants.py [--tenants 1000,10000] [--interval 30] [--intervals 3]

Build first (`cargo build --release --bins`) or pass --build.
"""

import argparse
import time

import harness as h

FIRST = h.FIRST_EXTRA


def config(b, under, n, tenants, interval):
    """One token with `n` accounts (`tenants` false), or `n` tenants of one account each."""
    common = dict(timeout="10s", concurrency=8, **h.schedule(interval))
    if not tenants:
        return h.delivery_config(b.sim_url, token_file=b.token_file(f"{under}/token"),
                                 accounts=range(FIRST, FIRST + n), **common)
    return h.delivery_config(b.sim_url, tenants=[
        (name, path, [FIRST + t]) for t, (name, path) in enumerate(b.tenant_tokens(n, under))],
        **common)


def accounts_shown(exporter):
    text = h.http("GET", f"{exporter}/metrics", timeout=30)
    return h.count(text, "mailhost_delivery_remaining_messages{")


def measure(b, n, tenants, args):
    """One exporter of one shape against the running simulator, stopped before it returns."""
    under = f"n{n}-{'tenants' if tenants else 'token'}"
    path = b.write(f"{under}/config.yml", config(b, under, n, tenants, args.interval))
    started = time.time()
    server = b.start_exporter(path, log=f"{under}/exporter.log", patience=120, peaks=True,
                              binary=args.binary)
    pid, peaks = server.pid, server.peaks
    deadline = started + args.patience
    while h.status(f"{server.url}/-/ready") != 200:
        if time.time() > deadline:
            h.die(f"not ready within {args.patience} s")
        time.sleep(0.05)
    ready = time.time() - started
    while accounts_shown(server.url) < n:
        if time.time() > deadline:
            h.die(f"not every account shown within {args.patience} s")
        time.sleep(0.2)
    shown = time.time() - started
    # Steady state: from the next interval on.
    time.sleep(max(0.0, args.interval - (time.time() - started)) + 1)
    cpu0, t0 = h.cpu_seconds(pid), time.time()
    time.sleep(args.interval * args.intervals)
    cpu = (h.cpu_seconds(pid) - cpu0) / ((time.time() - t0) / args.interval)
    rss = h.status_kib(pid, "VmHWM") / 1024
    with open(server.log, encoding="utf-8", errors="replace") as f:
        warns = sum(1 for line in f if "level=warn" in line)
    peaks.stop()
    b.stop(server.proc)
    return {"ready": ready, "shown": shown, "cpu": cpu, "threads": peaks.threads,
            "fds": peaks.fds, "rss": rss, "warns": warns}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tenants", default="1000,10000", help="comma-separated fleet sizes")
    ap.add_argument("--interval", type=int, default=30, help="delivery_account interval, seconds")
    ap.add_argument("--intervals", type=int, default=3, help="steady intervals to measure CPU over")
    ap.add_argument("--patience", type=int, default=300, help="seconds to wait for values")
    ap.add_argument("--binary", help="the exporter binary to measure (default: the release build)")
    args = h.parse_args(ap)
    print("| accounts | shape | ready | all values | CPU per interval | threads | descriptors "
          "| VmHWM | warn lines |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.tenants.split(",")):
        with h.Bench("mailhost-tenants-") as b:
            b.start_sim(n, tenants=n, patience=120)
            # The sim's own token sees every extra account too.
            for tenants in (False, True):
                r = measure(b, n, tenants, args)
                shape = f"{n:,} tenants of 1" if tenants else f"1 token of {n:,}"
                print(f"| {n:,} | {shape} | {r['ready']:.2f} s | {r['shown']:.2f} s "
                      f"| {r['cpu']:.2f} s ({r['cpu'] / args.interval * 100:.1f} % of a core) "
                      f"| {r['threads']} | {r['fds']} | {r['rss']:.0f} MiB | {r['warns']} |",
                      flush=True)


if __name__ == "__main__":
    h.main(main)
