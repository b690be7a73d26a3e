#!/usr/bin/env python3
"""Start and restart benchmark (issue 41): how soon a started or restarted exporter serves its
accounts, and what keeping its state under `--storage.path DIR` costs. Release binaries,
loopback only, every wait and loop bounded in count and time; everything it starts is stopped
and its work directory (the state directories with it) removed at the end, on Ctrl-C or SIGTERM
too (`--keep` keeps it, for the logs).

Scenarios (pick with --scenario, default all):

  first-start      no storage; 3,000 Delivery accounts through one token that the simulator
                   limits to 50 requests/s (burst 5, 429 without Retry-After), collector
                   `delivery_account` alone (one call per account, GET
                   /api/delivery/accounts/{id}), interval 90 s: the accounts with values 10, 20
                   and 40 s after the exporter's start against what the pace allows by then,
                   (burst + rate x t) / 1 call (goal: the allowance within 1.2x of the accounts
                   shown); /metrics read every 0.25 s, the curve printed every 5 s
  restart-sigterm  the same fleet and token with `--storage.path` (a directory in the work
  restart-sigkill  directory) and `--storage.checkpoint-interval 10s`: once every account has
                   values and a checkpoint succeeded after that, SIGTERM (its exit waited for,
                   at most 60 s) or SIGKILL, then a new process on the same directory and the
                   same simulator, whose limiter goes on counting. The share of accounts with
                   values 5 s after the new process's start (goals: 99 % after SIGTERM, 95 % after
                   SIGKILL), the time until /metrics shows all of them, and the calls the
                   simulator refused over the first 20 s after the start against the calls made
                   then (goal: at most 5 %); /metrics read every 0.1 s
  restart-after-gap  the same fleet and token with `--storage.path`: once every account has
                   values, a checkpoint succeeded after that and `pace.json` holds a learned
                   rate, SIGTERM; the exporter stays down `--gap` seconds (default the interval
                   and 5 s: every kept value is older than an interval, so the next process must
                   call for every account), then a new process on the directory; then, once the
                   bucket has refilled, another on a copy of the directory made at the SIGTERM
                   without its `pace.json` (the targets kept, the pace not). For each: the
                   accounts this process fetched (their last success after its start) 10, 20 and
                   40 s after its start, the calls the simulator let through and refused over the
                   first 20 s, and the pace `/metrics` shows at its first scrape; /metrics read
                   every 0.25 s
  fleet-100k       100,000 accounts through one token as bench/fleet.py sets them up (every
                   answer delayed 50 ms, api.concurrency 64, interval 120 s), plus one migration
                   target so that `/metrics?collect[]=migration` reads the health and storage
                   series without the accounts' section. One process without storage, then one
                   with it: each, once its first run ended, scraped with gzip every 100 ms for
                   30 s; the slowest scrape during a checkpoint (goal 0.5 s), VmHWM on against off
                   (goal at most 15 % more), the state's size on disk, the checkpoint's duration;
                   then SIGTERM and a new process on the directory: the restore's duration and
                   the time until /metrics shows all 100,000 (goal 3 s)

The storage scenarios need a binary with `--storage.path` and `--storage.checkpoint-interval`
(read from its `--help`); without them only first-start runs, and the others say they were
skipped and why.

Counting "accounts with values": the series `mailhost_delivery_remaining_messages{account_id=..}`
(one per account the delivery_account collector has data for). Counting refusals: the
simulator's own counts for the token (`GET /_sim/rate_limits`, the token-wide entry's `allowed`
and `limited`), read just before a process starts and when the window ends.

    python3 bench/restart.py [--scenario first-start] [--runs 3] [--accounts 3000] [--rate 50]
    python3 bench/restart.py --scenario first-start --accounts 300 --rate 5   # a smoke test
    python3 bench/restart.py --scenario restart-after-gap --accounts 1000 --interval 30

The release binaries are built when missing (`cargo build --release --locked --bins`) unless
BENCH_SKIP_BUILD=1; `--build` builds them first anyway; `--binary PATH` measures another exporter.
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
import zlib

import harness as h

FIRST = h.FIRST_EXTRA
# One series per account the delivery_account collector has data for (docs/metrics.md).
ACCOUNT = b"\nmailhost_delivery_remaining_messages{"
# delivery_account makes one call per account: GET /api/delivery/accounts/{id}.
CALLS_PER_ACCOUNT = 1
RUN_DURATION = 'mailhost_collector_duration_seconds{collector="delivery_account"}'
STORAGE_FLAGS = ("--storage.path", "--storage.checkpoint-interval")
LAST_CHECKPOINT = "mailhost_storage_last_checkpoint_success_timestamp_seconds"
CHECKPOINT_SECONDS = "mailhost_storage_checkpoint_duration_seconds"
CHECKPOINT_BYTES = "mailhost_storage_checkpoint_bytes"
CHECKPOINT_FAILURES = "mailhost_storage_checkpoint_failures_total"
RESTORE_SECONDS = "mailhost_storage_restore_duration_seconds"
RESTORED_TARGETS = "mailhost_storage_restored_targets"
MARKS = (10, 20, 40)       # first-start: seconds after the start at which the figures are read
RESTART_MARK = 5           # restarts: seconds after the start at which the share is read
REFUSAL_WINDOW = 20        # restarts: seconds after the start over which refusals are counted
STOP_PATIENCE = 60         # seconds a SIGTERM'd exporter has to write its state and exit
MIGRATION = "MG00000001"   # fleet-100k: the one migration target of the demo fleet

SCENARIOS = ("first-start", "restart-sigterm", "restart-sigkill", "restart-after-gap",
             "fleet-100k")
PACER_RATE = "mailhost_api_pacer_rate"
RESTORED_PACES = "mailhost_storage_restored_paces"
# restart-after-gap: an account's last success, to tell what this process fetched.
LAST_SUCCESS = re.compile(rb'\nmailhost_target_last_success_timestamp_seconds\{collector="delivery_account",'
                          rb'target="[0-9]+"\} ([^ \n]+)')


# --- Reading /metrics and the simulator ------------------------------------------------------

def scrape(url, timeout=10):
    """The raw body of /metrics (plain text), None if the scrape failed."""
    return h.get(f"{url}/metrics", timeout=timeout)


def accounts_in(body):
    """Accounts with values in a plain body (one series each, so a count is the distinct ids)."""
    return body.count(ACCOUNT)


def distinct_accounts(body):
    """The same by their ids, to check once that the count is of distinct accounts."""
    return len(set(re.findall(rb'\nmailhost_delivery_remaining_messages\{account_id="([0-9]+)"',
                              body)))


def metric(body, name):
    """The sum of a metric's series (any labels) in a body, as bytes or text; None if absent."""
    if isinstance(body, str):
        body = body.encode()
    found = re.findall(rb"\n" + re.escape(name.encode()) + rb"(?:\{[^}\n]*\})? ([^ \n]+)", body)
    return sum(float(v) for v in found) if found else None


