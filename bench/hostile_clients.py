#!/usr/bin/env python3
"""Hostile clients against the release binary in demo mode, on loopback.

Phases (each bounded in count and time):
  fat:      N connections each sending 380 KB of header lines without ending the head;
            peak memory growth of the exporter, how long until the server closed them.
  unfinished: 20 connections that send part of a head and stop; how long until closed.
  idle:     1100 idle connections (the exporter under `ulimit -n 1024` with --fd-limit).
Meanwhile /metrics is scraped every 0.5 s and every answer is counted.

Usage: python3 bench/hostile_clients.py [--bin target/release/mailhost_exporter]
           [--fd-limit 1024] [--connections 1000] [--idle 1100] [extra exporter flags after --]
Build first (`python3 bench/harness.py build`); --bin defaults to this tree's release build.
"""

import argparse
import asyncio
import os
import resource
import sys
import time
import urllib.request

import harness as h
from harness import status_kib

DEADLINE = 120  # seconds for the whole run


async def scraper(addr, stop, counts):
    url = f"http://{addr[0]}:{addr[1]}/metrics"
    loop = asyncio.get_running_loop()

    def once():
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                r.read()
                return r.status == 200
        except Exception:
            return False

    while not stop.is_set():
        ok = await loop.run_in_executor(None, once)
        counts["asked"] += 1
        counts["answered"] += ok
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except asyncio.TimeoutError:
            pass


async def until_closed(reader, started, limit):
    """Seconds until the server closed the connection, or None within `limit`."""
    try:
        while True:
            remaining = limit - (time.monotonic() - started)
            if remaining <= 0:
                return None
            data = await asyncio.wait_for(reader.read(4096), remaining)
            if not data:
                return time.monotonic() - started
    except (ConnectionError, OSError):
        return time.monotonic() - started
    except asyncio.TimeoutError:
        return None


async def fat_head(addr, limit):
    started = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection(*addr)
    except OSError:
        return "refused", None
    chunk = ("X-Filler: " + "a" * 500 + "\r\n").encode() * 20
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        for _ in range(38):  # about 380 KB
            writer.write(chunk)
            await asyncio.wait_for(writer.drain(), 10)
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass
    closed = await until_closed(reader, started, limit)
    writer.close()
    return "ok", closed


async def unfinished(addr, limit):
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(*addr)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Unfinished: ")
    await writer.drain()
    closed = await until_closed(reader, started, limit)
    writer.close()
    return closed


def summary(times):
    done = sorted(t for t in times if t is not None)
    if not done:
        return "none closed"
    return (f"{len(done)}/{len(times)} closed by the server; "
            f"median {done[len(done) // 2]:.1f}s, max {done[-1]:.1f}s")


async def phases(proc, addr, args):
    """The three phases against the exporter `proc` listening on `addr`, scraped meanwhile."""
    await asyncio.sleep(1)
    urllib.request.urlopen(f"http://{addr[0]}:{addr[1]}/metrics", timeout=10).read()
    rss0 = status_kib(proc.pid, "VmRSS")
    hwm0 = status_kib(proc.pid, "VmHWM")
    print(f"exporter pid {proc.pid} on {addr[0]}:{addr[1]}, fd limit "
          f"{args.fd_limit or 'inherited'}; RSS {rss0 / 1024:.1f} MiB, peak {hwm0 / 1024:.1f} MiB")
    stop, counts = asyncio.Event(), {"asked": 0, "answered": 0}
    scraping = asyncio.create_task(scraper(addr, stop, counts))

    # Fat heads, all at once (bounded by --connections).
    t0 = time.monotonic()
    results = await asyncio.gather(*(fat_head(addr, 60) for _ in range(args.connections)))
    hwm1 = status_kib(proc.pid, "VmHWM")
    rss1 = status_kib(proc.pid, "VmRSS")
    refused = sum(1 for r, _ in results if r == "refused")
    print(f"fat heads: {args.connections} x 380 KB in {time.monotonic() - t0:.1f}s, "
          f"{refused} connects refused; {summary([c for r, c in results if r == 'ok'])}; "
          f"peak memory +{(hwm1 - hwm0) / 1024:.1f} MiB, RSS now {rss1 / 1024:.1f} MiB")

    times = await asyncio.gather(*(unfinished(addr, 60) for _ in range(20)))
    print(f"unfinished heads: {summary(times)}")

    # Idle connections, held while scrapes go on.
    idle = []
    for _ in range(args.idle):
        try:
            idle.append(await asyncio.wait_for(asyncio.open_connection(*addr), 5))
        except (OSError, asyncio.TimeoutError):
            break
    before = dict(counts)
    await asyncio.sleep(10)
    print(f"idle: {len(idle)} connections open from this side; scrapes meanwhile "
          f"{counts['answered'] - before['answered']}/{counts['asked'] - before['asked']} answered")
    for _, w in idle:
        w.close()

    stop.set()
    await scraping
    print(f"scrapes over the whole run: {counts['answered']}/{counts['asked']} answered; "
          f"exporter peak memory {status_kib(proc.pid, 'VmHWM') / 1024:.1f} MiB")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(h.BIN, "mailhost_exporter"))
    p.add_argument("--fd-limit", type=int, default=0)
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--idle", type=int, default=1100)
    p.add_argument("extra", nargs="*")
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))

    with h.Bench("mailhost-hostile-clients-") as b:
        server = b.start_exporter(binary=args.bin, extra=args.extra, fd_limit=args.fd_limit,
                                  patience=30)
        host, port = server.url[len("http://"):].rsplit(":", 1)
        try:
            asyncio.run(asyncio.wait_for(phases(server.proc, (host, int(port)), args), DEADLINE))
        except asyncio.TimeoutError:
            sys.exit(f"stopped after {DEADLINE}s")


if __name__ == "__main__":
    h.main(main)
