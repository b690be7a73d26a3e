#!/usr/bin/env python3
"""The backtest of the shipped alert and recording rules: weeks of simulated Delivery sending
(`sending.py`: accounts of seven kinds, monthly renewals on any day) loaded into a real TSDB
(VictoriaMetrics) under the exporter's metric names, `prometheus/rules.yml` and
`prometheus/alerts.yml` evaluated over them every 5 minutes by a real rule engine
(`vmalert -replay`), and the alerts judged against what happened:

- MailhostDeliveryQuotaExhaustionPredicted: for each exhaustion (a send refused because nothing
  was left), the lead time of its first warning in the billing period, the share warned at
  least 72 h ahead, the warning spells in the 10 days before it, and the warnings on periods
  that never ran out (per 100 account-months; periods rescued by bought extras or a larger plan
  are counted apart);
- MailhostDeliveryQuotaLow and Critical: spells per period that crosses the threshold;
- the sending-health alerts (bounce, complaint and rejection ratios, sending spike): spells per
  100 account-days, how many began in the first local hour after midnight's reset of the daily
  figures, and how many came back within 6 hours of resolving (flapping).

The rule files are the shipped ones with two things taken out, since Debian's vmalert (1.79)
knows neither: `keep_firing_for` (applied here to the spells instead) and the annotations (whose
`query` templates a replay refuses). The rules are replayed one layer of the chain at a time, and
each layer's output is flushed and searchable before the next reads it.

    python3 bench/alerts.py [--per-kind 20] [--days 40] [--warmup 28] [--seed 49] [--check]

`--check` exits 1 when a figure misses its floor (FLOORS below). Everything listens on 127.0.0.1 and is stopped at the end; every wait is
bounded. Needs `victoria-metrics` and `vmalert` (Debian: apt-get install victoria-metrics).
"""

import argparse
import datetime
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import harness as h
import sending

ROOT = h.ROOT
EVAL = "5m"
# The floors `--check` holds a run to: issue 49's goals. The one exception is the warnings on
# periods that did not run out: its goal is 1 per 100 account-months, which a run of the
# end-to-end tier (5 accounts of each kind, about 14 account-months judged) cannot resolve, one
# warning being worth 7; there the floor is one warning.
FLOORS = {
    "warned_72h_share": 0.90,  # at least
    "median_lead_days": 5.0,  # at least
    "false_per_100_account_months": 8.0,  # at most
    "spells_per_exhaustion": 1.2,  # at most
    "quota_low_spells_per_period": 1.2,  # at most
}
KEEP_DEFAULT = 0
DAY = 86400


# --- Rule files ----------------------------------------------------------------------------

RULE_START = re.compile(r"^      - (record|alert): (\S+)")
GROUP_START = re.compile(r"^  - name: (\S+)")
NAMES = re.compile(r"\b(mailhost(?:_account)?:[A-Za-z0-9_:]+)")


def parse_rules(path):
    """The rules of a rule file as written by mixin/render.jsonnet: a list of dicts with the
    group, its interval, the kind, the name, the text to replay (no keep_firing_for, no
    annotations), the records it reads, and its keep_firing_for in seconds."""
    rules = []
    group, interval = None, None
    current = None
    skipping = False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            m = GROUP_START.match(line)
            if m:
                group, interval, current = m.group(1), None, None
                continue
            if line.startswith("    interval: "):
                interval = line.split(": ", 1)[1]
                continue
            m = RULE_START.match(line)
            if m:
                current = {"group": group, "interval": interval, "kind": m.group(1),
                           "name": m.group(2), "lines": [line], "keep": KEEP_DEFAULT, "expr": ""}
                rules.append(current)
                skipping = False
                continue
            if current is None or not line.startswith("        "):
                continue
            if line.startswith("        ") and not line.startswith("          "):
                key = line.strip().split(":", 1)[0]
                skipping = key in ("keep_firing_for", "annotations")
                if key == "keep_firing_for":
                    current["keep"] = seconds(line.split(": ", 1)[1])
            if not skipping:
                current["lines"].append(line)
                if not line.strip().startswith(("for:", "labels:")):
                    current["expr"] += line + "\n"
    for r in rules:
        reads = set(NAMES.findall(r["expr"])) - {r["name"]}
        r["reads"] = reads
    return rules


