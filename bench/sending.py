"""Simulated weeks of Delivery sending for the alert backtest (`alerts.py`): accounts of several
kinds, each with a plan, a monthly renewal on its own day and hour, a time zone, and the
provider's accounting (the plan spent first, then bought extras; a send refused once nothing is
left), sampled every `STEP` seconds under the exporter's metric names.

The kinds are the senders a reseller meets (docs/mixin.md, "The backtest"):

- `business`: weekdays in office hours, light weekends, 40 % to 140 % of the plan a month; a
  third of those past their plan upgrade it (a larger limit, mid-period) when 15 % is left.
- `campaigns`: a low base and irregular campaigns (about three a month, on weekdays at 10:00),
  each sending 15 % to 35 % of the plan within one hour.
- `just_under`: weekday senders that end every period at 95 % to 98.5 % of their plan.
- `steady_over`: round-the-clock senders at 120 % to 180 % of their plan; half buy extra
  messages (half a plan, valid 90 days) when 5 % is left.
- `growing`: weekday senders whose daily volume grows 1.5 % to 2.5 % a day.
- `weekly_campaign`: a weekday base and one campaign a week, same weekday and hour, that tips
  the period over its plan (105 % to 130 %).
- `one_big`: a quiet weekday base and one big campaign per period (75 % to 95 % in all).

Every draw comes from one seeded generator: the same arguments give the same traces.
Standard library only.
"""

import calendar
import datetime
import math
import random

STEP = 300  # seconds between two samples (and between two rule evaluations)
STEPS_PER_HOUR = 3600 // STEP
# A Monday at midnight UTC: the traces start here, whatever today is.
START = datetime.datetime(2025, 3, 3, tzinfo=datetime.timezone.utc)
KINDS = ["business", "campaigns", "just_under", "steady_over", "growing", "weekly_campaign",
         "one_big"]
# The outcomes of the mail-tracing statistics, as the exporter labels them.
OUTCOMES = ["delivered", "bounced", "deferred", "rejected", "complaint"]
EXTRA_VALIDITY = 90 * 86400
# The exporter's series of an account, in the order of a sample's values (`Account.samples`);
# the last is absent (None) while no bought extras are valid.
QUOTA = ["mailhost_delivery_plan_messages_limit", "mailhost_delivery_plan_messages_used",
         "mailhost_delivery_remaining_messages", "mailhost_delivery_remaining_extra_messages",
         "mailhost_delivery_extra_messages", "mailhost_delivery_messages_sent",
         "mailhost_delivery_next_renewal_timestamp_seconds",
         "mailhost_delivery_last_renewal_timestamp_seconds",
         "mailhost_delivery_plan_expiration_timestamp_seconds",
         "mailhost_delivery_extra_messages_expiration_timestamp_seconds"]


def add_month(t, day, hour):
    """The renewal after `t`: the next month's `day` (clamped to its length) at `hour` UTC."""
    y, m = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    d = min(day, calendar.monthrange(y, m)[1])
    return datetime.datetime(y, m, d, hour, tzinfo=datetime.timezone.utc)


def renewals(first, day, hour, until):
    """Renewal instants (Unix seconds) from the one at or before `first` to the first after
    `until`."""
    d = min(day, calendar.monthrange(first.year, first.month)[1])
    t = datetime.datetime(first.year, first.month, d, hour, tzinfo=datetime.timezone.utc)
    if t > first:
        y, m = (t.year - 1, 12) if t.month == 1 else (t.year, t.month - 1)
        t = datetime.datetime(y, m, min(day, calendar.monthrange(y, m)[1]), hour,
                              tzinfo=datetime.timezone.utc)
    out = [t]
    while out[-1] <= until:
        out.append(add_month(out[-1], day, hour))
    return [int(x.timestamp()) for x in out]