def count_gzip(url, timeout=60):
    """Accounts with values in a gzip /metrics (several gzip members, inflated as they come):
    (accounts, compressed bytes). None if the scrape failed."""
    req = urllib.request.Request(f"{url}/metrics", headers={"Accept-Encoding": "gzip"})
    found, size, tail = 0, 0, b""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                size += len(chunk)
                while chunk:
                    text = tail + d.decompress(chunk)
                    found += text.count(ACCOUNT)
                    # A match never lies wholly in the tail kept, so none is counted twice.
                    tail = text[-(len(ACCOUNT) - 1):]
                    chunk = d.unused_data
                    if d.eof:
                        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    else:
                        chunk = b""
    except (OSError, zlib.error):
        return None
    return found, size


def health(url):
    """The health and self-metrics of a fleet-100k exporter, without the accounts' section."""
    body = h.get(f"{url}/metrics?collect[]=migration", timeout=10)
    return body and b"\n" + body


def limiter(sim, token):
    """(let through, refused) so far by the token-wide limit of the token."""
    listing = json.loads(h.http("GET", f"{sim}/_sim/rate_limits", token))
    for entry in listing["rate_limits"]:
        if entry.get("route") is None:
            return entry["allowed"], entry["limited"]
    h.die("the simulator lists no token-wide limit")


def state_size(path):
    """Bytes of the files under the storage directory, the lock file left out."""
    size = 0
    for root, _, files in os.walk(path):
        for name in files:
            if name != "lock":
                try:
                    size += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
    return size


def warn_count(log):
    with open(log, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if "level=warn" in line)


# --- Setting up ------------------------------------------------------------------------------

def limited_sim(b, args):
    """The simulator with the fleet behind a token limited to `rate` with a bucket of `burst`,
    refused with 429 without Retry-After, and the checked config polling every account."""
    sim = b.start_sim(args.accounts, patience=120)
    body = {"rate": args.rate, "burst": args.burst, "retry_after": "none", "headers": "none"}
    h.http("PUT", f"{sim}/_sim/rate_limit", b.token, json.dumps(body).encode())
    config = b.write("config.yml", h.delivery_config(
        sim, token_file=b.token_file(), timeout="10s", concurrency=16,
        accounts=range(FIRST, FIRST + args.accounts), **h.schedule(args.interval)))
    b.check_config(config, binary=args.binary)
    return sim, config


def storage_flags(path, args):
    return [f"--storage.path={path}", f"--storage.checkpoint-interval={args.checkpoint}s"]


def start(b, config, args, log, extra=()):
    """An exporter, and the monotonic instant just before its process was started."""
    t0 = time.monotonic()
    server = b.start_exporter(config, extra=extra, binary=args.binary, log=log, patience=120)
    return server, t0


