#!/usr/bin/env python3
"""Rate-limit benchmark: one token polling 1,000 Delivery accounts against the simulator, which
limits the token with a token bucket, on loopback, release binaries.

Scenarios (pick with --scenario, default all):

  none         50 requests/s, 429 without Retry-After, no rate-limit headers
  retry-after  50 requests/s, 429 with Retry-After (whole seconds, as the simulator computes it)
  headers      50 requests/s, Retry-After and both X-RateLimit-* and IETF RateLimit headers
  drop         100 requests/s, dropped to 25 in the middle of a run, raised back to 100 in the
               middle of a later one (Retry-After, no headers)
  overload     50 requests/s against 1,000 accounts every 15 s: N / rate (20 s) does not fit
  reseller     40 requests/s, Retry-After, every 20 s (with --accounts 600: the issue's case)

For each run of the collector it prints the run's duration against N / rate (the physical limit
of a refresh at the rate in force), the calls let through and answered 429 during the run (from
the simulator's own counts), and how many accounts have values. For `overload` it prints the
oldest value served (time since the oldest account's last success, sampled every 0.5 s) against
the bound ceil(N / (rate x interval)) x interval. Everything it starts is stopped at the end;
every wait is bounded.

    python3 bench/ratelimit.py [--scenario none] [--accounts 1000] [--runs 5]

The shapes of rate limits (issue 29), each with its own fleet, interval and concurrency (they
ignore --accounts unless given; --runs overrides the collector runs each one watches):

  burst1, burst5, burst60
               600 accounts every 20 s (api.concurrency 16) behind a token limited at 60/s
               with a bucket of 1, 5 or 60, 429 without Retry-After: from the exporter's start,
               the time until every account has values (goal 1.5 x N / rate + one interval), the
               accounts with values after 45 s, each run against N / rate (goal 1.2x from run 2
               on) and the 429 share of runs 2 on (goal <= 5 %)
  burst5-retry-after
               the same with burst 5 and Retry-After (seconds)
  endpoints-free
               300 accounts polled by delivery_account and tracemail_daily (2 calls per account)
               every 20 s, concurrency 16, no limit: each collector's run, the bound of the two
               scenarios below (run it first, or within the `endpoints` or `shapes` group)
  stats-limited
               the same with the route tracemail_daily (both of its calls) limited at 5/s: the
               account collector's runs against their bound (goal 1.2x), the statistics'
               refresh against 2N / rate (time until every account has them, calls let through
               per second)
  account-limited
               the same with the route delivery_account_get limited at 20/s: the statistics'
               runs against their bound, the account collector's runs against N / rate
  bad1, bad10  300 accounts every 20 s (concurrency 8), no limit, 1 % (3) or 10 % (30) of them
               answering 429 to every call without Retry-After: the healthy accounts' oldest
               value after two runs (sampled every 0.5 s; goal one interval), the time until
               every healthy account has values, the throttled ones' state (failure reason,
               mailhost_api_throttled_targets) and the calls they cost per interval (/_sim/hits)
  bad1-retry-after, bad10-retry-after
               the same with Retry-After: 1
  ha-pair      two exporters started together polling the same 600 accounts every 30 s
               (concurrency 16) on one token limited at 60/s (burst 60, no Retry-After): the
               time until every account has values in each, each one's runs against 2N / rate,
               the 429 share once both have run once

An unwell provider (issue 39), the group `unwell` (with the bursts again, for their refusals
over the first interval); `--binary PATH` runs another exporter build against the same
simulator, for a side-by-side figure:

  outage, outage-retry-after, outage-no-answer
               600 accounts every 20 s (concurrency 16), no limit; once every account has values,
               every call of the account route fails for 60 s: 503 without a header, 503 with
               Retry-After: 10, or no answer at all. The calls per interval during it (goal at
               most 1.2 x the targets; with Retry-After, one per Retry-After) and how long after
               it every account is refreshed (goal one interval)
  throttle503-burst1, throttle503-burst5
               the bursts' shape (60/s, bucket of 1 or 5) refusing with 503 and Retry-After
               (seconds) instead of 429: the goals of the 429 shapes
  bad5-503     600 accounts every 20 s, 5 % of them answering 503 to every call: the healthy
               ones' oldest value (goal one interval) and the calls per interval to every account
               (goal at most 1.2 x the targets)

Every burst and throttle shape also prints the calls refused over the first interval from the
exporter's start (goal at most 5 % of the fleet). The group `cold` runs the bursts of 1, 5 and 60
with answers in 50 ms (burst1-50ms, burst5-50ms, burst60-50ms), as a provider far away answers
a cold start.

Groups: `shapes` (all of the issue-29 shapes, in that order), `bursts`, `endpoints`
(endpoints-free, stats-limited, account-limited), `bad`, `unwell`; `all` is still the
issue-18 set. A group ends with a
summary of every scenario against its goal.

    python3 bench/ratelimit.py --scenario shapes [--runs 4]

Build first (`cargo build --release --bins`) or pass --build.
"""

import argparse
import json
import math
import re
import time

import harness as h
from harness import http, value

FIRST = h.FIRST_EXTRA
DURATION = 'mailhost_collector_duration_seconds{collector="delivery_account"}'
LAST_OK = "mailhost_target_last_success_timestamp_seconds{"
REMAINING = "mailhost_delivery_remaining_messages{"

SCENARIOS = {
    # name: (rate, retry_after, headers, interval)
    "none": (50.0, "none", "none", 30),
    "retry-after": (50.0, "seconds", "none", 30),
    "headers": (50.0, "seconds", "both", 30),
    "drop": (100.0, "seconds", "none", 60),
    "overload": (50.0, "seconds", "none", 15),
    # The reseller of the issue that asked for pacing: 600 accounts every 20 s behind a token
    # limited at a few dozen requests a second, 429 with Retry-After: 1 (run with --accounts 600).
    "reseller": (40.0, "seconds", "none", 20),
}