def seconds(duration):
    """Seconds of a Prometheus duration such as 12h, 6h30m or 10m."""
    units = {"s": 1, "m": 60, "h": 3600, "d": DAY, "w": 7 * DAY}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhdw])", duration))


def layers(rules):
    """The rules in the order a replay needs them: each layer reads only records of earlier
    layers (or none)."""
    recorded = {r["name"] for r in rules if r["kind"] == "record"}
    depth = {}
    pending = list(rules)
    for _ in range(len(rules) + 1):
        left = []
        for r in pending:
            needs = [x for x in r["reads"] if x in recorded]
            if all(x in depth for x in needs):
                depth[r["name"] + r["kind"]] = 1 + max((depth[x] for x in needs), default=-1)
                if r["kind"] == "record":
                    depth[r["name"]] = depth[r["name"] + r["kind"]]
            else:
                left.append(r)
        pending = left
        if not pending:
            break
    if pending:
        h.die(f"rules read records that no rule writes, or each other: {[r['name'] for r in pending]}")
    out = {}
    for r in rules:
        out.setdefault(depth[r["name"] + r["kind"]], []).append(r)
    return [out[k] for k in sorted(out)]


def rule_file(rules):
    """A rule file of these rules, in groups as they were (with their intervals)."""
    text = "groups:\n"
    groups = {}
    for r in rules:
        groups.setdefault((r["group"], r["interval"]), []).append(r)
    for (group, interval), rs in groups.items():
        text += f"  - name: {group}\n"
        if interval:
            text += f"    interval: {interval}\n"
        text += "    rules:\n" + "".join("\n".join(r["lines"]) + "\n" for r in rs)
    return text


# --- The TSDB --------------------------------------------------------------------------------

def start_vm(b):
    port = h.free_port()
    url = f"http://127.0.0.1:{port}"
    log = b.path("victoria-metrics.log")
    proc = b.spawn(["victoria-metrics", "-storageDataPath", b.dir("vm"),
                    "-httpListenAddr", f"127.0.0.1:{port}", "-retentionPeriod", "100y",
                    "-search.disableCache", "-search.latencyOffset", "0s",
                    "-search.maxStalenessInterval", "10m", "-search.maxQueryDuration", "15m",
                    # A replay writes a layer's weeks of samples in few requests: far above
                    # the default 32 MB a request.
                    "-maxInsertRequestSize", "2000000000",
                    "-loggerLevel", "WARN"], log)
    h.wait_until("victoria-metrics /health", lambda: h.status(url + "/health") == 200, 30,
                 proc=proc, log=log)
    return url


def post(url, body):
    data = gzip.compress(body.encode(), compresslevel=1)
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=300) as r:
        r.read()


def load(vm, accounts):
    """Every account's series into the TSDB as CSV: the quota series, the daily outcomes."""
    labels = "&extra_label=job=mailhost&extra_label=instance=backtest:9000"
    quota = sending.QUOTA[:-1]
    fmt = "1:time:unix_s,2:label:account_id," + ",".join(
        f"{i + 3}:metric:{m}" for i, m in enumerate(quota))
    n = len(sending.OUTCOMES)
    daily_fmt = "1:time:unix_s,2:label:account_id,3:label:status," \
        "4:metric:mailhost_delivery_current_day_messages,5:metric:mailhost_delivery_messages_total"
    expiry_fmt = "1:time:unix_s,2:label:account_id,3:metric:" + sending.QUOTA[-1]
    points = 0
    for a in accounts:
        rows, daily, expiry = [], [], []
        for s, sample in enumerate(a.samples):
            t = a.start + (s + 1) * sending.STEP
            rows.append(f"{t},{a.id}," + ",".join(str(v) for v in sample[:-1]))
            if sample[-1] is not None:
                expiry.append(f"{t},{a.id},{sample[-1]}")
            d = a.daily[s]
            for k, outcome in enumerate(sending.OUTCOMES):
                daily.append(f"{t},{a.id},{outcome},{d[k]},{d[n + k]}")
        post(f"{vm}/api/v1/import/csv?format={fmt}{labels}", "\n".join(rows) + "\n")
        post(f"{vm}/api/v1/import/csv?format={daily_fmt}{labels}", "\n".join(daily) + "\n")
        if expiry:
            post(f"{vm}/api/v1/import/csv?format={expiry_fmt}{labels}", "\n".join(expiry) + "\n")
        points += len(rows) * len(quota) + len(daily) * 2 + len(expiry)
    flush(vm)
    return points


