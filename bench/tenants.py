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
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from common import http, start_exporter, start_sim, status_kib, stop, wait_log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
FIRST = 100_001
TICKS = os.sysconf("SC_CLK_TCK")


def config(work, sim, token, n, tenants, interval):
    """One token with `n` accounts (`tenants` false), or `n` tenants of one account each."""
    head = f"api:\n  base_url: {sim}\n  timeout: 10s\n  concurrency: 8\n"
    collectors = (f"collectors:\n  delivery_account:\n    interval: {interval}s\n"
                  f"    deadline: {interval * 9 // 10}s\n    max_age: {interval * 3}s\n")
    if not tenants:
        with open(os.path.join(work, "token"), "w") as f:
            f.write(token)
        ids = ", ".join(str(i) for i in range(FIRST, FIRST + n))
        return head + f"  token_file: {work}/token\n" + collectors + f"    accounts: [{ids}]\n"
    out = [head, collectors, "tenants:\n"]
    for t in range(n):
        path = os.path.join(work, f"token-t{t}")
        with open(path, "w") as f:
            f.write(f"{token}-t{t}")
        out.append(f"  - name: t{t}\n    token_file: {path}\n    collectors:\n"
                   f"      delivery_account:\n        accounts: [{FIRST + t}]\n")
    return "".join(out)


def cpu_seconds(pid):
    """User + system CPU of a process so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def status(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def accounts_shown(exporter):
    text = http("GET", f"{exporter}/metrics", timeout=30)
    return sum(1 for line in text.splitlines()
               if line.startswith("mailhost_delivery_remaining_messages{"))


def measure(sim, token, n, tenants, args):
    work = tempfile.mkdtemp(prefix="mailhost-tenants-")
    path = os.path.join(work, "config.yml")
    with open(path, "w") as f:
        f.write(config(work, sim, token, n, tenants, args.interval))
    log = os.path.join(work, "exporter.log")
    procs = []
    peak = {"threads": 0, "fds": 0}
    done = threading.Event()
    try:
        started = time.time()
        proc = start_exporter(BIN, path, log, procs)

        def sample():
            while not done.is_set():
                try:
                    peak["threads"] = max(peak["threads"], threads(proc.pid))
                    peak["fds"] = max(peak["fds"], len(os.listdir(f"/proc/{proc.pid}/fd")))
                except OSError:
                    return
                time.sleep(0.1)

        threading.Thread(target=sample, daemon=True).start()
        exporter = "http://" + wait_log(log, r"address=([0-9.:]+)", 120)
        deadline = started + args.patience
        while status(f"{exporter}/-/ready") != 200:
            if time.time() > deadline:
                sys.exit(f"not ready within {args.patience} s")
            time.sleep(0.05)
        ready = time.time() - started
        while accounts_shown(exporter) < n:
            if time.time() > deadline:
                sys.exit(f"not every account shown within {args.patience} s")
            time.sleep(0.2)
        shown = time.time() - started
        # Steady state: from the next interval on.
        time.sleep(max(0.0, args.interval - (time.time() - started)) + 1)
        cpu0, t0 = cpu_seconds(proc.pid), time.time()
        time.sleep(args.interval * args.intervals)
        cpu = (cpu_seconds(proc.pid) - cpu0) / ((time.time() - t0) / args.interval)
        rss = status_kib(proc.pid, "VmHWM") / 1024
        warns = sum(1 for line in open(log, encoding="utf-8", errors="replace")
                    if "level=warn" in line)
        done.set()
        return {"ready": ready, "shown": shown, "cpu": cpu, "threads": peak["threads"],
                "fds": peak["fds"], "rss": rss, "warns": warns}
    finally:
        done.set()
        stop(procs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tenants", default="1000,10000", help="comma-separated fleet sizes")
    ap.add_argument("--interval", type=int, default=30, help="delivery_account interval, seconds")
    ap.add_argument("--intervals", type=int, default=3, help="steady intervals to measure CPU over")
    ap.add_argument("--patience", type=int, default=300, help="seconds to wait for values")
    ap.add_argument("--build", action="store_true")
    args = ap.parse_args()
    if args.build:
        subprocess.run(["cargo", "build", "--release", "--bins"], cwd=ROOT, check=True)
    print("| accounts | shape | ready | all values | CPU per interval | threads | descriptors "
          "| VmHWM | warn lines |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.tenants.split(",")):
        token = "bench-" + secrets.token_hex(12)
        procs = []
        try:
            work = tempfile.mkdtemp(prefix="mailhost-tenants-sim-")
            sim = start_sim(BIN, work, token, n, procs, tenants=n)
            # The sim's own token sees every extra account too.
            for tenants in (False, True):
                r = measure(sim, token, n, tenants, args)
                shape = f"{n:,} tenants of 1" if tenants else f"1 token of {n:,}"
                print(f"| {n:,} | {shape} | {r['ready']:.2f} s | {r['shown']:.2f} s "
                      f"| {r['cpu']:.2f} s ({r['cpu'] / args.interval * 100:.1f} % of a core) "
                      f"| {r['threads']} | {r['fds']} | {r['rss']:.0f} MiB | {r['warns']} |",
                      flush=True)
        finally:
            stop(procs)


if __name__ == "__main__":
    main()