class Curve:
    """What /metrics showed over time: (seconds since the start at which the scrape was sent,
    accounts with values, the limiter's (let through, refused) since the start)."""

    def __init__(self, t0, base):
        self.t0, self.base, self.samples = t0, base, []
        self.body = None

    def sample(self, server, sim=None, token=None):
        """One scrape (and the limiter's counts first, given the simulator): the accounts it
        shows, None if it failed. The run ends if the exporter has exited."""
        if not server.alive():
            h.die(f"the exporter exited (status {server.proc.returncode}); see {server.log}")
        sent = time.monotonic() - self.t0
        counts = None
        if sim:
            now = limiter(sim, token)
            counts = (now[0] - self.base[0], now[1] - self.base[1])
        body = scrape(server.url)
        if body is None:
            return None
        self.body = b"\n" + body
        shown = accounts_in(self.body)
        self.samples.append((sent, shown, counts))
        return shown

    def at(self, t):
        """The last sample sent at or before `t` seconds: what /metrics showed by then."""
        before = [s for s in self.samples if s[0] <= t]
        return before[-1] if before else (t, 0, None)

    def first(self, n):
        """Seconds until a scrape showed `n` accounts (when it was sent), None if none did."""
        return next((s[0] for s in self.samples if s[1] >= n), None)


# --- first-start -----------------------------------------------------------------------------

def first_start(args, run):
    n = args.accounts
    allowed_at = {t: min(n, (args.burst + args.rate * t) / CALLS_PER_ACCOUNT) for t in MARKS}
    with bench("mailhost-restart-first-", args) as b:
        sim, config = limited_sim(b, args)
        load = h.loadavg()
        base = limiter(sim, b.token)
        server, t0 = start(b, config, args, "exporter.log")
        curve = Curve(t0, base)
        # Until every account has values and the last mark has passed, at most twice N / rate
        # and a minute.
        limit = max(MARKS[-1] + 5, 2 * n / args.rate + 60)
        while time.monotonic() - t0 < limit:
            shown = curve.sample(server, sim, b.token)
            if shown is not None and shown >= n and time.monotonic() - t0 > MARKS[-1]:
                break
            time.sleep(0.25)
        check_distinct(curve.body)
        warns = warn_count(server.log)
        load_end = h.loadavg()
    all_at = curve.first(n)
    print(f"\n## first-start, run {run}: {n} accounts, one token at {args.rate:g}/s (burst "
          f"{args.burst:g}, 429 without Retry-After), delivery_account alone ({CALLS_PER_ACCOUNT} "
          f"call per account), interval {args.interval}s, concurrency 16; load {load} at the "
          f"start, {load_end} at the end")
    print("| seconds after the start | accounts with values | the pace's allowance "
          "(burst + rate x t) | allowance / shown | calls let through | refused |")
    print("|---|---|---|---|---|---|")
    rows = {}
    for t in (range(5, int(curve.samples[-1][0]) + 1, 5) if curve.samples else []):
        sent, shown, counts = curve.at(t)
        allowance = min(n, (args.burst + args.rate * t) / CALLS_PER_ACCOUNT)
        ratio = allowance / shown if shown else float("inf")
        mark = " **(mark)**" if t in MARKS else ""
        print(f"| {t}{mark} | {shown} | {allowance:.0f} | {ratio:.2f}x "
              f"| {counts[0] if counts else ''} | {counts[1] if counts else ''} |")
        if t in MARKS:
            rows[t] = (shown, ratio, counts[0] if counts else None)
    answered = f"{curve.samples[0][0]:.2f} s" if curve.samples else "never"
    print(f"every account with values {f'after {all_at:.1f} s' if all_at else 'not within the watch'}"
          f" (N / rate = {n / args.rate:.1f} s); the first scrape answered was sent {answered} "
          f"after the start; warn lines {warns}")
    return dict(run=run, load=load, load_end=load_end, all_at=all_at, marks=rows,
                allowed=allowed_at)


def check_distinct(body):
    if body is not None and distinct_accounts(body) != accounts_in(body):
        h.note("warning: mailhost_delivery_remaining_messages has more than one series for an "
               "account; the counts are of series, not accounts")


def first_start_summary(results, n):
    print(f"\n## first-start against the goal: the pace's allowance within 1.2x of the accounts "
          f"shown ({len(results)} run(s), {n} accounts)")
    for t in MARKS:
        got = [r["marks"].get(t) for r in results if r["marks"].get(t)]
        if not got:
            continue
        worst = max(ratio for _, ratio, _ in got)
        print(f"- {t} s: {', '.join(str(s) for s, _, _ in got)} accounts with values of "
              f"{results[0]['allowed'][t]:.0f} allowed (calls let through by then "
              f"{', '.join(str(c) for _, _, c in got)}); worst {worst:.2f}x "
              f"({'met' if worst <= 1.2 else 'NOT met'})")
    alls = [r["all_at"] for r in results]
    print(f"- every account with values after {', '.join(f'{a:.1f} s' if a else 'never' for a in alls)}; "
          f"load {', '.join(r['load'] + ' to ' + r['load_end'] for r in results)}")


# --- restart-sigterm and restart-sigkill -----------------------------------------------------