def limiter_counts(sim, token):
    """(let through, answered 429) for the token, from the simulator's control plane."""
    listing = json.loads(http("GET", f"{sim}/_sim/rate_limits", token))
    entry = listing["rate_limits"][0]
    return entry["allowed"], entry["limited"]


def set_limit(sim, token, rate, retry_after, headers):
    body = {"rate": rate, "burst": rate, "retry_after": retry_after, "headers": headers}
    http("PUT", f"{sim}/_sim/rate_limit", token, json.dumps(body).encode())


def run_scenario(name, args):
    rate, retry_after, headers, interval = SCENARIOS[name]
    n = args.accounts
    rows = []
    with h.Bench(f"mailhost-ratelimit-{name}-") as b:
        token = b.token
        sim = b.start_sim(n, patience=120)
        set_limit(sim, token, rate, retry_after, headers)
        counts = limiter_counts(sim, token)
        config = b.write("config.yml", h.delivery_config(
            sim, token_file=b.token_file(), timeout="10s", **h.schedule(interval),
            accounts=range(FIRST, FIRST + n)))
        server = b.start_exporter(config, patience=60, binary=BINARY)
        exporter, log = server.url, server.log

        runs = args.runs if name != "drop" else max(args.runs, 6)
        in_force = rate
        seen = None
        oldest = 0.0
        started = time.time()
        deadline = started + (runs + 2) * interval * 2 + 60
        while len(rows) < runs and time.time() < deadline:
            body = http("GET", f"{exporter}/metrics")
            now = time.time()
            if name == "overload" and len(rows) >= 2:
                stamps = [float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
                          if l.startswith(LAST_OK)]
                if len(stamps) == n:
                    oldest = max(oldest, now - min(stamps))
            took = value(body, DURATION)
            if took is not None and took != seen:
                seen = took
                after = limiter_counts(sim, token)
                allowed, limited = after[0] - counts[0], after[1] - counts[1]
                counts = after
                shown = sum(1 for l in body.splitlines() if l.startswith(REMAINING))
                deferred = value(body, 'mailhost_collector_deferred_targets{collector="delivery_account"}')
                learned = value(body, "mailhost_api_pacer_rate")
                rows.append((len(rows) + 1, in_force, took, allowed, limited, shown, deferred, learned))
                # The drop: a quarter into run 3; back up a quarter into run 5.
                if name == "drop" and len(rows) in (2, 4):
                    target = 25.0 if len(rows) == 2 else rate
                    wait_until = time.time() + interval * 2
                    while time.time() < wait_until:
                        now_counts = limiter_counts(sim, token)
                        if now_counts[0] - counts[0] >= n // 4:
                            break
                        time.sleep(0.1)
                    set_limit(sim, token, target, retry_after, headers)
                    in_force = target
            time.sleep(0.5)
        with open(log, encoding="utf-8", errors="replace") as f:
            warns = [line.strip() for line in f if "level=warn" in line]

    print(f"\n## {name}: {n} accounts, {rate:g} requests/s (burst {rate:g}), Retry-After "
          f"{retry_after}, headers {headers}, interval {interval}s (deadline {interval * 9 // 10}s)")
    print("| run | limit in force | run took | N / rate | ratio | calls let through | 429 | 429 share "
          "| accounts with values | deferred | learned rate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run, force, took, allowed, limited, shown, deferred, learned in rows:
        ideal = n / force
        share = limited / max(allowed + limited, 1)
        print(f"| {run} | {force:g}/s | {took:.1f} s | {ideal:.1f} s | {took / ideal:.2f}x "
              f"| {allowed} | {limited} | {share:.1%} | {shown} | "
              f"{'' if deferred is None else int(deferred)} | "
              f"{'' if learned is None else f'{learned:.1f}/s'} |")
    if name == "overload":
        bound = math.ceil(n / (rate * interval)) * interval
        print(f"oldest value served after the first two runs: {oldest:.1f} s "
              f"(bound ceil(N / (rate x interval)) x interval = {bound} s)")
    print(f"warn lines: {len(warns)}")
    for w in warns[:5]:
        print("  " + re.sub(r"^ts=\S+ ", "", w)[:400])
    return rows


# --- The shapes of rate limits (issue 29) ---------------------------------------------------

# The exporter binary (--binary), None for this tree's release build.
BINARY = None

LABELS = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# name: what the scenario limits, and how. kind: "burst" (a token bucket of rate 60 and this
# burst), "endpoint" (one route of the token limited, or none), "bad" (a share of the accounts
# answering 429 to every call), "ha" (two exporters, one token).
SHAPES = {
    "burst1": dict(kind="burst", accounts=600, interval=20, runs=5, rate=60.0, burst=1,
                   retry_after="none"),
    "burst5": dict(kind="burst", accounts=600, interval=20, runs=5, rate=60.0, burst=5,
                   retry_after="none"),
    "burst60": dict(kind="burst", accounts=600, interval=20, runs=5, rate=60.0, burst=60,
                    retry_after="none"),
    "burst5-retry-after": dict(kind="burst", accounts=600, interval=20, runs=5, rate=60.0,
                               burst=5, retry_after="seconds"),
    "endpoints-free": dict(kind="endpoint", accounts=300, interval=20, runs=4, route=None,
                           rate=None),
    "stats-limited": dict(kind="endpoint", accounts=300, interval=20, runs=7,
                          route="tracemail_daily", rate=5.0),
    "account-limited": dict(kind="endpoint", accounts=300, interval=20, runs=5,
                            route="delivery_account_get", rate=20.0),
    "bad1": dict(kind="bad", accounts=300, interval=20, runs=6, share=0.01, retry_after=False),
    "bad10": dict(kind="bad", accounts=300, interval=20, runs=6, share=0.10, retry_after=False),
    "bad1-retry-after": dict(kind="bad", accounts=300, interval=20, runs=6, share=0.01,
                             retry_after=True),
    "bad10-retry-after": dict(kind="bad", accounts=300, interval=20, runs=6, share=0.10,
                              retry_after=True),
    "ha-pair": dict(kind="ha", accounts=600, interval=30, runs=5, rate=60.0, burst=60,
                    retry_after="none"),
    # An unwell provider (issue 39).
    "outage": dict(kind="outage", accounts=600, interval=20, runs=0, length=60,
                   fault={"error_rate": 1.0, "error_status": 503}),
    "outage-retry-after": dict(kind="outage", accounts=600, interval=20, runs=0, length=60,
                               fault={"error_rate": 1.0, "error_status": 503,
                                      "error_retry_after_secs": 10}),
    "outage-no-answer": dict(kind="outage", accounts=600, interval=20, runs=0, length=60,
                             fault={"no_answer_rate": 1.0}),
    "throttle503-burst1": dict(kind="burst", accounts=600, interval=20, runs=5, rate=60.0,
                               burst=1, retry_after="seconds", status=503),
    "throttle503-burst5": dict(kind="burst", accounts=600, interval=20, runs=5, rate=60.0,
                               burst=5, retry_after="seconds", status=503),
    "bad5-503": dict(kind="bad", accounts=600, interval=20, runs=6, share=0.05,
                     retry_after=False, status=503),
    # The bursts with answers in 50 ms, as the issue measured a cold start.
    "burst1-50ms": dict(kind="burst", accounts=600, interval=20, runs=3, rate=60.0, burst=1,
                        retry_after="none", latency_ms=50),
    "burst5-50ms": dict(kind="burst", accounts=600, interval=20, runs=3, rate=60.0, burst=5,
                        retry_after="none", latency_ms=50),
    "burst60-50ms": dict(kind="burst", accounts=600, interval=20, runs=3, rate=60.0, burst=60,
                         retry_after="none", latency_ms=50),
}
GROUPS = {
    "shapes": list(SHAPES),
    "bursts": ["burst1", "burst5", "burst60", "burst5-retry-after"],
    "endpoints": ["endpoints-free", "stats-limited", "account-limited"],
    "bad": ["bad1", "bad10", "bad1-retry-after", "bad10-retry-after"],
    "unwell": ["outage", "outage-retry-after", "outage-no-answer", "throttle503-burst1",
               "throttle503-burst5", "bad5-503", "burst1", "burst5", "burst60",
               "burst5-retry-after"],
    "cold": ["burst1-50ms", "burst5-50ms", "burst60-50ms"],
}
# The collectors of the endpoint scenarios, and the calls each makes per account.
CALLS = {"delivery_account": 1, "tracemail_daily": 2}
SAMPLE_EVERY = 0.5


class State:
    """What one /metrics says about runs, targets and the pacer (only the health and pacer
    series are read)."""

    def __init__(self, body):
        self.last_ok = {}      # collector -> {target: last success timestamp}
        self.failing = {}      # collector -> {target: reason}
        self.duration = {}     # collector -> last run's duration
        self.deferred = {}     # collector -> deferred targets of the last run
        self.endpoint_rate = {}
        self.throttled = {}
        self.pacer_rate = None
        for line in body.splitlines():
            if not line.startswith("mailhost_"):
                continue
            name, _, rest = line.partition("{")
            if not rest:
                if line.startswith("mailhost_api_pacer_rate "):
                    self.pacer_rate = float(line.rsplit(" ", 1)[1])
                continue
            labels = dict(LABELS.findall(rest.rpartition("}")[0]))
            v = float(line.rsplit(" ", 1)[1])
            if name == "mailhost_target_last_success_timestamp_seconds":
                self.last_ok.setdefault(labels["collector"], {})[labels["target"]] = v
            elif name == "mailhost_target_failure_info":
                self.failing.setdefault(labels["collector"], {})[labels["target"]] = labels["reason"]
            elif name == "mailhost_collector_duration_seconds":
                self.duration[labels["collector"]] = v
            elif name == "mailhost_collector_deferred_targets":
                self.deferred[labels["collector"]] = v
            elif name == "mailhost_api_pacer_endpoint_rate":
                self.endpoint_rate[labels["endpoint"]] = v
            elif name == "mailhost_api_throttled_targets":
                self.throttled[labels["endpoint"]] = v
            elif name == "mailhost_api_pacer_rate":
                self.pacer_rate = v

    def values(self, collector, among=None):
        """How many targets of the collector have values (among `among` when given)."""
        have = self.last_ok.get(collector, {})
        return len(have) if among is None else sum(1 for t in among if t in have)


def limits(sim, token):
    """The simulator's limits: {route or None: (let through, answered 429)}."""
    listing = json.loads(http("GET", f"{sim}/_sim/rate_limits", token))
    return {e["route"]: (e["allowed"], e["limited"]) for e in listing["rate_limits"]}


def hits(sim, token):
    return json.loads(http("GET", f"{sim}/_sim/hits", token))["hits"]


def start_limited_token(b, spec, n):
    """The simulator with `n` accounts behind a token limited as `spec` says (rate, burst,
    Retry-After, the status of a refusal, no headers), and the checked config polling them
    with delivery_account."""
    sim = b.start_sim(n, patience=120)
    body = {"rate": spec["rate"], "burst": spec["burst"], "retry_after": spec["retry_after"],
            "headers": "none", "status": spec.get("status", 429)}
    http("PUT", f"{sim}/_sim/rate_limit", b.token, json.dumps(body).encode())
    if spec.get("latency_ms"):
        b.fault("delivery_account_get", {"latency_ms": spec["latency_ms"]})
    config = b.write("config.yml", shape_config(sim, b.token_file(), ["delivery_account"],
                                                range(FIRST, FIRST + n), spec["interval"], 16))
    b.check_config(config, binary=BINARY)
    return sim, config


def shape_config(sim, token_file, collectors, accounts, interval, concurrency):
    """The exporter's config: one token, these collectors on the same accounts."""
    sched = h.schedule(interval)
    out = ["api:", f"  base_url: {sim}", f"  token_file: {token_file}", "  timeout: 10s"]
    if concurrency:
        out.append(f"  concurrency: {concurrency}")
    out.append("collectors:")
    for name in collectors:
        out += [f"  {name}:", *h.fields("    ", **sched)]
        if name == "tracemail_daily":
            out.append("    timezone: UTC")
        out.append(f"    accounts: [{h.ids(accounts)}]")
    return "\n".join(out) + "\n"


class Watch:
    """Samples one exporter's /metrics every 0.5 s: each collector's runs (a run is seen when
    its duration changes), with the limiter's counts between runs, and a callback per sample."""

    def __init__(self, url, collectors):
        self.url = url
        self.runs = {c: [] for c in collectors}  # each run: dict
        self.seen = {c: None for c in collectors}
        self.state = None

    def sample(self, now, since):
        body = h.get(f"{self.url}/metrics", timeout=10)
        if body is None:
            return []
        st = State(body.decode(errors="replace"))
        self.state = st
        new = []
        for c, runs in self.runs.items():
            took = st.duration.get(c)
            if took is not None and took != self.seen[c]:
                self.seen[c] = took
                run = dict(n=len(runs) + 1, at=now - since, took=took,
                           deferred=int(st.deferred.get(c) or 0), values=st.values(c),
                           catch_up=bool(runs and runs[-1]["deferred"]),
                           rate=st.pacer_rate, endpoint_rate=dict(st.endpoint_rate))
                runs.append(run)
                new.append((c, run))
        return new


def fmt_rate(v):
    return "" if v is None else f"{v:.1f}/s"


def share(limited, allowed):
    return limited / max(allowed + limited, 1)


def warn_lines(log):
    with open(log, encoding="utf-8", errors="replace") as f:
        return [re.sub(r"^ts=\S+ ", "", line.strip()) for line in f if "level=warn" in line]


def print_warns(warns):
    print(f"warn lines: {len(warns)}")
    for w in warns[:5]:
        print("  " + w[:400])


def run_bursts(name, spec, n, runs, work):
    """One token limited at `rate` with a bucket of `burst`; one exporter from a cold start."""
    rate, burst, interval = spec["rate"], spec["burst"], spec["interval"]
    ideal = n / rate
    with h.Bench(f"mailhost-ratelimit-{name}-", work) as b:
        sim, config = start_limited_token(b, spec, n)
        counts = limits(sim, b.token)[None]
        t0 = time.time()
        server = b.start_exporter(config, patience=60, binary=BINARY)
        watch = Watch(server.url, ["delivery_account"])
        all_at = None
        at = {}
        first_interval = None  # calls refused over the first interval from the start
        start_counts = counts
        deadline = t0 + (runs + 2) * interval * 2 + 60
        while len(watch.runs["delivery_account"]) < runs and time.time() < deadline:
            now = time.time()
            if first_interval is None and now - t0 >= interval:
                first_interval = limits(sim, b.token)[None][1] - start_counts[1]
            for _, run in watch.sample(now, t0):
                after = limits(sim, b.token)[None]
                run["allowed"], run["limited"] = after[0] - counts[0], after[1] - counts[1]
                counts = after
            st = watch.state
            if st is not None:
                have = st.values("delivery_account")
                if all_at is None and have >= n:
                    all_at = now - t0
                for mark in (15, 30, 45):
                    if mark not in at and now - t0 >= mark:
                        at[mark] = have
            time.sleep(SAMPLE_EVERY)
        warns = warn_lines(server.log)
    rows = watch.runs["delivery_account"]
    steady = [r for r in rows[1:] if "allowed" in r]
    full = [r for r in steady if not r["catch_up"]]
    allowed = sum(r["allowed"] for r in steady)
    limited = sum(r["limited"] for r in steady)
    goal_all = 1.5 * ideal + interval
    status = spec.get("status", 429)
    latency = f", answers in {spec['latency_ms']} ms" if spec.get("latency_ms") else ""
    print(f"\n## {name}: {n} accounts, {rate:g} requests/s, burst {burst:g}, refused with "
          f"{status}, Retry-After {spec['retry_after']}, interval {interval}s, concurrency 16"
          f"{latency}")
    print(f"calls refused over the first interval from the exporter's start: {first_interval} "
          f"({(first_interval or 0) / n:.1%} of the fleet; goal at most 5 %)")
    print(f"every account with values {'after %.1f s' % all_at if all_at else 'never'} from the "
          f"exporter's start (goal 1.5 x N / rate + one interval = {goal_all:.0f} s); with values "
          f"after 15 s: {at.get(15)}, 30 s: {at.get(30)}, 45 s: {at.get(45)}")
    print("| run | at | took | N / rate | ratio | catch-up | 429 | let through | 429 share "
          "| accounts with values | deferred | learned rate (token, endpoint) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | {r['at']:.1f} s | {r['took']:.1f} s | {ideal:.1f} s "
              f"| {r['took'] / ideal:.2f}x | {'yes' if r['catch_up'] else ''} "
              f"| {r.get('limited', '')} | {r.get('allowed', '')} "
              f"| {share(r.get('limited', 0), r.get('allowed', 0)):.1%} | {r['values']} "
              f"| {r['deferred']} | {fmt_rate(r['rate'])}, "
              f"{fmt_rate(r['endpoint_rate'].get('delivery_account'))} |")
    worst = max((r["took"] for r in full), default=None)
    took_list = ", ".join(f"{r['took']:.1f}" for r in full)
    print(f"runs 2 to {len(rows)}: full runs {took_list} s "
          f"(worst {worst / ideal if worst else float('nan'):.2f}x of N / rate); "
          f"429 share {limited} of {allowed + limited} ({share(limited, allowed):.2%})")
    print_warns(warns)
    return dict(name=name, all_at=all_at, goal_all=goal_all, at45=at.get(45), n=n, ideal=ideal,
                first_interval=first_interval,
                full=[r["took"] for r in full], first=rows[0]["took"] if rows else None,
                limited=limited, calls=allowed + limited,
                learned=rows[-1]["rate"] if rows else None, warns=len(warns))


def run_endpoints(name, spec, n, runs, work, bounds):
    """Two collectors on the same accounts, one route of the token limited (or none)."""
    interval, route, rate = spec["interval"], spec["route"], spec["rate"]
    collectors = ["delivery_account", "tracemail_daily"]
    limited_collector = {"tracemail_daily": "tracemail_daily",
                         "delivery_account_get": "delivery_account"}.get(route)
    with h.Bench(f"mailhost-ratelimit-{name}-", work) as b:
        sim = b.start_sim(n, patience=120)
        if route:
            body = {"route": route, "rate": rate, "retry_after": "none", "headers": "none"}
            http("PUT", f"{sim}/_sim/rate_limit", b.token, json.dumps(body).encode())
        config = b.write("config.yml", shape_config(sim, b.token_file(), collectors,
                                                    range(FIRST, FIRST + n), interval, 16))
        b.check_config(config, binary=BINARY)
        counts0 = limits(sim, b.token).get(route, (0, 0)) if route else (0, 0)
        t0 = time.time()
        server = b.start_exporter(config, patience=60, binary=BINARY)
        watch = Watch(server.url, collectors)
        all_at = {}
        limited_all = None
        # The route's counts when the limited collector's first run ended: the steady share of
        # 429s is read from there on (the cold start's is the first run's).
        steady_from = None
        # A limited collector that cannot refresh within an interval is watched until every
        # account has its values (2N / rate), at most 1.5 times that and an interval; the
        # others for `runs` runs.
        bound_s = (n * CALLS[limited_collector] / rate) if limited_collector else 0
        deadline = t0 + max((runs + 1) * interval, 1.5 * bound_s + interval) + 30
        free = [c for c in collectors if c != limited_collector]

        def done():
            if any(len(watch.runs[c]) < runs for c in free):
                return False
            if limited_collector:
                return limited_collector in all_at and len(watch.runs[limited_collector]) >= 2
            return True

        while not done() and time.time() < deadline:
            now = time.time()
            watch.sample(now, t0)
            if limited_collector and steady_from is None and watch.runs[limited_collector]:
                steady_from = limits(sim, b.token).get(route)
            st = watch.state
            if st is not None:
                for c in collectors:
                    if c not in all_at and st.values(c) >= n:
                        all_at[c] = now - t0
                        if c == limited_collector:
                            limited_all = limits(sim, b.token).get(route)
            time.sleep(SAMPLE_EVERY)
        final = limits(sim, b.token).get(route) if route else None
        last = watch.state
        warns = warn_lines(server.log)
    print(f"\n## {name}: {n} accounts polled by delivery_account (1 call each) and "
          f"tracemail_daily (2 calls each) every {interval}s, concurrency 16, "
          f"{f'route {route} limited at {rate:g}/s (burst {max(1.0, rate):g}, no Retry-After)' if route else 'no limit'}")
    result = dict(name=name, route=route, rate=rate, n=n, all_at=all_at, warns=len(warns))
    for c in collectors:
        rows = watch.runs[c]
        later = [r for r in rows[1:]]
        print(f"\n### {c}: every account with values "
              f"{'after %.1f s' % all_at[c] if c in all_at else 'not within the watch'}")
        print("| run | at | took | deferred | accounts with values | endpoint rates learned |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            rates = ", ".join(f"{k} {v:.1f}/s" for k, v in sorted(r["endpoint_rate"].items()))
            print(f"| {r['n']} | {r['at']:.1f} s | {r['took']:.2f} s | {r['deferred']} "
                  f"| {r['values']} | {rates} |")
        result[c] = dict(first=rows[0]["took"] if rows else None,
                         later=[r["took"] for r in later],
                         full=[r["took"] for r in later if not r["catch_up"]])
    if route:
        allowed = (final[0] - counts0[0]) if final else 0
        refused = (final[1] - counts0[1]) if final else 0
        print(f"\nroute {route}: let through {allowed}, answered 429 {refused} "
              f"({share(refused, allowed):.1%}) over {time.time() - t0:.0f} s")
        if final and steady_from:
            s_allowed, s_refused = final[0] - steady_from[0], final[1] - steady_from[1]
            print(f"route {route} once {limited_collector} has run once: let through "
                  f"{s_allowed}, answered 429 {s_refused} ({share(s_refused, s_allowed):.1%})")
            result.update(steady=(s_allowed, s_refused))
        if limited_collector and limited_all:
            calls = n * CALLS[limited_collector]
            took = all_at[limited_collector]
            print(f"{limited_collector}: every account with values after {took:.1f} s against "
                  f"{CALLS[limited_collector]}N / rate = {calls / rate:.1f} s "
                  f"({took / (calls / rate):.2f}x); {limited_all[0] - counts0[0]} let through "
                  f"and {limited_all[1] - counts0[1]} answered 429 until then")
        result.update(allowed=allowed, refused=refused, limited_collector=limited_collector)
    if last is not None:
        print(f"endpoint rates learned at the end: {last.endpoint_rate}; token rate "
              f"{fmt_rate(last.pacer_rate) or 'none'}; throttled targets {last.throttled}")
        result["endpoint_rate"] = dict(last.endpoint_rate)
        result["pacer_rate"] = last.pacer_rate
    for c in free:
        bound = bounds.get(c)
        full = result[c]["full"]
        if bound and full:
            print(f"{c} (free): runs 2 on {', '.join(f'{t:.2f}' for t in full)} s against the "
                  f"unlimited bound {bound:.2f} s (worst {max(full) / bound:.2f}x)")
        elif not bound:
            print(f"{c} (free): no unlimited bound known; run endpoints-free first")
    print_warns(warns)
    if not route:
        for c in collectors:
            full = sorted(result[c]["full"]) or sorted(result[c]["later"])
            if full:
                bounds[c] = full[len(full) // 2]
    result["bounds"] = dict(bounds)
    return result


def run_bad(name, spec, n, runs, work):
    """No limit; a share of the accounts answer 429 to every call."""
    interval = spec["interval"]
    k = max(1, round(n * spec["share"]))
    step = n // k
    bad = [str(FIRST + j * step + step // 2) for j in range(k)]
    healthy = [str(i) for i in range(FIRST, FIRST + n) if str(i) not in set(bad)]
    if spec.get("status"):
        fault = {"error_rate": 1.0, "error_status": spec["status"], "only_ids": bad}
    else:
        fault = {"rate_limit_rate": 1.0, "only_ids": bad}
        fault.update({"retry_after_secs": 1} if spec["retry_after"] else
                     {"retry_after_omit": True})
    with h.Bench(f"mailhost-ratelimit-{name}-", work) as b:
        sim = b.start_sim(n, patience=120)
        b.fault("delivery_account_get", fault)
        config = b.write("config.yml", shape_config(sim, b.token_file(), ["delivery_account"],
                                                    range(FIRST, FIRST + n), interval, None))
        b.check_config(config, binary=BINARY)
        t0 = time.time()
        server = b.start_exporter(config, patience=60, binary=BINARY)
        watch = Watch(server.url, ["delivery_account"])
        all_at = None
        at50 = None
        oldest = 0.0
        healthy_failing = set()
        hits_from = None   # (time, hits) at the end of run 2
        deadline = t0 + (runs + 2) * interval * 2 + 60
        rows = watch.runs["delivery_account"]
        while len(rows) < runs and time.time() < deadline:
            now = time.time()
            new = watch.sample(now, t0)
            st = watch.state
            if st is not None:
                have = st.last_ok.get("delivery_account", {})
                failing = st.failing.get("delivery_account", {})
                got = sum(1 for t in healthy if t in have)
                if all_at is None and got == len(healthy):
                    all_at = now - t0
                if at50 is None and now - t0 >= 50:
                    at50 = got
                healthy_failing |= {t for t in failing if t not in set(bad)}
                if len(rows) >= 2:
                    if got < len(healthy):
                        oldest = float("inf")
                    else:
                        oldest = max(oldest, now - min(have[t] for t in healthy))
                if new and len(rows) == 2:
                    hits_from = (now, hits(sim, b.token))
            time.sleep(SAMPLE_EVERY)
        end = time.time()
        hits_to = hits(sim, b.token)
        st = watch.state
        warns = warn_lines(server.log)
    paths = [f"/api/delivery/accounts/{i}" for i in bad]
    calls_total = sum(hits_to.get(p, 0) for p in paths)
    all_paths = [f"/api/delivery/accounts/{i}" for i in range(FIRST, FIRST + n)]
    every_call = sum(hits_to.get(p, 0) for p in all_paths) - (
        sum(hits_from[1].get(p, 0) for p in all_paths) if hits_from else 0)
    if hits_from:
        calls_window = calls_total - sum(hits_from[1].get(p, 0) for p in paths)
        intervals = (end - hits_from[0]) / interval
    else:
        calls_window, intervals = 0, 0
    per = calls_window / max(k, 1) / intervals if intervals else float("nan")
    failing = st.failing.get("delivery_account", {}) if st else {}
    reasons = {}
    for t in bad:
        r = failing.get(t, "ok" if t in (st.last_ok.get("delivery_account", {}) if st else {})
                        else "no values")
        reasons[r] = reasons.get(r, 0) + 1
    throttled = st.throttled.get("delivery_account") if st else None
    what = (f"{spec['status']}" if spec.get("status") else
            f"429, {'Retry-After: 1' if spec['retry_after'] else 'no Retry-After'}")
    print(f"\n## {name}: {n} accounts every {interval}s (concurrency 8), no limit; {k} of them "
          f"answer {what} to every call")
    print("| run | at | took | deferred | accounts with values |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | {r['at']:.1f} s | {r['took']:.2f} s | {r['deferred']} | {r['values']} |")
    print(f"every healthy account ({len(healthy)}) with values "
          f"{'after %.1f s' % all_at if all_at else 'never'}; after 50 s: {at50} of {len(healthy)}")
    print(f"healthy accounts' oldest value after the first two runs: {oldest:.1f} s "
          f"(one interval = {interval} s); healthy accounts ever failing: {len(healthy_failing)}")
    print(f"throttled accounts at the end: {reasons}; mailhost_api_throttled_targets"
          f"{{endpoint=\"delivery_account\"}} = {throttled}")
    print(f"calls to the {k} throttled accounts: {calls_total} in all, {calls_window} over the "
          f"last {intervals:.1f} intervals = {per:.2f} per account per interval")
    if intervals:
        print(f"calls to every account over the last {intervals:.1f} intervals: "
              f"{every_call / intervals:.0f} per interval for {n} accounts "
              f"({every_call / intervals / n:.2f}x the targets; goal at most 1.2x)")
    print_warns(warns)
    return dict(name=name, k=k, n=n, all_at=all_at, at50=at50, oldest=oldest, interval=interval,
                healthy=len(healthy), healthy_failing=len(healthy_failing), reasons=reasons,
                throttled=throttled, per=per, calls_total=calls_total, warns=len(warns),
                runs=[r["took"] for r in rows])


def account_calls(sim, token, n):
    """Calls the simulator received for the `n` accounts' GET /api/delivery/accounts/{id}."""
    got = hits(sim, token)
    return sum(got.get(f"/api/delivery/accounts/{i}", 0) for i in range(FIRST, FIRST + n))


def run_outage(name, spec, n, work):
    """No limit; once every account has values, every call of the account route fails for
    `length` seconds as `fault` says (503 with or without Retry-After, or no answer at all).
    The calls per interval during it, and how long after it every account is refreshed."""
    interval, length = spec["interval"], spec["length"]
    with h.Bench(f"mailhost-ratelimit-{name}-", work) as b:
        sim = b.start_sim(n, patience=120)
        config = b.write("config.yml", shape_config(sim, b.token_file(), ["delivery_account"],
                                                    range(FIRST, FIRST + n), interval, 16))
        b.check_config(config, binary=BINARY)
        t0 = time.time()
        server = b.start_exporter(config, patience=60, binary=BINARY)
        watch = Watch(server.url, ["delivery_account"])
        deadline = t0 + 3 * interval + 60
        while time.time() < deadline:
            watch.sample(time.time(), t0)
            st = watch.state
            if st is not None and st.values("delivery_account") >= n:
                break
            time.sleep(SAMPLE_EVERY)
        ready = time.time() - t0
        before = account_calls(sim, b.token, n)
        b.fault("delivery_account_get", dict(spec["fault"], lasts_ms=length * 1000))
        began = time.time()
        outage_seen = False
        refused_retries = None
        settled = None  # calls by the end of the first interval of the outage
        while time.time() < began + length:
            if settled is None and time.time() >= began + interval:
                settled = account_calls(sim, b.token, n)
            body = h.get(f"{server.url}/metrics", timeout=10)
            if body is not None:
                text = body.decode(errors="replace")
                outage_seen |= 'mailhost_api_endpoint_outage{endpoint="delivery_account"} 1' in text
                for line in text.splitlines():
                    if line.startswith('mailhost_api_retries_refused_total{endpoint="delivery_account"}'):
                        refused_retries = float(line.rsplit(" ", 1)[1])
            time.sleep(SAMPLE_EVERY)
        after = account_calls(sim, b.token, n)
        during = after - before
        later = after - settled if settled is not None else None
        ended = began + length
        recovered = None
        while time.time() < ended + 3 * interval + 60:
            watch.sample(time.time(), t0)
            st = watch.state
            have = st.last_ok.get("delivery_account", {}) if st else {}
            if len(have) >= n and min(have.values()) >= ended:
                recovered = time.time() - ended
                break
            time.sleep(SAMPLE_EVERY)
        warns = warn_lines(server.log)
    per_interval = during / (length / interval)
    goal_per_interval = 1.2 * n
    retry_after = spec["fault"].get("error_retry_after_secs")
    if retry_after:
        # What the header allows: one call per Retry-After, per interval.
        goal_per_interval = interval / retry_after
    goal_recovery = interval
    print(f"\n## {name}: {n} accounts every {interval}s (concurrency 16), no limit; every call "
          f"of the account route fails for {length} s: {json.dumps(spec['fault'])}")
    print(f"every account with values {ready:.1f} s after the start; during the outage "
          f"{during} calls = {per_interval:.1f} per interval (goal at most "
          f"{goal_per_interval:.0f}); outage state seen: {outage_seen}; retries refused by the "
          f"budget: {refused_retries}")
    if later is not None:
        print(f"after its first interval (the calls in flight when the first answers came, and "
              f"what they taught): {later} calls over {length - interval} s = "
              f"{later / ((length - interval) / interval):.1f} per interval")
    print(f"every account refreshed {'%.1f s' % recovered if recovered is not None else 'never'} "
          f"after the outage ended (goal one interval, {goal_recovery} s)")
    print_warns(warns)
    return dict(name=name, per_interval=per_interval, goal_per_interval=goal_per_interval,
                recovered=recovered, goal_recovery=goal_recovery, outage_seen=outage_seen)


def run_ha(name, spec, n, runs, work):
    """Two exporters, one token: each should get about half the rate."""
    rate, burst, interval = spec["rate"], spec["burst"], spec["interval"]
    ideal = 2 * n / rate
    with h.Bench(f"mailhost-ratelimit-{name}-", work) as b:
        sim, config = start_limited_token(b, spec, n)
        counts0 = limits(sim, b.token)[None]
        t0 = time.time()
        servers = [b.start_exporter(config, patience=60, binary=BINARY, log=f"exporter-{x}.log")
                   for x in "ab"]
        watches = [Watch(s.url, ["delivery_account"]) for s in servers]
        all_at = [None, None]
        steady_from = None
        deadline = t0 + (runs + 2) * interval * 2 + 60
        while (min(len(w.runs["delivery_account"]) for w in watches) < runs
               and time.time() < deadline):
            now = time.time()
            for i, w in enumerate(watches):
                w.sample(now, t0)
                if all_at[i] is None and w.state and w.state.values("delivery_account") >= n:
                    all_at[i] = now - t0
            if steady_from is None and all(w.runs["delivery_account"] for w in watches):
                steady_from = limits(sim, b.token)[None]
            time.sleep(SAMPLE_EVERY)
        final = limits(sim, b.token)[None]
        warns = [warn_lines(s.log) for s in servers]
    steady = (final[0] - steady_from[0], final[1] - steady_from[1]) if steady_from else (0, 0)
    first = (final[0] - counts0[0], final[1] - counts0[1])
    print(f"\n## {name}: two exporters, the same {n} accounts every {interval}s (concurrency 16), "
          f"one token at {rate:g}/s (burst {burst:g}, Retry-After {spec['retry_after']})")
    out = dict(name=name, n=n, ideal=ideal, all_at=all_at, per=[], warns=[len(w) for w in warns])
    for x, w, t in zip("ab", watches, all_at):
        rows = w.runs["delivery_account"]
        print(f"\n### exporter {x}: every account with values "
              f"{'after %.1f s' % t if t else 'never'}")
        print("| run | at | took | 2N / rate | ratio | catch-up | deferred | accounts with values "
              "| learned rate |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['n']} | {r['at']:.1f} s | {r['took']:.1f} s | {ideal:.1f} s "
                  f"| {r['took'] / ideal:.2f}x | {'yes' if r['catch_up'] else ''} "
                  f"| {r['deferred']} | {r['values']} | {fmt_rate(r['rate'])} |")
        out["per"].append(dict(first=rows[0]["took"] if rows else None,
                               full=[r["took"] for r in rows[1:] if not r["catch_up"]],
                               learned=rows[-1]["rate"] if rows else None))
    print(f"\nlimiter: in all {first[0]} let through, {first[1]} answered 429 "
          f"({share(first[1], first[0]):.1%}); once both had run once {steady[0]} let through, "
          f"{steady[1]} answered 429 ({share(steady[1], steady[0]):.2%})")
    for x, wl in zip("ab", warns):
        print(f"exporter {x}: ", end="")
        print_warns(wl)
    out.update(steady=steady, total=first)
    return out


def summary(results):
    print("\n## Summary against the goals")
    for r in results:
        name = r["name"]
        if name.startswith("outage"):
            print(f"- {name}: {r['per_interval']:.1f} calls per interval during the outage "
                  f"(goal at most {r['goal_per_interval']:.0f}); every account refreshed "
                  f"{r['recovered'] and round(r['recovered'], 1)} s after it ended (goal "
                  f"{r['goal_recovery']:.0f} s, {'met' if r['recovered'] and r['recovered'] <= r['goal_recovery'] else 'NOT met'}); "
                  f"outage state seen: {r['outage_seen']}")
        elif name.startswith("burst") or name.startswith("throttle"):
            worst = max(r["full"]) / r["ideal"] if r["full"] else float("nan")
            print(f"- {name}: all values after {r['all_at'] and round(r['all_at'], 1)} s "
                  f"(goal {r['goal_all']:.0f} s, {'met' if r['all_at'] and r['all_at'] <= r['goal_all'] else 'NOT met'}); "
                  f"{r['at45']} of {r['n']} after 45 s; full runs 2 on worst {worst:.2f}x "
                  f"({'met' if worst <= 1.2 else 'NOT met'}); 429 share "
                  f"{share(r['limited'], r['calls'] - r['limited']):.2%} "
                  f"({'met' if r['calls'] and r['limited'] <= 0.05 * r['calls'] else 'NOT met'}); "
                  f"learned {fmt_rate(r['learned'])}; refused over the first interval "
                  f"{r['first_interval']} ({(r['first_interval'] or 0) / r['n']:.1%} of the fleet, "
                  f"{'met' if (r['first_interval'] or 0) <= 0.05 * r['n'] else 'NOT met'})")
        elif name.startswith("bad"):
            print(f"- {name}: healthy oldest {r['oldest']:.1f} s (goal {r['interval']} s, "
                  f"{'met' if r['oldest'] <= r['interval'] else 'NOT met'}); all healthy after "
                  f"{r['all_at'] and round(r['all_at'], 1)} s; {r['at50']} of {r['healthy']} after "
                  f"50 s; throttled {r['reasons']}, gauge {r['throttled']}; "
                  f"{r['per']:.2f} calls per throttled account per interval")
        elif name == "ha-pair":
            for x, p, t in zip("ab", r["per"], r["all_at"]):
                worst = max(p["full"]) / r["ideal"] if p["full"] else float("nan")
                print(f"- ha-pair {x}: all values after {t and round(t, 1)} s; full runs 2 on "
                      f"{', '.join(f'{v:.1f}' for v in p['full'])} s, worst {worst:.2f}x of "
                      f"2N / rate ({'met' if worst <= 1.2 else 'NOT met'}); learned "
                      f"{fmt_rate(p['learned'])}")
            print(f"- ha-pair: 429 share once both ran {share(r['steady'][1], r['steady'][0]):.2%}")
        else:
            bounds = r.get("bounds", {})
            parts = []
            for c in CALLS:
                full = r[c]["full"] or r[c]["later"]
                if not full:
                    continue
                if c == r.get("limited_collector"):
                    parts.append(f"{c} (limited) all values after "
                                 f"{r['all_at'].get(c) and round(r['all_at'][c], 1)} s, "
                                 f"runs {', '.join(f'{v:.2f}' for v in full)} s"
                                 + (f", 429 share once it ran "
                                    f"{share(r['steady'][1], r['steady'][0]):.1%} (goal 5 %, "
                                    f"{'met' if share(r['steady'][1], r['steady'][0]) <= 0.05 else 'NOT met'})"
                                    if r.get("steady") else ""))
                elif bounds.get(c):
                    worst = max(full) / bounds[c]
                    parts.append(f"{c} worst {max(full):.2f} s against {bounds[c]:.2f} s = "
                                 f"{worst:.2f}x ({'met' if worst <= 1.2 else 'NOT met'})")
                else:
                    parts.append(f"{c} runs {', '.join(f'{v:.2f}' for v in full)} s")
            print(f"- {name}: " + "; ".join(parts))


def run_shape(name, args, bounds):
    spec = SHAPES[name]
    n = args.accounts or spec["accounts"]
    runs = args.runs or spec["runs"]
    kind = spec["kind"]
    h.note(f"{name}: {n} accounts, {runs} runs")
    if kind == "burst":
        return run_bursts(name, spec, n, runs, None)
    if kind == "endpoint":
        return run_endpoints(name, spec, n, runs, None, bounds)
    if kind == "bad":
        return run_bad(name, spec, n, runs, None)
    if kind == "outage":
        return run_outage(name, spec, n, None)
    return run_ha(name, spec, n, runs, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="all",
                    choices=sorted(SCENARIOS) + ["all"] + list(SHAPES) + list(GROUPS))
    ap.add_argument("--accounts", type=int, default=None,
                    help="accounts (default 1000 for the issue-18 scenarios, each shape its own)")
    ap.add_argument("--runs", type=int, default=None,
                    help="collector runs to watch per scenario (default 5, each shape its own)")
    ap.add_argument("--binary", default=None,
                    help="the exporter binary to run (default: this tree's release build)")
    args = h.parse_args(ap)
    global BINARY
    BINARY = args.binary
    if args.scenario in SHAPES or args.scenario in GROUPS:
        names = GROUPS.get(args.scenario, [args.scenario])
        print(f"revision {h.revision()}, {h.now_utc()}, {h.machine()}, load {h.loadavg()}")
        bounds = {}
        results = [run_shape(name, args, bounds) for name in names]
        summary(results)
        print(f"load at the end {h.loadavg()}")
        return
    legacy = argparse.Namespace(accounts=args.accounts or 1000, runs=args.runs or 5)
    names = ([n for n in sorted(SCENARIOS) if n != "reseller"] if args.scenario == "all"
             else [args.scenario])
    for name in names:
        run_scenario(name, legacy)


if __name__ == "__main__":
    h.main(main)
