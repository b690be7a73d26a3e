#!/usr/bin/env python3
"""Tenants rotated in and out by reloads for several minutes while scrapes and probes go on: a
reseller's customers coming and going, measured on the release binaries on loopback.

The simulator holds `--pool` extra tokens of two Delivery accounts each. The exporter's config
names `--tenants` tenants at a time, each with one token of the pool, its first account
configured and its second reached only through `/probe`; every `--every` seconds the config is
rewritten with the next tenants (new names, the next tokens of the pool, round and round) and
reloaded (`POST /-/reload`). Meanwhile one thread scrapes `/metrics` every 200 ms, another
probes the current tenants' second accounts (`/probe?tenant=NAME&target=ID`), 20 a second, and a
stranger probes made-up ids of the current tenants, `--stranger-rate` a second (default 5; 0:
none), each answered 404 or 403 and counted as `provider_refused`: its probes are in flight as
their tenants leave (issue 42: a probe counted after its tenant's removal put a series back).

After each rotation it waits (bounded) until every new tenant's configured account succeeded
and no series of any tenant that left is on `/metrics`, then samples VmRSS. It reports VmRSS
after the first rotation and after the last, the most seen, the series on `/metrics`, the
probes answered and refused, and fails if a series of a tenant that left is seen once its
rotation settled or if VmRSS after the last rotation is more than `--margin-mib` over the
most seen over the first three.

    python3 bench/rotation.py [--minutes 5] [--every 10] [--tenants 50] [--pool 400]
                              [--stranger-rate 5]

Everything it starts is stopped at the end; every wait is bounded.
"""

import argparse
import threading
import time

import harness as h

FIRST = h.FIRST_EXTRA
# The stranger's made-up ids start here: far above every account of the simulator.
MADE_UP = 1_500_000_000


def config(b, args, round_):
    """The config of rotation `round_`: tenants `r{round}-{i}`, each with the next token of the
    pool and its first account configured."""
    lines = ["api:", f"  base_url: {b.sim_url}", "  timeout: 5s", "collectors:",
             "  delivery_account:", f"    interval: {args.interval}s", "tenants:"]
    for i in range(args.tenants):
        t = (round_ * args.tenants + i) % args.pool
        path = b.token_file(f"token-t{t}", f"{b.token}-t{t}")
        lines += [f"  - name: r{round_}-{i}", f"    token_file: {path}", "    collectors:",
                  "      delivery_account:", f"        accounts: [{FIRST + 2 * t}]"]
    return "\n".join(lines) + "\n"


def tenants_of(args, round_):
    """(name, probed account) of each tenant of rotation `round_`."""
    return [(f"r{round_}-{i}", FIRST + 2 * ((round_ * args.tenants + i) % args.pool) + 1)
            for i in range(args.tenants)]