def flush(vm):
    """Makes what was written searchable now (VictoriaMetrics' /internal/force_flush)."""
    h.get(vm + "/internal/force_flush", timeout=60)


def query(vm, path, **params):
    url = f"{vm}{path}?" + urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read().decode()


def searchable(vm, names, start, end):
    """How many series of these recorded names the TSDB finds in [start, end]."""
    if not names:
        return 0
    body = query(vm, "/api/v1/series", **{"match[]": "{__name__=~\"%s\"}" % "|".join(names),
                                         "start": start, "end": end})
    return len(json.loads(body)["data"])


def replay(b, vm, layer, i, start, end):
    """One layer of rules replayed over [start, end], its output flushed and searchable."""
    path = b.write(f"rules/layer{i:02d}.yml", rule_file(layer))
    log = b.path(f"vmalert-{i:02d}.log")
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    cmd = ["vmalert", "-rule", path, "-datasource.url", vm, "-remoteWrite.url", vm,
           "-replay.timeFrom", datetime.datetime.fromtimestamp(start, datetime.timezone.utc).strftime(fmt),
           "-replay.timeTo", datetime.datetime.fromtimestamp(end, datetime.timezone.utc).strftime(fmt),
           "-evaluationInterval", EVAL, "-replay.disableProgressBar",
           # Each group is queried at its own interval (the forecast group's hour), as a
           # Prometheus evaluates it, not at the default 5m step.
           "-datasource.queryStep", "0s",
           "-replay.maxDatapointsPerQuery", "2000", "-replay.rulesDelay", "0s",
           "-remoteWrite.flushInterval", "1s", "-remoteWrite.maxQueueSize", "20000000",
           "-loggerLevel", "WARN",
           "-httpListenAddr", f"127.0.0.1:{h.free_port()}"]
    with open(log, "wb") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=3600)
    if done.returncode != 0:
        h.die(f"vmalert -replay failed (status {done.returncode}); see {log}")
    # A write the TSDB refused is retried, then dropped with only a log line: a backtest on
    # partial output would judge rules that never ran.
    with open(log, errors="replace") as f:
        dropped = [line.strip() for line in f if "dropping" in line or "failed to push" in line]
    if dropped:
        h.die(f"vmalert -replay lost recorded samples ({dropped[0]}); see {log}")
    flush(vm)
    records = [r["name"] for r in layer if r["kind"] == "record"]
    # The replay has written and flushed; the series are searchable once they are indexed: the
    # count must hold for three looks a second apart (a layer may rightly record none).
    seen = [-1, 0]

    def settled():
        n = searchable(vm, records, start, end)
        seen[1] = seen[1] + 1 if n == seen[0] else 0
        seen[0] = n
        return seen[1] >= 2

    h.wait_until(f"layer {i} searchable", settled, 60, every=1.0)
    return seen[0]


