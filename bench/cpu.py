#!/usr/bin/env python3
"""The exporter's own CPU per account refresh in steady state, beside a floor.

The simulator with `--accounts` Delivery accounts on loopback; the exporter polling all of them
through one token every `--interval` seconds (`api.concurrency` `--concurrency`). Once every
account has values and one more interval has passed, the exporter's user + system CPU (from
/proc) and its calls (`mailhost_api_requests_total`, read from `/metrics` at the start and the
end only) are taken over `--intervals` intervals: CPU per call is the cost of one account's
refresh, its rendering on `/metrics` included.

The floor is `examples/minimal_client.rs`: the same number of calls, the same GET through the
same HTTP stack and the same decode of the body into a JSON value, at the same concurrency,
against the same simulator, with nothing around it; run twice, back to back (the least a call
can cost) and spread at the exporter's rate (what spreading the calls over the interval costs a
naive client: a sleep and a wake per call). With `--profile`, `perf record` samples the exporter
over one more interval, and the report groups its CPU by where it goes (the HTTP client, JSON,
rendering and gzip, the runtime, the allocator, the kernel, the exporter's own code by module).

    python3 bench/cpu.py [--accounts 20000] [--interval 30] [--intervals 3] [--profile]

Everything listens on 127.0.0.1 and is stopped at the end; every wait is bounded.
"""

import argparse
import json
import os
import re
import time

import harness as h

FIRST = h.FIRST_EXTRA

# Where a sampled symbol's CPU goes, by the first pattern its name or object matches.
AREAS = [
    ("the kernel (sockets, futex, scheduling)", r"\[kernel|\[k\]|^0x|\bkernel\b"),
    ("the allocator", r"jemalloc|\bje_|malloc|\bfree\b|realloc|calloc|sdallocx|mallocx|rallocx"),
    ("gzip (flate2, miniz)", r"flate2|miniz|deflate|crc32|adler"),
    ("JSON (serde_json)", r"serde_json|serde::"),
    ("the HTTP client and server (reqwest, hyper, h2, http, axum)",
     r"reqwest|hyper|\bh2::|\bhttp::|axum|tower|httparse"),
    ("the runtime (tokio)", r"tokio|mio::|parking_lot"),
    ("formatting and strings (core::fmt, ryu, itoa)", r"core::fmt|alloc::fmt|ryu|itoa|dtoa"),
    ("hashing and maps", r"hashbrown|SipHash|siphash|ahash|foldhash|BTreeMap|btree"),
    ("libc (memcpy, memmove, strings)", r"libc|memcpy|memmove|memset|memcmp|strlen"),
    ("the rest of the binary: the exporter's code, std, prometheus_client", r"mailhost_exporter"),
]
OWN = AREAS[-1][0]


def exporter_config(b, args):
    return h.delivery_config(b.sim_url, token_file=b.token_file(),
                             accounts=range(FIRST, FIRST + args.accounts), timeout="10s",
                             concurrency=args.concurrency, **h.schedule(args.interval))


def calls_made(server):
    return h.total(h.http("GET", f"{server.url}/metrics", timeout=60), "mailhost_api_requests_total")


def accounts_shown(server):
    text = h.http("GET", f"{server.url}/metrics", timeout=60)
    return h.count(text, "mailhost_delivery_remaining_messages{")


def profile(pid, seconds, b):
    """`perf record` of `pid` over `seconds`; the share of its samples per area and the largest
    symbols. Ends the run when perf is missing or fails."""
    h.need("perf", "linux-perf")
    data = b.path("perf.data")
    h.run_tool(["perf", "record", "-F", "1999", "-p", str(pid), "-o", data, "--",
                "sleep", str(seconds)], timeout=seconds + 60)
    report = h.run_tool(["perf", "report", "-i", data, "--stdio", "--no-children",
                         "--sort", "dso,symbol", "--percent-limit", "0.05"], timeout=300)
    rows = []
    for line in report.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)$", line)
        if m:
            rows.append((float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()))
    areas = {name: 0.0 for name, _ in AREAS}
    areas["elsewhere"] = 0.0
    modules = {}
    for share, dso, kind, symbol in rows:
        where = f"{dso} [{kind}] {symbol}"
        for name, pattern in AREAS:
            if re.search(pattern, where):
                areas[name] += share
                if name == OWN:
                    # The exporter's module (two levels), else the crate the symbol is of.
                    m = re.search(r"mailhost_exporter::(\w+)(::\w+)?", symbol)
                    module = ("".join(g for g in m.groups() if g) if m else
                              re.sub(r"^[<&]*", "", symbol).split("::")[0].split(" ")[0])
                    modules[module] = modules.get(module, 0.0) + share
                break
        else:
            areas["elsewhere"] += share
    return areas, modules, rows[:25]