def clock(t, tz):
    """(hour, weekday) at Unix time `t` in a zone `tz` hours from UTC; Monday is 0."""
    local = t + tz * 3600
    return (local // 3600) % 24, (local // 86400 + 3) % 7


def weekday_shape(local_hour, local_weekday, weekend=0.1):
    """Relative volume in one local hour of a weekday sender (office hours, light weekends)."""
    day = weekend if local_weekday >= 5 else 1.0
    hour = 1.0 if 8 <= local_hour < 18 else (0.25 if 6 <= local_hour < 22 else 0.05)
    return day * hour


def steady_shape(local_hour, local_weekday):
    """Relative volume of a round-the-clock sender: a mild daily swing."""
    return 1.0 + 0.3 * math.sin((local_hour - 9) / 24 * 2 * math.pi)


class Account:
    """One simulated account: its settings, then (after `run`) its samples and events."""

    def __init__(self, account_id, kind, rng, start, end):
        self.id = account_id
        self.kind = kind
        self.start, self.end = start, end
        self.limit = rng.choice([5_000, 10_000, 20_000, 50_000, 100_000, 250_000])
        self.tz = rng.choice([-7, -5, 0, 1, 2, 8])  # hours from UTC
        self.renew_day = rng.randint(1, 31)
        self.renew_hour = rng.randint(0, 23)
        self.renewals = renewals(datetime.datetime.fromtimestamp(start, datetime.timezone.utc),
                                 self.renew_day, self.renew_hour,
                                 datetime.datetime.fromtimestamp(end, datetime.timezone.utc))
        self.plan_expiration = end + 365 * 86400
        self.upgrade_at = None  # share of the plan left at which the plan is doubled
        self.buy_at = None  # share left at which half a plan of extras is bought
        # Outcome rates: most accounts well inside the alerts' thresholds, some near or past.
        self.bounce = rng.uniform(0.005, 0.06)
        self.complaint = rng.uniform(0.0001, 0.0015)
        self.reject = rng.uniform(0.002, 0.06)
        self.campaign_bounce = self.bounce * rng.uniform(1.0, 2.0)
        weekday = rng.randint(1, 3)  # campaigns go out on Tuesday to Thursday
        if kind == "business":
            self.monthly = rng.uniform(0.4, 1.4)
            if self.monthly > 1.0 and rng.random() < 0.34:
                self.upgrade_at = 0.15
        elif kind == "campaigns":
            self.monthly = rng.uniform(0.05, 0.15)
            self.campaign_rate = 3 / 21.7  # per weekday
            self.campaign_size = (0.15, 0.35)
        elif kind == "just_under":
            self.monthly = rng.uniform(0.95, 0.985)
        elif kind == "steady_over":
            self.monthly = rng.uniform(1.2, 1.8)
            if rng.random() < 0.5:
                self.buy_at = 0.05
        elif kind == "growing":
            self.monthly = rng.uniform(0.3, 0.5)
            self.growth = rng.uniform(0.015, 0.025)
        elif kind == "weekly_campaign":
            self.monthly = rng.uniform(0.3, 0.5)
            self.campaign_weekday = weekday
            self.campaign_size = (rng.uniform(1.05, 1.3) - self.monthly) / 4.35
        elif kind == "one_big":
            self.monthly = rng.uniform(0.3, 0.6)
            self.campaign_size = rng.uniform(0.75, 0.95) - self.monthly
        self.seed = rng.randrange(1 << 30)

    def demand(self):
        """Messages the account wants to send in each hour from `start` to `end`."""
        rng = random.Random(self.seed)
        hours = (self.end - self.start) // 3600
        shape_of = steady_shape if self.kind == "steady_over" else weekday_shape
        # One week of the shape, to turn a monthly share into an hourly volume.
        week = sum(shape_of(h % 24, h // 24) for h in range(168))
        per_unit = self.limit * 7 / 30.44 / week  # messages per unit of shape at 100 %/month
        out = []
        day_factor = 1.0
        for h in range(hours):
            t = self.start + h * 3600
            local_hour, local_weekday = clock(t, self.tz)
            if local_hour == 0 or h == 0:
                day_factor = math.exp(rng.gauss(0, 0.2) - 0.02)
            hour_factor = math.exp(rng.gauss(0, 0.25) - 0.03)
            level = self.monthly
            if self.kind == "growing":
                level *= math.exp(self.growth * h / 24)
            v = level * per_unit * shape_of(local_hour, local_weekday) * day_factor * hour_factor
            if local_hour == 10 and local_weekday < 5:
                if self.kind == "campaigns" and local_weekday in (1, 2, 3) \
                        and rng.random() < self.campaign_rate * 5 / 3:
                    v += rng.uniform(*self.campaign_size) * self.limit
                if self.kind == "weekly_campaign" and local_weekday == self.campaign_weekday:
                    v += self.campaign_size * self.limit * rng.uniform(0.9, 1.1)
            out.append(v)
        if self.kind == "one_big":
            # One campaign per period, on a weekday at 10:00 local, not in the last three days.
            for a, b in zip(self.renewals, self.renewals[1:]):
                choices = [h for h in range(max(0, (a - self.start) // 3600),
                                            min(hours, (b - self.start) // 3600 - 72))
                           if clock(self.start + h * 3600, self.tz)[0] == 10
                           and clock(self.start + h * 3600, self.tz)[1] < 5]
                if choices:
                    out[rng.choice(choices)] += self.campaign_size * self.limit
        if self.kind == "just_under":
            # Each period ends at exactly its share of the plan.
            for a, b in zip(self.renewals, self.renewals[1:]):
                lo, hi = max(0, (a - self.start) // 3600), min(hours, (b - self.start) // 3600)
                if hi <= lo:
                    continue
                share = (hi - lo) * 3600 / (b - a)  # the part of the period simulated
                total = sum(out[lo:hi])
                if total > 0:
                    scale = self.monthly * self.limit * share / total
                    for i in range(lo, hi):
                        out[i] *= scale
        return out

    def run(self):
        """Sends the demand through the provider's accounting; fills `samples` (one
        value per series of `QUOTA`, a tuple per step), `daily` (per step: today's count of each outcome
        of `OUTCOMES`, then each running counter), `periods`, `exhaustions` and `rescues`."""
        rng = random.Random(self.seed ^ 0x5EED)
        demand = self.demand()
        limit = self.limit
        used = 0
        extras = 0
        extra_total = 0
        extras_expire = None
        sent_total = 0
        boundaries = self.renewals
        period = max(i for i, r in enumerate(boundaries) if r <= self.start)
        # Messages of the period before the traces start, as if the account had sent at its
        # pace since the last renewal (without campaigns): the first period is not empty.
        elapsed = (self.start - boundaries[period]) / (boundaries[period + 1] - boundaries[period])
        used = int(min(limit, self.monthly * limit * elapsed))
        today = dict.fromkeys(OUTCOMES, 0)
        counter = dict.fromkeys(OUTCOMES, 0)
        local_day = None
        carry = 0.0
        self.samples = []
        self.daily = []
        self.exhaustions = []  # (period index, instant)
        self.rescues = []  # (period index, instant, what)
        self.periods = [(boundaries[i], boundaries[i + 1]) for i in range(len(boundaries) - 1)]
        exhausted = False
        steps = (self.end - self.start) // STEP
        for s in range(steps):
            t = self.start + (s + 1) * STEP  # a sample at the end of its step
            if t >= boundaries[period + 1]:
                period += 1
                used = 0
                exhausted = False
            if extras_expire is not None and t >= extras_expire:
                extras, extras_expire = 0, None
            want = demand[s // STEPS_PER_HOUR] / STEPS_PER_HOUR + carry
            n = int(want)
            carry = want - n
            left = max(0, limit - used) + extras
            if self.upgrade_at is not None and left < self.upgrade_at * limit \
                    and limit == self.limit:
                limit *= 2
                self.rescues.append((period, t, "plan doubled"))
                left = max(0, limit - used) + extras
            if self.buy_at is not None and left < self.buy_at * limit:
                extras += limit // 2
                extra_total += limit // 2
                extras_expire = t + EXTRA_VALIDITY
                self.rescues.append((period, t, "extras bought"))
                left = max(0, limit - used) + extras
            if n >= left and not exhausted and n > 0:
                exhausted = True
                self.exhaustions.append((period, t))
            n = min(n, left)
            from_plan = min(n, max(0, limit - used))
            used += from_plan
            extras -= n - from_plan
            sent_total += n
            day = (t - 1 + self.tz * 3600) // 86400
            if day != local_day:
                local_day = day
                today = dict.fromkeys(OUTCOMES, 0)
            campaign = demand[s // STEPS_PER_HOUR] > 3 * self.monthly * limit / 30.44 / 10
            split = self.split(n, rng, self.campaign_bounce if campaign else self.bounce)
            for k in OUTCOMES:
                today[k] += split[k]
                counter[k] += split[k]
            self.samples.append((limit, used, max(0, limit - used) + extras, extras, extra_total,
                                 sent_total, boundaries[period + 1], boundaries[period],
                                 self.plan_expiration, extras_expire))
            self.daily.append(tuple(today[k] for k in OUTCOMES) + tuple(counter[k] for k in OUTCOMES))

    def split(self, n, rng, bounce):
        """`n` messages split among the outcomes, each share drawn around its rate."""
        out = {}
        rest = n
        for k, p in (("bounced", bounce), ("complaint", self.complaint),
                     ("rejected", self.reject), ("deferred", 0.01)):
            mean = n * p
            x = int(round(mean + rng.gauss(0, 1) * math.sqrt(mean * (1 - p)))) if mean > 0 else 0
            x = max(0, min(rest, x))
            out[k] = x
            rest -= x
        out["delivered"] = rest
        return out


def fleet(per_kind, days, warmup_days, seed=49):
    """`per_kind` accounts of each kind (ids 1001 on), simulated over `warmup_days` of history
    and `days` judged after it. Returns (accounts, first judged instant, end)."""
    rng = random.Random(seed)
    start = int(START.timestamp())
    judged = start + warmup_days * 86400
    end = judged + days * 86400
    accounts = []
    for k, kind in enumerate(KINDS):
        for i in range(per_kind):
            a = Account(1001 + k * per_kind + i, kind, rng, start, end)
            a.run()
            accounts.append(a)
    return accounts, judged, end