def firing(vm, start, end):
    """Each firing alert's spells, by (alertname, account_id): [(first, last)] as evaluated (before
    keep_firing_for), from the ALERTS series the replay wrote."""
    body = query(vm, "/api/v1/export", **{"match[]": '{__name__="ALERTS",alertstate="firing"}',
                                          "start": start, "end": end})
    out = {}
    gap = seconds(EVAL) + 1
    for line in body.splitlines():
        s = json.loads(line)
        key = (s["metric"]["alertname"], s["metric"].get("account_id", ""))
        ts = sorted(t // 1000 for t in s["timestamps"])
        spells = out.setdefault(key, [])
        for t in ts:
            if spells and t - spells[-1][1] <= gap:
                spells[-1][1] = t
            else:
                spells.append([t, t])
    for key in out:
        out[key].sort()
    return out


def kept(spells, keep, interval):
    """Spells as keep_firing_for makes them: one that resolves and comes back within `keep`
    goes on, and each ends `keep` after its last firing evaluation."""
    out = []
    for first, last in spells:
        if out and first - out[-1][1] <= keep + interval:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return [(a, b + keep) for a, b in out]


# --- Judging ---------------------------------------------------------------------------------

def period_of(account, t):
    for i, (a, b) in enumerate(account.periods):
        if a <= t < b:
            return i
    return None


def judge(accounts, spells_by, keeps, judged, end):
    """The figures per kind and in all; see the module's doc."""
    # A period the traces end in is undecided (it may yet run out): warnings in it are not
    # judged, and the account-months count only the decided periods' days.
    def decided_months(acc):
        return sum(max(0, b - max(a, judged)) for a, b in acc.periods if b <= end) / DAY / 30.44

    months = sum(decided_months(acc) for acc in accounts)
    days = len(accounts) * (end - judged) / DAY
    interval = seconds(EVAL)
    kinds = {k: {"accounts": 0, "exhaustions": 0, "warned": 0, "warned_72h": 0, "leads": [],
                 "spells10": [], "false": 0, "rescued_warned": 0, "rescued": 0,
                 "low_periods": 0, "low_spells": 0, "critical_spells": 0, "months": 0.0}
             for k in sending.KINDS}
    health = {}
    for a in accounts:
        r = kinds[a.kind]
        r["accounts"] += 1
        r["months"] += decided_months(a)

        def spells(alert):
            return kept(spells_by.get((alert, str(a.id)), []), keeps.get(alert, 0), interval)

        predicted = spells("MailhostDeliveryQuotaExhaustionPredicted")
        exhausted = {}
        for p, te in a.exhaustions:
            exhausted.setdefault(p, te)
        rescued = {p for p, _, _ in a.rescues}
        for p, te in exhausted.items():
            if te < judged:
                continue
            r["exhaustions"] += 1
            lo = a.periods[p][0]
            before = [s for s in predicted if lo <= s[0] <= te or s[0] < lo <= s[1]]
            lead = (te - max(lo, before[0][0])) if before else 0
            r["leads"].append(lead / DAY)
            r["warned"] += bool(before)
            r["warned_72h"] += lead >= 72 * 3600
            r["spells10"].append(len([s for s in predicted if s[1] >= te - 10 * DAY and s[0] <= te]))
        for s in predicted:
            if not judged <= s[0] < end:
                continue
            p = period_of(a, s[0])
            if p in exhausted or a.periods[p][1] > end:
                continue
            if p in rescued:
                r["rescued_warned"] += 1
            else:
                r["false"] += 1
        r["rescued"] += len([p for p in rescued if a.periods[p][1] > judged])
        # QuotaLow: periods whose share left crosses 10 % in the judged window.
        crossing = set()
        for s, sample in enumerate(a.samples):
            t = a.start + (s + 1) * sending.STEP
            if t >= judged and sample[0] > 0 and sample[2] / sample[0] < 0.10:
                crossing.add(period_of(a, t))
        r["low_periods"] += len(crossing)
        r["low_spells"] += len([s for s in spells("MailhostDeliveryQuotaLow") if s[0] >= judged])
        r["critical_spells"] += len([s for s in spells("MailhostDeliveryQuotaCritical")
                                     if s[0] >= judged])
        for alert in ("MailhostDeliveryBounceRatioHigh", "MailhostDeliveryBounceRatioCritical",
                      "MailhostDeliveryComplaintRatioHigh", "MailhostDeliveryComplaintRatioCritical",
                      "MailhostDeliveryRejectionRatioHigh", "MailhostDeliverySendingSpike"):
            x = health.setdefault(alert, {"spells": 0, "after_midnight": 0, "back_within_6h": 0,
                                          "accounts": set()})
            ss = [s for s in spells(alert) if judged <= s[0] < end]
            x["spells"] += len(ss)
            if ss:
                x["accounts"].add(a.id)
            for i, (first, last) in enumerate(ss):
                if sending.clock(first, a.tz)[0] == 0:
                    x["after_midnight"] += 1
                if i and first - ss[i - 1][1] <= 6 * 3600:
                    x["back_within_6h"] += 1
    return kinds, health, months, days


def explain(vm, accounts, spells_by, keeps, judged, end):
    """Each warning of MailhostDeliveryQuotaExhaustionPredicted on a period that did not run out,
    one line on stderr: the account, its kind, where the period ended (share of the plan used),
    and at the spell's first evaluation the forecast's inputs as the rules recorded them."""
    alert = "MailhostDeliveryQuotaExhaustionPredicted"
    for a in accounts:
        spells = kept(spells_by.get((alert, str(a.id)), []), keeps.get(alert, 0), seconds(EVAL))
        first_of = {}
        for p, te in a.exhaustions:
            first_of.setdefault(p, te)
        for p, te in first_of.items():
            if te < judged:
                continue
            lo, hi = a.periods[p]
            before = [sp for sp in spells if lo <= sp[0] <= te or sp[0] < lo <= sp[1]]
            lead = (te - max(lo, before[0][0])) / DAY if before else None
            if lead is None or lead < 3:
                print(f"  late: {a.id} {a.kind} ran out {(hi - te) / DAY:.1f} d before its reset"
                      f" (day {(te - lo) / DAY:.1f} of {(hi - lo) / DAY:.1f}); "
                      + (f"warned {lead:.1f} d ahead" if before else "not warned"),
                      file=sys.stderr)
    names = ["mailhost:delivery_messages_sent:pace", "mailhost:delivery_quota_available:messages",
             "mailhost:delivery_quota_exhaustion:timestamp_seconds",
             "mailhost:delivery_quota_reset:timestamp_seconds"]
    for a in accounts:
        exhausted = {p for p, _ in a.exhaustions}
        rescued = {p for p, _, _ in a.rescues}
        for first, last in kept(spells_by.get((alert, str(a.id)), []), keeps.get(alert, 0),
                                seconds(EVAL)):
            p = period_of(a, first)
            if not judged <= first < end or p in exhausted or p in rescued \
                    or a.periods[p][1] > end:
                continue
            lo, hi = a.periods[p]
            ends = [s for s in range(len(a.samples)) if a.start + (s + 1) * sending.STEP < hi]
            used = a.samples[ends[-1]][1] / a.samples[ends[-1]][0] if ends else float("nan")
            values = []
            for n in names:
                body = json.loads(query(vm, "/api/v1/query", query=f'{n}{{account_id="{a.id}"}}',
                                        time=first))
                r = body["data"]["result"]
                values.append(float(r[0]["value"][1]) if r else float("nan"))
            pace, avail, ex, reset = values
            print(f"  false: {a.id} {a.kind} ends at {used:.1%}; spell {(first - lo) / DAY:.1f}"
                  f"-{(last - lo) / DAY:.1f} d of {(hi - lo) / DAY:.1f}; pace "
                  f"{pace * DAY / a.limit:.3f} plans/day (period's "
                  f"{used / ((hi - lo) / DAY):.3f}); available {avail / a.limit:.3f}; runs out "
                  f"{(ex - first) / DAY:.1f} d, resets {(reset - first) / DAY:.1f} d",
                  file=sys.stderr)


def summary(kinds, months):
    ex = sum(r["exhaustions"] for r in kinds.values())
    leads = [x for r in kinds.values() for x in r["leads"]]
    spells10 = [x for r in kinds.values() for x in r["spells10"]]
    low_periods = sum(r["low_periods"] for r in kinds.values())
    return {
        "exhaustions": ex,
        "warned_72h_share": sum(r["warned_72h"] for r in kinds.values()) / ex if ex else 1.0,
        "median_lead_days": statistics.median(leads) if leads else 0.0,
        "false_per_100_account_months": 100 * sum(r["false"] for r in kinds.values()) / months,
        "spells_per_exhaustion": statistics.mean(spells10) if spells10 else 0.0,
        "quota_low_spells_per_period":
            sum(r["low_spells"] for r in kinds.values()) / low_periods if low_periods else 0.0,
    }


def report(kinds, health, months, days, total):
    print("MailhostDeliveryQuotaExhaustionPredicted and MailhostDeliveryQuotaLow, per kind of sender:")
    print()
    print("| kind | accounts | exhaustions | warned ≥ 72 h ahead | median lead | spells in the 10 days before | "
          "warnings on periods that did not run out, per 100 account-months | warnings on periods "
          "rescued (extras, larger plan) | QuotaLow spells per period crossing 10 % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, r in kinds.items():
        ex = r["exhaustions"]
        print(f"| {kind} | {r['accounts']} | {ex} | "
              + (f"{r['warned_72h']} ({100 * r['warned_72h'] / ex:.0f} %)" if ex else "-") + " | "
              + (f"{statistics.median(r['leads']):.1f} d" if ex else "-") + " | "
              + (f"{statistics.mean(r['spells10']):.2f}" if ex else "-") + " | "
              + f"{100 * r['false'] / r['months'] if r['months'] else 0:.1f} | "
              + f"{r['rescued_warned']} on {r['rescued']} | "
              + (f"{r['low_spells'] / r['low_periods']:.2f} ({r['low_periods']} periods)"
                 if r["low_periods"] else "-") + " |")
    print(f"| all | {sum(r['accounts'] for r in kinds.values())} | {total['exhaustions']} | "
          f"{100 * total['warned_72h_share']:.0f} % | {total['median_lead_days']:.1f} d | "
          f"{total['spells_per_exhaustion']:.2f} | {total['false_per_100_account_months']:.1f} | "
          f"{sum(r['rescued_warned'] for r in kinds.values())} on {sum(r['rescued'] for r in kinds.values())} | "
          f"{total['quota_low_spells_per_period']:.2f} |")
    print()
    crit = sum(r["critical_spells"] for r in kinds.values())
    print(f"MailhostDeliveryQuotaCritical: {crit} spells.")
    print()
    print("Sending health, over", f"{days:.0f} account-days:")
    print()
    print("| alert | spells per 100 account-days | accounts | began in the first local hour "
          "after midnight | came back within 6 h of resolving |")
    print("|---|---|---|---|---|")
    for alert, x in health.items():
        print(f"| {alert} | {100 * x['spells'] / days:.2f} | {len(x['accounts'])} | "
              f"{x['after_midnight']} | {x['back_within_6h']} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-kind", type=int, default=20, help="accounts of each kind")
    parser.add_argument("--days", type=int, default=40, help="days judged")
    parser.add_argument("--warmup", type=int, default=28,
                        help="days of history before the judged days")
    parser.add_argument("--seed", type=int, default=49)
    parser.add_argument("--check", action="store_true", help="exit 1 when a figure misses its floor")
    parser.add_argument("--explain", action="store_true",
                        help="list each exhaustion warned less than 72 h ahead, and each warning "
                             "on a period that did not run out with the forecast's inputs, on "
                             "stderr")
    parser.add_argument("--rules", default=os.path.join(ROOT, "prometheus", "rules.yml"))
    parser.add_argument("--alerts", default=os.path.join(ROOT, "prometheus", "alerts.yml"))
    args = parser.parse_args()
    h.need("victoria-metrics", "victoria-metrics")
    h.need("vmalert", "victoria-metrics")
    started = time.monotonic()
    with h.Bench("mailhost-alerts-") as b:
        accounts, judged, end = sending.fleet(args.per_kind, args.days, args.warmup, args.seed)
        h.note(f"simulated {len(accounts)} accounts over {args.warmup + args.days} days "
               f"({time.monotonic() - started:.0f} s)")
        vm = start_vm(b)
        points = load(vm, accounts)
        h.note(f"loaded {points} samples ({time.monotonic() - started:.0f} s)")
        rules = parse_rules(args.rules) + parse_rules(args.alerts)
        keeps = {r["name"]: r["keep"] for r in rules if r["kind"] == "alert"}
        start = accounts[0].start + 3600
        for i, layer in enumerate(layers(rules)):
            n = replay(b, vm, layer, i, start, end)
            h.note(f"layer {i}: {len(layer)} rules, {n} recorded series "
                   f"({time.monotonic() - started:.0f} s)")
        spells = firing(vm, start, end)
        kinds, health, months, days = judge(accounts, spells, keeps, judged, end)
        if args.explain:
            explain(vm, accounts, spells, keeps, judged, end)
        total = summary(kinds, months)
        print(f"Backtest: {len(accounts)} accounts, {args.days} days judged after {args.warmup} "
              f"days of history, seed {args.seed}, rules evaluated every {EVAL} "
              f"({time.monotonic() - started:.0f} s; {h.revision()}).")
        print()
        report(kinds, health, months, days, total)
        if args.check:
            missed = [f"{k}: {total[k]:.3g} (floor {v})" for k, v in FLOORS.items()
                      if (total[k] < v if k in ("warned_72h_share", "median_lead_days")
                          else total[k] > v)]
            if missed:
                print("\nbelow the floor: " + "; ".join(missed))
                sys.exit(1)
            print("\nevery figure within its floor")


if __name__ == "__main__":
    h.main(main)