def shares_table(what, shares, least):
    """A Markdown table of `shares` (percent), largest first, leaving out those under `least`."""
    print(f"| {what} | share of samples |")
    print("|---|---|")
    for name, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        if share >= least:
            print(f"| {name} | {share:.1f} % |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accounts", type=int, default=20000)
    ap.add_argument("--interval", type=int, default=30, help="delivery_account interval, seconds")
    ap.add_argument("--intervals", type=int, default=3, help="steady intervals to measure over")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--patience", type=int, default=300, help="seconds to wait for values")
    ap.add_argument("--profile", action="store_true", help="perf record one more interval")
    ap.add_argument("--binary", help="the exporter binary to measure (default: the release build)")
    ap.add_argument("--build", action="store_true", help="build the release binaries first")
    args = ap.parse_args()
    h.build(args.build, examples=("minimal_client",))
    client = os.path.join(h.BIN, "examples", "minimal_client")
    with h.Bench("mailhost-cpu-") as b:
        b.start_sim(args.accounts, patience=120)
        config = b.write("config.yml", exporter_config(b, args))
        server = b.start_exporter(config, patience=120, binary=args.binary)
        h.wait_until("every account on /metrics", lambda: accounts_shown(server) >= args.accounts,
                     args.patience, every=1.0, proc=server.proc, log=server.log)
        # Steady state: one more interval, then the window.
        time.sleep(args.interval)
        calls0, cpu0, t0 = calls_made(server), h.cpu_seconds(server.pid), time.monotonic()
        time.sleep(args.interval * args.intervals)
        cpu1, t1 = h.cpu_seconds(server.pid), time.monotonic()
        calls = calls_made(server) - calls0
        cpu = cpu1 - cpu0
        rate = calls / (t1 - t0)
        areas = profile(server.pid, args.interval, b) if args.profile else None
        b.stop(server.proc)

        # The floor: the same calls at the same concurrency, nothing around them; spread at the
        # exporter's rate, then back to back.
        floors = []
        for pace in (f"{rate:.3f}", None):
            cmd = [client, b.sim_url, b.token_file(), str(FIRST), str(args.accounts),
                   str(int(calls)), str(args.concurrency)] + ([pace] if pace else [])
            out = h.run_tool(cmd, timeout=int((t1 - t0) * 3) + 120)
            floors.append(json.loads(out.strip().splitlines()[-1]))

    per_call = cpu / calls * 1e6 if calls else float("nan")
    paced, back_to_back = floors
    floor_per_call = back_to_back["cpu_seconds"] / back_to_back["calls"] * 1e6
    print(f"# {h.now_utc()}, {h.revision()}, load {h.loadavg()}")
    print(f"{args.accounts:,} accounts, one token, interval {args.interval} s, concurrency "
          f"{args.concurrency}, {args.intervals} steady intervals ({t1 - t0:.0f} s)\n")
    print("| | calls | calls a second | CPU | per call | against back to back |")
    print("|---|---|---|---|---|---|")
    print(f"| the exporter | {calls:,.0f} | {rate:.0f} | {cpu:.2f} s | {per_call:.0f} us "
          f"| {per_call / floor_per_call:.2f}x |")
    for name, floor in (("spread at the exporter's rate", paced), ("back to back", back_to_back)):
        each = floor["cpu_seconds"] / floor["calls"] * 1e6
        print(f"| the minimal client, {name} ({floor['failed']} failed) "
              f"| {floor['calls']:,} | {floor['calls'] / floor['seconds']:.0f} "
              f"| {floor['cpu_seconds']:.2f} s | {each:.0f} us | {each / floor_per_call:.2f}x |")
    if areas:
        shares, modules, top = areas
        print("\nWhere the exporter's CPU goes (`perf record -F 1999`, one interval, self time; "
              "symbols of 0.05 % of the samples or more):\n")
        shares_table("area", shares, 0.05)
        print("\nThe rest of the binary, by the exporter's module or the crate:\n")
        shares_table("module or crate", {f"`{k}`": v for k, v in modules.items()}, 0.5)
        print("\nThe largest symbols:\n")
        for share, dso, kind, symbol in top:
            print(f"    {share:5.2f} %  {dso} [{kind}] {symbol[:110]}")


if __name__ == "__main__":
    h.main(main)