class Load(threading.Thread):
    """Scrapes `/metrics` every 200 ms, or probes the current tenants 20 times a second, or (a
    stranger, `made_up` per second) probes made-up ids of the current tenants, until stopped;
    counts answers by status."""

    def __init__(self, url, probes=None, made_up=0.0):
        super().__init__(daemon=True)
        self.url, self.probes, self.made_up = url, probes, made_up
        self.codes = {}
        self.stopping = threading.Event()

    def run(self):
        n = 0
        while not self.stopping.is_set():
            if self.probes is None:
                code = h.status(f"{self.url}/metrics", 30)
                every = 0.2
            elif self.made_up:
                # A new id each time, of the tenants in turn: each is a first fetch refused.
                current = self.probes()
                name, _ = current[n % len(current)]
                code = h.status(f"{self.url}/probe?tenant={name}&target={MADE_UP + n}", 10)
                every = 1 / self.made_up
            else:
                current = self.probes()
                name, account = current[n % len(current)]
                code = h.status(f"{self.url}/probe?tenant={name}&target={account}", 10)
                every = 0.05
            n += 1
            self.codes[code] = self.codes.get(code, 0) + 1
            self.stopping.wait(every)

    def stop(self):
        self.stopping.set()
        self.join(35)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=5, help="how long tenants are rotated")
    ap.add_argument("--every", type=float, default=10, help="seconds between rotations")
    ap.add_argument("--tenants", type=int, default=50, help="tenants in each config")
    ap.add_argument("--pool", type=int, default=400, help="tokens of the simulator, reused round "
                                                          "and round")
    ap.add_argument("--interval", type=int, default=2, help="delivery_account interval, seconds")
    ap.add_argument("--margin-mib", type=float, default=8, help="VmRSS allowed over the first "
                                                                "three rotations' most")
    ap.add_argument("--stranger-rate", type=float, default=5,
                    help="made-up ids probed per second, of the current tenants (0: none)")
    ap.add_argument("--binary", help="the exporter binary (default: the release build)")
    args = h.parse_args(ap)
    if args.tenants > args.pool:
        h.die("--tenants must be at most --pool")
    if args.stranger_rate < 0:
        h.die("--stranger-rate must be 0 or more")
    with h.Bench("mailhost-rotation-") as b:
        b.start_sim(2 * args.pool, tenants=args.pool, patience=120)
        path = b.write("config.yml", config(b, args, 0))
        server = b.start_exporter(path, extra=["--web.enable-lifecycle"], binary=args.binary,
                                  patience=60)
        current = {"round": 0}
        scrapes = b.background(Load(server.url))
        probes = b.background(Load(server.url, lambda: tenants_of(args, current["round"])))
        strangers = None
        if args.stranger_rate > 0:
            strangers = b.background(Load(server.url, lambda: tenants_of(args, current["round"]),
                                          made_up=args.stranger_rate))
        print(f"revision {h.revision()}, {h.now_utc()}, {h.machine()}, load {h.loadavg()}")
        print(f"{args.tenants} tenants at a time from a pool of {args.pool} tokens, rotated every "
              f"{args.every:g} s for {args.minutes:g} min, interval {args.interval} s, "
              f"a stranger probing {args.stranger_rate:g} made-up ids a second")
        print("| rotation | settled after | series on /metrics | VmRSS |")
        print("|---|---|---|---|")
        rss = []
        end = time.monotonic() + args.minutes * 60
        round_ = 0
        while True:
            started = time.monotonic()
            if round_ > 0:
                b.write("config.yml", config(b, args, round_))
                code = h.status(f"{server.url}/-/reload", 30, method="POST")
                if code != 200:
                    h.die(f"reload {round_} answered {code}; see {server.log}")
                current["round"] = round_
            names = [n for n, _ in tenants_of(args, round_)]

            seen = {}

            def settled():
                body = h.http("GET", f"{server.url}/metrics", timeout=30)
                seen["waiting"] = [n for n in names if h.value(
                    body, f'mailhost_collector_success{{tenant="{n}",'
                          f'collector="delivery_account"}}') != 1.0]
                seen["left"] = [line for line in body.splitlines()
                                if round_ and f'tenant="r{round_ - 1}-' in line]
                return body if not seen["waiting"] and not seen["left"] else None

            deadline = time.monotonic() + 60
            while (body := settled()) is None:
                if time.monotonic() > deadline or not server.alive():
                    h.die(f"rotation {round_} not settled within 60 s: "
                          f"{len(seen['waiting'])} tenants without a success (e.g. "
                          f"{seen['waiting'][:3]}), {len(seen['left'])} series of the last "
                          f"round's tenants (e.g. {seen['left'][:3]}); see {server.log}")
                time.sleep(0.2)
            took = time.monotonic() - started
            left = [line for line in body.splitlines()
                    if 'tenant="r' in line and not line.startswith("#")
                    and any(f'tenant="r{old}-' in line for old in range(round_))]
            if left:
                h.die(f"rotation {round_}: {len(left)} series of tenants that left, e.g. "
                      f"{left[0]}")
            kib = h.status_kib(server.pid, "VmRSS")
            rss.append(kib)
            series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
            print(f"| {round_} | {took:.1f} s | {series:,} | {kib / 1024:.1f} MiB |", flush=True)
            round_ += 1
            if time.monotonic() >= end:
                break
            time.sleep(max(0.0, started + args.every - time.monotonic()))
        scrapes.stop()
        probes.stop()
        if strangers is not None:
            strangers.stop()
        first = max(rss[1:4]) if len(rss) > 1 else rss[0]
        print(f"rotations: {round_ - 1} ({(round_ - 1) * args.tenants:,} tenants came and went); "
              f"VmRSS after the first {rss[1 if len(rss) > 1 else 0] / 1024:.1f} MiB, the most "
              f"over the first three {first / 1024:.1f} MiB, after the last "
              f"{rss[-1] / 1024:.1f} MiB, the most {max(rss) / 1024:.1f} MiB")
        print(f"scrapes by status: {scrapes.codes}; probes by status: {probes.codes}; "
              f"made-up probes by status: {strangers.codes if strangers else {}}")
        print(f"load at the end {h.loadavg()}")
        if rss[-1] > first + args.margin_mib * 1024:
            h.die(f"VmRSS grew: {rss[-1] / 1024:.1f} MiB after the last rotation, more than "
                  f"{args.margin_mib:g} MiB over {first / 1024:.1f} MiB")
        b.stop(server.proc)


if __name__ == "__main__":
    h.main(main)