def wait_checkpoint_after(url, since, seconds, proc, log):
    """The health body once a checkpoint succeeded after wall-clock `since`."""
    def probe():
        body = scrape(url)
        if body is None:
            return None
        body = b"\n" + body
        last = metric(body, LAST_CHECKPOINT)
        return body if last is not None and last > since else None
    return h.wait_until(f"a checkpoint after {time.strftime('%H:%M:%S', time.localtime(since))}",
                        probe, seconds, every=0.5, proc=proc, log=log)


def stop_with(proc, how):
    """Sends SIGTERM or SIGKILL; (seconds until it exited, its exit status)."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    try:
        code = proc.wait(timeout=STOP_PATIENCE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        return None, "killed after not exiting within %d s" % STOP_PATIENCE
    return time.monotonic() - t0, code


def until_every_account(b, sim, config, args, flags):
    """A first process on `flags`, watched until every account has values (at most twice
    N / rate, an interval and a minute): (the server, its curve)."""
    n = args.accounts
    first, t0 = start(b, config, args, "exporter-1.log", flags)
    curve = Curve(t0, limiter(sim, b.token))
    limit = 2 * n / args.rate + args.interval + 60
    while time.monotonic() - t0 < limit:
        if (curve.sample(first) or 0) >= n:
            return first, curve
        time.sleep(0.5)
    h.die(f"not every account had values within {limit:.0f} s; see {first.log}")


def restart(args, how, run):
    n = args.accounts
    with bench(f"mailhost-restart-{how}-", args) as b:
        sim, config = limited_sim(b, args)
        state = b.dir("state")
        flags = [] if args.no_storage else storage_flags(state, args)
        load = h.loadavg()
        first, curve = until_every_account(b, sim, config, args, flags)
        all_at = curve.first(n)
        all_wall = time.time()
        if args.no_storage:
            # As long as the storage run waits for its checkpoint, at most.
            time.sleep(args.checkpoint)
            body = b""
        else:
            body = wait_checkpoint_after(first.url, all_wall, 3 * args.checkpoint + 30,
                                         first.proc, first.log)
        checkpoint = dict(seconds=metric(body, CHECKPOINT_SECONDS),
                          bytes=metric(body, CHECKPOINT_BYTES),
                          failures=metric(body, CHECKPOINT_FAILURES), disk=state_size(state))
        load_stop = h.loadavg()
        took, code = stop_with(first.proc, how)
        b.stop(first.proc)
        disk_after = state_size(state)

        base = limiter(sim, b.token)
        second, t1 = start(b, config, args, "exporter-2.log", flags)
        curve2 = Curve(t1, base)
        refused = restored = None
        while time.monotonic() - t1 < max(REFUSAL_WINDOW, RESTART_MARK) + 0.5:
            curve2.sample(second)
            if restored is None and curve2.samples and curve2.samples[-1][0] >= RESTART_MARK:
                restored = metric(curve2.body, RESTORED_TARGETS)
            if refused is None and time.monotonic() - t1 >= REFUSAL_WINDOW:
                now = limiter(sim, b.token)
                refused = (now[0] - base[0], now[1] - base[1], time.monotonic() - t1)
            time.sleep(0.1)
        if refused is None:
            now = limiter(sim, b.token)
            refused = (now[0] - base[0], now[1] - base[1], time.monotonic() - t1)
        # Every account, if not yet: at most twice N / rate more.
        deadline = time.monotonic() + 2 * n / args.rate
        while curve2.first(n) is None and time.monotonic() < deadline:
            curve2.sample(second)
            time.sleep(0.25)
        restore = metric(curve2.body or b"", RESTORE_SECONDS)
        warns = (warn_count(first.log), warn_count(second.log))
        load_end = h.loadavg()
    at_mark = curve2.at(RESTART_MARK)[1]
    first_seen = curve2.samples[0] if curve2.samples else None
    all2 = curve2.first(n)
    made = refused[0] + refused[1]
    share = refused[1] / made if made else None
    goal = 0.99 if how == "sigterm" else 0.95
    storage = ("WITHOUT storage (--no-storage: the baseline)" if args.no_storage else
               f"--storage.checkpoint-interval {args.checkpoint}s")
    print(f"\n## restart-{how}, run {run}: {n} accounts, one token at {args.rate:g}/s (burst "
          f"{args.burst:g}, 429 without Retry-After), interval {args.interval}s, {storage}; "
          f"load {load} at the start, {load_stop} at the {how.upper()}, {load_end} at the end")
    exited = ('exited %.2f s after the signal, status %s' % (took, code) if took is not None
              else code)
    if args.no_storage:
        print(f"first process: every account with values after {all_at:.1f} s; "
              f"{how.upper()} {args.checkpoint} s later; {exited}")
    else:
        print(f"first process: every account with values after {all_at:.1f} s; the checkpoint "
              f"after that took {fmt(checkpoint['seconds'], 's', 3)}, wrote "
              f"{fmt(checkpoint['bytes'], 'bytes')}; state on disk {checkpoint['disk']:,} bytes "
              f"(lock left out), {disk_after:,} after the {how.upper()}; checkpoint failures "
              f"{fmt(checkpoint['failures'])}; {exited}")
    print("| after the restart | figure | goal |")
    print("|---|---|---|")
    print(f"| accounts with values {RESTART_MARK} s after the start | {at_mark} of {n} "
          f"({at_mark / n:.1%}) | {goal:.0%} ({'met' if at_mark >= goal * n else 'NOT met'}) |")
    print(f"| every account on /metrics | {f'{all2:.2f} s after the start' if all2 is not None else 'not within the watch'} "
          f"(first scrape answered: sent at {first_seen[0]:.2f} s, {first_seen[1]} accounts) | |"
          if first_seen else "| every account on /metrics | no scrape answered | |")
    print(f"| calls over the first {refused[2]:.1f} s: made, refused | {made}, {refused[1]} "
          f"({'%.2f %%' % (100 * share) if share is not None else 'no calls'}) | at most 5 % "
          f"({'met' if share is None or share <= 0.05 else 'NOT met'}) |")
    print(f"| restore (`{RESTORE_SECONDS}`) | {fmt(restore, 's', 3)} | |")
    print(f"| `{RESTORED_TARGETS}` (summed), first scrape from {RESTART_MARK} s on | "
          f"{fmt(restored)} | |")
    print(f"warn lines: {warns[0]} (first process), {warns[1]} (second)")
    return dict(how=how, run=run, at_mark=at_mark, n=n, goal=goal, all=all2, made=made,
                refused=refused[1], share=share, load=load, load_end=load_end)


# --- restart-after-gap -----------------------------------------------------------------------

def fetched_since(body, since):
    """Accounts whose last success is after the wall-clock time `since`: fetched by this
    process."""
    return sum(1 for v in LAST_SUCCESS.findall(body or b"") if float(v) > since)


def watch_restart(b, sim, config, args, flags, log):
    """A new process on `flags`' directory, watched for the last mark and the refusal window:
    the accounts it fetched at each mark, (let through, refused) over the first
    REFUSAL_WINDOW s, the pace and restored paces at its first scrape answered."""
    base = limiter(sim, b.token)
    since = time.time()
    server, t0 = start(b, config, args, log, flags)
    fetched, refused, first = {}, None, None
    while time.monotonic() - t0 < max(MARKS[-1], REFUSAL_WINDOW) + 0.5:
        if not server.alive():
            h.die(f"the exporter exited (status {server.proc.returncode}); see {server.log}")
        sent = time.monotonic() - t0
        body = scrape(server.url)
        if body is not None:
            body = b"\n" + body
            if first is None:
                first = (sent, metric(body, PACER_RATE), metric(body, RESTORED_PACES))
            for t in MARKS:
                if sent <= t:
                    fetched[t] = fetched_since(body, since)
        if refused is None and time.monotonic() - t0 >= REFUSAL_WINDOW:
            now = limiter(sim, b.token)
            refused = (now[0] - base[0], now[1] - base[1], time.monotonic() - t0)
        time.sleep(0.25)
    warns = warn_count(server.log)
    took, code = stop_with(server.proc, "sigterm")
    b.stop(server.proc)
    return dict(fetched=fetched, refused=refused, first=first, warns=warns, stopped=(took, code))


def after_gap(args, run):
    n = args.accounts
    gap = args.gap if args.gap is not None else args.interval + 5
    with bench("mailhost-restart-gap-", args) as b:
        sim, config = limited_sim(b, args)
        state, cold = b.dir("state"), b.dir("state-without-pace")
        load = h.loadavg()
        first, curve = until_every_account(b, sim, config, args, storage_flags(state, args))
        body = wait_checkpoint_after(first.url, time.time(), 3 * args.checkpoint + 30,
                                     first.proc, first.log)
        learned = metric(body, PACER_RATE)
        took, code = stop_with(first.proc, "sigterm")
        b.stop(first.proc)
        stopped = time.monotonic()
        pace_file = os.path.join(state, "pace.json")
        if not os.path.exists(pace_file):
            h.die(f"no pace.json under {state} after the SIGTERM: the binary keeps no pace")
        with open(pace_file, encoding="utf-8") as f:
            kept = json.load(f)
        rates = [p["curve"]["rate"] for t in kept["data"]["tenants"]
                 for p in [t["pace"]["token"]] + [e["pace"] for e in t["pace"]["endpoints"]]
                 if p.get("curve")]
        shutil.rmtree(cold)
        shutil.copytree(state, cold)
        os.remove(os.path.join(cold, "pace.json"))
        time.sleep(max(0.0, gap - (time.monotonic() - stopped)))
        kept_run = watch_restart(b, sim, config, args, storage_flags(state, args),
                                 "exporter-2.log")
        # The bucket refills (burst / rate) before the next process starts.
        time.sleep(args.burst / args.rate + 2)
        cold_run = watch_restart(b, sim, config, args, storage_flags(cold, args),
                                 "exporter-3.log")
        load_end = h.loadavg()
    print(f"\n## restart-after-gap, run {run}: {n} accounts, one token at {args.rate:g}/s (burst "
          f"{args.burst:g}, 429 without Retry-After), interval {args.interval}s, "
          f"--storage.checkpoint-interval {args.checkpoint}s, down {gap} s; load {load} at the "
          f"start, {load_end} at the end")
    print(f"first process: every account with values after {curve.first(n):.1f} s; pace on "
          f"/metrics before the SIGTERM {fmt(learned, '/s', 2)}; pace.json's rates "
          f"{', '.join(f'{r:.2f}/s' for r in rates) or 'none'}; exited "
          f"{'%.2f s after the SIGTERM, status %s' % (took, code) if took is not None else code}")
    print("| restarted | fetched by 10 s | by 20 s | by 40 s | calls over the first 20 s: let "
          "through, refused | pace at the first scrape (sent at) | restored paces | warn lines |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in (("with pace.json", kept_run), ("without pace.json", cold_run)):
        f = r["fetched"]
        let, refused = (r["refused"][0], r["refused"][1]) if r["refused"] else ("", "")
        sent, pace, paces = r["first"] if r["first"] else (None, None, None)
        print(f"| {name} | {f.get(10, '')} | {f.get(20, '')} | {f.get(40, '')} | {let}, "
              f"{refused} | {fmt(pace, '/s', 2)} ({'%.2f s' % sent if sent is not None else ''})"
              f" | {fmt(paces)} | {r['warns']} |")
    return dict(run=run, kept=kept_run, cold=cold_run, rates=rates)


def fmt(v, unit="", digits=0):
    if v is None:
        return "absent"
    text = f"{v:,.{digits}f}"
    return f"{text} {unit}".strip()


# --- fleet-100k ------------------------------------------------------------------------------

class Scraper(threading.Thread):
    """Scrapes /metrics with gzip every `every` seconds for `seconds` (or until stopped),
    timing each: (wall start, wall end) per scrape, and the storage series read every 0.5 s
    from the health body: {last checkpoint timestamp: its duration}."""

    def __init__(self, url, seconds, every=0.1):
        super().__init__(daemon=True)
        self.url, self.seconds, self.every = url, seconds, every
        self.scrapes, self.checkpoints, self.failed = [], {}, 0
        self.stopping = threading.Event()

    def run(self):
        end = time.monotonic() + self.seconds
        next_health = 0.0
        while not self.stopping.is_set() and time.monotonic() < end:
            s0 = time.time()
            try:
                h.http_gzip(f"{self.url}/metrics", timeout=30)
                self.scrapes.append((s0, time.time()))
            except OSError:
                self.failed += 1
            if time.monotonic() >= next_health:
                next_health = time.monotonic() + 0.5
                body = health(self.url)
                if body:
                    last = metric(body, LAST_CHECKPOINT)
                    if last is not None:
                        self.checkpoints[last] = metric(body, CHECKPOINT_SECONDS)
            self.stopping.wait(self.every)

    def stop(self):
        self.stopping.set()
        self.join(60)

    def during_checkpoints(self):
        """The scrapes that overlapped a checkpoint (the timestamp read as its end)."""
        spans = [(end - (took or 0) - 0.05, end + 0.05) for end, took in self.checkpoints.items()]
        return [s for s in self.scrapes if any(s[0] <= hi and s[1] >= lo for lo, hi in spans)]


def fleet_config(b, sim, n):
    config = h.delivery_config(sim, token_file=b.token_file(), accounts=range(FIRST, FIRST + n),
                               timeout="10s", concurrency=64, **h.schedule(120))
    return config + (f"  migration:\n    interval: 120s\n    migrations: [{MIGRATION}]\n")


def fleet_process(b, config, args, log, extra, window):
    """One exporter from its start until its first run has ended, then scraped every 100 ms for
    `window` seconds: its figures, and the server (still running)."""
    server, t0 = start(b, config, args, log, extra)

    def run_ended():
        body = health(server.url)
        return body if body and RUN_DURATION.encode() in body else None
    body = h.wait_until("the first run's end", run_ended, 900, every=1, proc=server.proc,
                        log=server.log)
    run_end = time.monotonic() - t0
    got = count_gzip(server.url)
    scraper = b.background(Scraper(server.url, window))
    scraper.join(window + 60)
    scraper.stop()
    during = scraper.during_checkpoints()
    slowest = max((e - s for s, e in scraper.scrapes), default=None)
    slowest_during = max((e - s for s, e in during), default=None)
    hwm = h.status_kib(server.pid, "VmHWM")
    return server, dict(run_end=run_end, shown=got[0] if got else None,
                        gzip_bytes=got[1] if got else None, scrapes=len(scraper.scrapes),
                        failed=scraper.failed, slowest=slowest, during=len(during),
                        slowest_during=slowest_during, checkpoints=dict(scraper.checkpoints),
                        hwm=hwm, run=metric(body, RUN_DURATION))


def fleet(args, run):
    n = args.accounts
    window = args.window
    with bench("mailhost-restart-fleet-", args) as b:
        sim = b.start_sim(n, patience=120)
        b.fault("delivery_account_get", {"latency_ms": 50}, "POST")
        config = b.write("config.yml", fleet_config(b, sim, n))
        b.check_config(config, binary=args.binary)
        load = h.loadavg()
        h.note(f"fleet-100k run {run}: storage off")
        off_server, off = fleet_process(b, config, args, "exporter-off.log", (), window)
        b.stop(off_server.proc)
        load_mid = h.loadavg()
        h.note(f"fleet-100k run {run}: storage on")
        state = b.dir("state")
        on_server, on = fleet_process(b, config, args, "exporter-on.log",
                                      storage_flags(state, args), window)
        last = health(on_server.url) or b""
        checkpoint = dict(seconds=metric(last, CHECKPOINT_SECONDS),
                          bytes=metric(last, CHECKPOINT_BYTES),
                          failures=metric(last, CHECKPOINT_FAILURES), disk=state_size(state))
        took, code = stop_with(on_server.proc, "sigterm")
        b.stop(on_server.proc)
        disk_after = state_size(state)
        h.note(f"fleet-100k run {run}: restart on the state")
        second, t1 = start(b, config, args, "exporter-restart.log", storage_flags(state, args))
        listening = time.monotonic() - t1
        polls = []  # (sent, accounts)
        while time.monotonic() - t1 < 120:
            sent = time.monotonic() - t1
            got = count_gzip(second.url)
            if got is not None:
                polls.append((sent, got[0]))
                if got[0] >= n:
                    break
            time.sleep(0.1)
        body = health(second.url) or b""
        restore = metric(body, RESTORE_SECONDS)
        restored = metric(body, RESTORED_TARGETS)
        hwm_restart = h.status_kib(second.pid, "VmHWM")
        warns = [warn_count(s.log) for s in (off_server, on_server, second)]
        load_end = h.loadavg()
    all_at = next((s for s, c in polls if c >= n), None)
    before = [(s, c) for s, c in polls if c < n]
    print(f"\n## fleet-100k, run {run}: {n} accounts through one token, answers delayed 50 ms, "
          f"api.concurrency 64, interval 120s, --storage.checkpoint-interval "
          f"{args.checkpoint}s; load {load} at the start, {load_mid} between off and on, "
          f"{load_end} at the end")
    print("| | storage off | storage on | goal |")
    print("|---|---|---|---|")
    print(f"| first run ended (from the start; its duration) | {off['run_end']:.1f} s; "
          f"{fmt(off['run'], 's', 1)} | {on['run_end']:.1f} s; {fmt(on['run'], 's', 1)} | |")
    print(f"| accounts on /metrics then | {off['shown']} | {on['shown']} | |")
    print(f"| gzip scrapes every 100 ms over {window} s after it: count, slowest | "
          f"{off['scrapes']}, {ms(off['slowest'])} | {on['scrapes']}, {ms(on['slowest'])} | |")
    during = (f"{on['during']}, {ms(on['slowest_during'])}" if on["during"] else
              "none overlapped one")
    print(f"| the same, during a checkpoint: count, slowest | | {during} (checkpoints seen: "
          f"{len(on['checkpoints'])}) | 0.5 s ({verdict(on['slowest_during'], 0.5)}) |")
    ratio = on["hwm"] / off["hwm"] if off["hwm"] else None
    print(f"| VmHWM after the window | {off['hwm'] / 1024:.1f} MiB | {on['hwm'] / 1024:.1f} MiB "
          f"({'%+.1f %%' % (100 * (ratio - 1)) if ratio else ''}) | at most +15 % "
          f"({verdict(ratio, 1.15)}) |")
    print(f"| last checkpoint: duration, bytes written | | {fmt(checkpoint['seconds'], 's', 3)}, "
          f"{fmt(checkpoint['bytes'], 'bytes')} | |")
    print(f"| state on disk (lock left out): after a checkpoint, after the SIGTERM | | "
          f"{checkpoint['disk']:,} bytes, {disk_after:,} bytes | |")
    print(f"| SIGTERM to exit | | {'%.2f s, status %s' % (took, code) if took is not None else code} | |")
    print(f"| restart: listening after; restore (`{RESTORE_SECONDS}`) | | {listening:.2f} s; "
          f"{fmt(restore, 's', 3)} | |")
    print(f"| restart: every account on /metrics | | "
          f"{f'{all_at:.2f} s after the start' if all_at is not None else 'not within 120 s'}"
          f"{f' (the scrape before, sent at {before[-1][0]:.2f} s, showed {before[-1][1]})' if before else ''}"
          f" | 3 s ({verdict(all_at, 3)}) |")
    print(f"| restart: `{RESTORED_TARGETS}` then; VmHWM | | {fmt(restored)}; "
          f"{hwm_restart / 1024:.1f} MiB | |")
    print(f"warn lines: {warns[0]} (off), {warns[1]} (on), {warns[2]} (restarted)")
    return dict(run=run, off=off, on=on, ratio=ratio, all_at=all_at, restore=restore,
                disk=checkpoint["disk"], load=load, load_end=load_end)


def ms(v):
    return "" if v is None else f"{v * 1000:.0f} ms"


def verdict(v, goal):
    return "not measured" if v is None else ("met" if v <= goal else "NOT met")


# --- Running ---------------------------------------------------------------------------------

@contextlib.contextmanager
def bench(prefix, args):
    """A `Bench` whose work directory (logs, configs, state directories) is removed once what
    it started is stopped, however the run ends, unless --keep."""
    b = h.Bench(prefix)
    try:
        with b:
            yield b
    finally:
        if args.keep:
            h.note(f"work directory kept: {b.work}")
        else:
            shutil.rmtree(b.work, ignore_errors=True)


def storage_support(binary):
    """The storage flags the binary's --help lacks (none when it has them all)."""
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    text = r.stdout + r.stderr
    return [f for f in STORAGE_FLAGS if not re.search(re.escape(f) + r"(?![\w.-])", text)]


