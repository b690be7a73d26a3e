#!/usr/bin/env python3
"""Isolation benchmark: 500 Delivery accounts, 50 of them broken in mixed ways (20 never answer,
15 answer 500, 15 break their body half way), against the release binaries on loopback.

Reports, for every scrape over the measured window, how many of the 450 healthy accounts had
success 1 and values, and how many calls each broken account cost per circuit-breaker cool-down.
Everything it starts is stopped at the end; every wait is bounded.

    python3 bench/isolation.py [--interval 5] [--cooldown 60] [--window 130]

The window opens once every broken account's circuit is open (after the first runs, which are
reported on their own) and lasts --window seconds (default: two cool-downs and an interval).

Build first (`cargo build --release --bins`) or pass --build.
"""

import argparse
import json
import signal
import time

import harness as h
from harness import http, series

FIRST = h.FIRST_EXTRA
ACCOUNTS = 500
SILENT, FAILING, CUT = range(0, 20), range(20, 35), range(35, 50)  # offsets of broken ones


def spread(offsets):
    """Broken accounts spread over the fleet (every 10th), not bunched at one end."""
    return [FIRST + 10 * i for i in offsets]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=int, default=0, help="seconds; 0: 2 cool-downs + 1 interval")
    ap.add_argument("--interval", type=int, default=5, help="collector interval, seconds")
    ap.add_argument("--cooldown", type=int, default=60, help="circuit breaker cool-down, s")
    ap.add_argument("--binary", default=None,
                    help="the exporter binary to run (default: this tree's release build)")
    args = h.parse_args(ap)
    with h.Bench("mailhost-isolation-") as b:
        token = b.token
        sim = b.start_sim(ACCOUNTS, patience=120)
        for ids, spec in [
            (spread(SILENT), {"latency_ms": 3_600_000}),
            (spread(FAILING), {"error_rate": 1.0, "error_status": 500}),
            (spread(CUT), {"reset_mid_body": True}),
        ]:
            spec["only_ids"] = [str(i) for i in ids]
            b.fault("delivery_account_get", spec, "POST")
        broken = set(spread(SILENT)) | set(spread(FAILING)) | set(spread(CUT))
        healthy = [i for i in range(FIRST, FIRST + ACCOUNTS) if i not in broken]

        config = b.write("config.yml", h.delivery_config(
            sim, token_file=b.token_file(), timeout="1s", cooldown=f"{args.cooldown}s",
            interval=f"{args.interval}s", accounts=range(FIRST, FIRST + ACCOUNTS)))
        server = b.start_exporter(config, patience=30, binary=args.binary)
        exporter, exp_log = server.url, server.log

        def healthy_ok(body):
            ok = series(body, "mailhost_target_success")
            values = series(body, "mailhost_delivery_remaining_messages")
            return sum(
                1 for i in healthy
                if ok.get(f'mailhost_target_success{{collector="delivery_account",target="{i}"}}') == 1.0
                and f'mailhost_delivery_remaining_messages{{account_id="{i}"}}' in values)

        def healthy_reasons(body):
            """reason -> healthy accounts failing with it in this scrape."""
            reasons = {}
            healthy_set = set(healthy)
            for key in series(body, "mailhost_target_failure_info"):
                labels = dict(part.split("=", 1) for part in key[key.index("{") + 1:-1].split(","))
                target = int(labels.get("target", '"0"').strip('"'))
                if target in healthy_set:
                    reason = labels.get("reason", '""').strip('"')
                    reasons[reason] = reasons.get(reason, 0) + 1
            return reasons

        # The first run: broken accounts are interleaved with healthy ones and nothing is known
        # of them yet.
        deadline = time.time() + 60
        while time.time() < deadline:
            body = http("GET", f"{exporter}/metrics")
            if 'mailhost_collector_success{collector="delivery_account"}' in body:
                break
            time.sleep(0.2)
        first = healthy_ok(body)
        warm = [first]
        deadline = time.time() + 300
        while time.time() < deadline:
            body = http("GET", f"{exporter}/metrics")
            warm.append(healthy_ok(body))
            if series(body, "mailhost_api_open_circuits").get(
                    'mailhost_api_open_circuits{endpoint="delivery_account"}') == len(broken):
                break
            time.sleep(1)
        warm_up = len(warm)
        hits0 = json.loads(http("GET", f"{sim}/_sim/hits", token))["hits"]
        start = time.time()
        samples = []
        worst = None
        span = args.window or 2 * args.cooldown + args.interval
        while time.time() - start < span:
            body = http("GET", f"{exporter}/metrics")
            samples.append(healthy_ok(body))
            if worst is None or samples[-1] < worst[0]:
                worst = (samples[-1], time.time() - start, healthy_reasons(body))
            time.sleep(1)
        window = time.time() - start
        hits1 = json.loads(http("GET", f"{sim}/_sim/hits", token))["hits"]
        open_circuits = series(body, "mailhost_api_open_circuits")
        rss = {}
        with open(f"/proc/{server.pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM", "VmRSS")):
                    k, v = line.split(":")
                    rss[k] = v.strip()

        def calls(ids):
            c = [hits1.get(f"/api/delivery/accounts/{i}", 0) - hits0.get(f"/api/delivery/accounts/{i}", 0)
                 for i in ids]
            return min(c), max(c)

        print(f"accounts: {ACCOUNTS} ({len(healthy)} healthy, {len(broken)} broken: "
              f"20 never answer, 15 answer 500, 15 cut their body short)")
        print(f"interval {args.interval}s, api.timeout 1s, cool-down {args.cooldown}s, "
              f"window {window:.0f}s ({window / args.interval:.0f} intervals), {len(samples)} scrapes")
        print(f"healthy with success 1 and values after the first run: {first}/{len(healthy)}")
        print(f"until every broken circuit was open ({warm_up} scrapes, one a second): healthy "
              f"with success 1 and values min {min(warm)}, max {max(warm)}")
        print(f"healthy with success 1 and values in every scrape of the window: "
              f"min {min(samples)}, max {max(samples)} of {len(healthy)}")
        print(f"the worst scrape of the window, {worst[1]:.0f}s in: healthy accounts failing "
              f"by reason {worst[2]}")
        hmin, hmax = calls(healthy)
        print(f"HTTP requests per healthy account in the window: {hmin} to {hmax}")
        for name, ids in [("never answer", spread(SILENT)), ("500", spread(FAILING)),
                          ("cut short", spread(CUT))]:
            lo, hi = calls(ids)
            print(f"HTTP requests per broken account ({name}) in the window: {lo} to {hi} "
                  f"(window / cool-down = {window / args.cooldown:.2f})")
        print(f"open circuits at the end: {open_circuits}")
        print(f"exporter memory: {rss}")

        # 50 SIGHUPs within one second, the config unchanged: the collector must keep its
        # schedule, so each account is called about once per interval, as without them.
        span = 3 * args.interval
        hits2 = json.loads(http("GET", f"{sim}/_sim/hits", token))["hits"]
        t0 = time.time()
        for _ in range(50):
            server.proc.send_signal(signal.SIGHUP)
            time.sleep(0.02)
        burst = time.time() - t0
        time.sleep(max(0.0, span - burst))
        hits3 = json.loads(http("GET", f"{sim}/_sim/hits", token))["hits"]
        per = [hits3.get(f"/api/delivery/accounts/{i}", 0) - hits2.get(f"/api/delivery/accounts/{i}", 0)
               for i in healthy]
        with open(exp_log) as f:
            reloads = sum(1 for line in f if "configuration reloaded" in line)
        print(f"50 SIGHUPs in {burst:.2f}s: {reloads} reloads done; HTTP requests per healthy account "
              f"over the {span}s around them: {min(per)} to {max(per)} "
              f"(the schedule alone gives {span / args.interval:.0f} or {span / args.interval + 1:.0f})")


if __name__ == "__main__":
    h.main(main)