def binaries(args):
    """Builds when asked or when the default binaries are missing (unless BENCH_SKIP_BUILD=1)."""
    default = os.path.join(h.BIN, "mailhost_exporter")
    missing = not all(os.access(os.path.join(h.BIN, x), os.X_OK)
                      for x in ("mailhost_sim", "mailhost_exporter"))
    if args.build or (missing and os.environ.get("BENCH_SKIP_BUILD") != "1"):
        h.build(True)
    else:
        h.build(False, check=("mailhost_sim",) + (() if args.binary else ("mailhost_exporter",)))
    args.binary = os.path.abspath(args.binary) if args.binary else default
    if not os.access(args.binary, os.X_OK):
        h.die(f"no exporter binary at {args.binary}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="all", choices=SCENARIOS + ("all",))
    ap.add_argument("--runs", type=int, default=1, help="runs of each scenario (default 1)")
    ap.add_argument("--accounts", type=int, default=None,
                    help="accounts (default 3000; 100000 for fleet-100k)")
    ap.add_argument("--rate", type=float, default=50.0, help="the token's limit, requests/s")
    ap.add_argument("--burst", type=float, default=5.0, help="the token's bucket")
    ap.add_argument("--interval", type=int, default=90,
                    help="the collector's interval in seconds for the limited token (deadline 90%%)")
    ap.add_argument("--checkpoint", type=int, default=10,
                    help="--storage.checkpoint-interval, in seconds")
    ap.add_argument("--gap", type=int, default=None,
                    help="restart-after-gap: seconds the exporter stays down (default the "
                         "interval and 5)")
    ap.add_argument("--window", type=int, default=30,
                    help="fleet-100k: seconds of scrapes every 100 ms after the first run")
    ap.add_argument("--binary", help="the exporter binary (default: the release build)")
    ap.add_argument("--build", action="store_true", help="build the release binaries first")
    ap.add_argument("--keep", action="store_true", help="keep the work directories (logs)")
    ap.add_argument("--no-storage", action="store_true",
                    help="restart-sigterm and restart-sigkill without the storage flags: the "
                         "baseline, on any binary (fleet-100k is skipped)")
    args = ap.parse_args()
    if args.runs < 1 or (args.accounts is not None and args.accounts < 1):
        h.die("--runs and --accounts must be at least 1")
    binaries(args)
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    lacking = storage_support(args.binary)
    print(f"revision {h.revision()}, {h.now_utc()}, {h.machine()}, load {h.loadavg()}")
    print(f"exporter {args.binary}")
    if args.no_storage:
        skipped = [x for x in names if x in ("fleet-100k", "restart-after-gap")]
        why = "--no-storage (it compares storage on with off)"
    else:
        skipped = [x for x in names if x != "first-start"] if lacking else []
        why = f"the binary lacks {' and '.join(lacking)} (not in its --help)"
    if skipped:
        print(f"\nSKIPPED {', '.join(skipped)}: {why}")
    accounts = args.accounts
    for name in names:
        if name in skipped:
            continue
        args.accounts = accounts or (100_000 if name == "fleet-100k" else 3000)
        results = []
        for run in range(1, args.runs + 1):
            h.note(f"{name}: run {run} of {args.runs}, {args.accounts} accounts")
            if name == "first-start":
                results.append(first_start(args, run))
            elif name == "fleet-100k":
                results.append(fleet(args, run))
            elif name == "restart-after-gap":
                results.append(after_gap(args, run))
            else:
                results.append(restart(args, name.split("-")[1], run))
        if name == "first-start":
            first_start_summary(results, args.accounts)
    if skipped:
        print(f"\nSKIPPED {', '.join(skipped)}: {why}")
    print(f"load at the end {h.loadavg()}")


if __name__ == "__main__":
    h.main(main)
