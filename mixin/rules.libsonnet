// Recording rules: the thresholds (global and per account) and the ratios the alerts and
// dashboards share.
local lib = import 'lib.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local s(metric, extra='') = lib.series(c, metric, extra),
    // The series whose labels an account's effective threshold takes: the one its alerts
    // compare, so the alerts join on every label without naming any.
    local thresholdBase = {
      quota_remaining_warning_ratio: 'mailhost:delivery_quota_remaining:ratio',
      quota_remaining_critical_ratio: 'mailhost:delivery_quota_remaining:ratio',
      quota_exhaustion_horizon_seconds: 'mailhost:delivery_quota_exhaustion:timestamp_seconds',
      quota_exhaustion_pace_margin_ratio: 'mailhost:delivery_quota_exhaustion:timestamp_seconds',
      quota_exhaustion_margin_seconds: 'mailhost:delivery_quota_exhaustion:timestamp_seconds',
      plan_expiry_seconds: s('mailhost_delivery_plan_expiration_timestamp_seconds'),
      bounce_ratio: 'mailhost:delivery_bounce:ratio1d',
      bounce_ratio_critical: 'mailhost:delivery_bounce:ratio1d',
      complaint_ratio_warning: 'mailhost:delivery_complaint:ratio1d',
      complaint_ratio_critical: 'mailhost:delivery_complaint:ratio1d',
      rejection_ratio: 'mailhost:delivery_rejection:ratio1d',
      ratio_min_messages: 'mailhost:delivery_messages:increase1d',
    },
    local overridden = std.set([
      k
      for o in c.accountOverrides
      for k in std.objectFields(o)
      if k != 'account_id'
    ]),
    assert std.setDiff(overridden, std.set(c.accountThresholds)) == [] :
           'accountOverrides may set only ' + std.join(', ', c.accountThresholds),
    assert [o for o in c.accountOverrides if !std.objectHas(o, 'account_id')] == [] :
           'every entry of accountOverrides needs an account_id',
    assert std.length(std.set([o.account_id for o in c.accountOverrides])) == std.length(c.accountOverrides) :
           'accountOverrides lists an account_id twice',
    assert std.objectFields(thresholdBase) == std.set(c.accountThresholds) :
           'every per-account threshold has a base series',
    assert c.forecast.typicalQuantile > 0 && c.forecast.typicalQuantile < 1 :
           'forecast.typicalQuantile is a share between 0 and 1 (0.4: the 40th percentile), not %s' % c.forecast.typicalQuantile,
    assert c.forecast.risingFactor >= 1 :
           'forecast.risingFactor is a weekly growth factor of at least 1 (1.05: a pace 5 %% higher each week), not %s' % c.forecast.risingFactor,
    assert c.forecast.steadySpread > 1 :
           'forecast.steadySpread is a ratio above 1 (2: the fastest weekly pace at most twice the slowest), not %s' % c.forecast.steadySpread,
    assert [
      v
      for v in [c.thresholds.quota_exhaustion_pace_margin_ratio] + [
        o.quota_exhaustion_pace_margin_ratio
        for o in c.accountOverrides
        if std.objectHas(o, 'quota_exhaustion_pace_margin_ratio')
      ]
      if v < 0 || v >= 1
    ] == [] : 'quota_exhaustion_pace_margin_ratio is a share from 0 up to, not including, 1 (0.2: a pace 20 % below the typical one)',

    groups+: [
      {
        name: 'mailhost.thresholds',
        rules: [
          { record: lib.global(name), expr: 'vector(%s)' % lib.number(c.thresholds[name]) }
          for name in std.objectFields(c.thresholds)
        ],
      },
      {
        // One series per account and threshold that _config.accountOverrides sets; empty by
        // default.
        name: 'mailhost.thresholds.accounts',
        rules: [
          {
            record: lib.override(name),
            expr: 'vector(%s)' % lib.number(o[name]),
            labels: { account_id: std.toString(o.account_id) },
          }
          for name in c.accountThresholds
          for o in c.accountOverrides
          if std.objectHas(o, name)
        ],
      },
      {
        // The pace a forecast rests on, evaluated once an hour (forecast.interval): a week of
        // samples per account is read once an hour, not once a minute.
        name: 'mailhost.forecast',
        interval: c.forecast.interval,
        rules: [
          {
            // Messages a second over the last week (forecast.paceWindow), every weekday once
            // whatever the hour; only for a week in which the account never ran dry, since a
            // week of refused sends says nothing of how much it wants to send.
            record: 'mailhost:delivery_messages_sent:rate_week',
            expr: |||
              rate(%(sent)s[%(week)s])
              and
              (min_over_time(%(remaining)s[%(week)s]) > 0)
            ||| % {
              sent: s('mailhost_delivery_messages_sent'),
              remaining: s('mailhost_delivery_remaining_messages'),
              week: c.forecast.paceWindow,
            },
          },
          {
            // The latest weekly pace of an account whose sending grows steadily: it rose by at
            // least forecast.risingFactor in each of the last two weeks, and over the last week
            // its fastest weekly pace was at most forecast.steadySpread times its slowest. A
            // campaign lifts the week's pace at a jump and drops out of it a week later:
            // campaigns in two weeks running can pass the first test, not the second.
            record: 'mailhost:delivery_messages_sent:rate_week_rising',
            expr: |||
              mailhost:delivery_messages_sent:rate_week
                > %(f)s * (mailhost:delivery_messages_sent:rate_week offset %(week)s)
              and
              (mailhost:delivery_messages_sent:rate_week offset %(week)s)
                > %(f)s * (mailhost:delivery_messages_sent:rate_week offset %(two)s)
              and
              max_over_time(mailhost:delivery_messages_sent:rate_week[%(week)s])
                <= %(s)s * min_over_time(mailhost:delivery_messages_sent:rate_week[%(week)s])
            ||| % {
              f: lib.number(c.forecast.risingFactor),
              s: lib.number(c.forecast.steadySpread),
              week: c.forecast.paceWindow,
              two: lib.duration(2 * lib.seconds(c.forecast.paceWindow)),
            },
          },
          {
            // Its typical value: the 40th percentile (forecast.typicalQuantile) of those paces
            // over four weeks (forecast.typicalOver), which a campaign week, or two, does not
            // reach; or a recent level where that is higher: for sending that grows steadily,
            // the latest week's pace; for sending with jumps over the last two weeks
            // (campaigns), the lowest weekly pace of the last week (campaigns that came every
            // week count). A steady sender that neither grows nor jumps keeps the percentile:
            // one heavier week says nothing of the weeks to come.
            record: 'mailhost:delivery_messages_sent:rate_week_typical',
            expr: |||
              (
                mailhost:delivery_messages_sent:rate_week_rising
                or
                (
                  min_over_time(mailhost:delivery_messages_sent:rate_week[%(week)s])
                  unless
                  max_over_time(mailhost:delivery_messages_sent:rate_week[%(two)s])
                    <= %(s)s * min_over_time(mailhost:delivery_messages_sent:rate_week[%(two)s])
                )
              )
                > quantile_over_time(%(q)s, mailhost:delivery_messages_sent:rate_week[%(over)s])
              or
              quantile_over_time(%(q)s, mailhost:delivery_messages_sent:rate_week[%(over)s])
            ||| % {
              q: lib.number(c.forecast.typicalQuantile),
              over: c.forecast.typicalOver,
              week: c.forecast.paceWindow,
              s: lib.number(c.forecast.steadySpread),
              two: lib.duration(2 * lib.seconds(c.forecast.paceWindow)),
            },
          },
        ],
      },
      {
        name: 'mailhost.recording',
        rules: [
          {
            record: 'mailhost:delivery_quota_used:ratio',
            expr: '%s / (%s > 0)' % [s('mailhost_delivery_plan_messages_used'), s('mailhost_delivery_plan_messages_limit')],
          },
          {
            // Extras included, so it can exceed 1.
            record: 'mailhost:delivery_quota_remaining:ratio',
            expr: '%s / (%s > 0)' % [s('mailhost_delivery_remaining_messages'), s('mailhost_delivery_plan_messages_limit')],
          },
          {
            // Messages sent per hour over the last hour.
            record: 'mailhost:delivery_messages_sent:rate1h',
            expr: 'clamp_min(deriv(%s[1h]), 0) * 3600' % s('mailhost_delivery_messages_sent'),
          },
          {
            // When the quota next starts afresh: the next renewal, or the plan's expiration if
            // that comes first (or is all that is known).
            record: 'mailhost:delivery_quota_reset:timestamp_seconds',
            expr: |||
              (%(renewal)s <= %(expiration)s)
              or %(expiration)s
              or %(renewal)s
            ||| % {
              renewal: s('mailhost_delivery_next_renewal_timestamp_seconds'),
              expiration: s('mailhost_delivery_plan_expiration_timestamp_seconds'),
            },
          },
          {
            // The account's typical pace (messages a second): the median, over three weeks, of
            // the pace of the week before each hour (group mailhost.forecast), read here every
            // evaluation. docs/mixin.md, "Quota exhaustion", says why.
            record: 'mailhost:delivery_messages_sent:pace',
            expr: 'last_over_time(mailhost:delivery_messages_sent:rate_week_typical[%s])' % c.forecast.lookback,
          },
          {
            // The messages the account can count on until its quota resets: the last day's
            // average of what is left (what is left now, if more: a renewal, extras or a larger
            // plan count at once), less bought extras that expire before the reset.
            record: 'mailhost:delivery_quota_available:messages',
            expr: |||
              ((avg_over_time(%(remaining)s[%(level)s]) >= %(remaining)s) or %(remaining)s)
              - (%(extras)s and (%(expires)s < mailhost:delivery_quota_reset:timestamp_seconds))
              or
              ((avg_over_time(%(remaining)s[%(level)s]) >= %(remaining)s) or %(remaining)s)
            ||| % {
              remaining: s('mailhost_delivery_remaining_messages'),
              extras: s('mailhost_delivery_remaining_extra_messages'),
              expires: s('mailhost_delivery_extra_messages_expiration_timestamp_seconds'),
              level: lib.duration(c.forecast.levelWindowSeconds),
            },
          },
          {
            // When those run out at the typical pace, counted from the middle of the last day
            // (what the average stands for), so that a busy afternoon or a quiet night does
            // not move it. Only for an account with a plan (a limit above 0) that sends.
            record: 'mailhost:delivery_quota_exhaustion:timestamp_seconds',
            expr: |||
              time() - %s + mailhost:delivery_quota_available:messages / (mailhost:delivery_messages_sent:pace > 0)
              and (%s > 0)
            ||| % [lib.number(c.forecast.levelWindowSeconds / 2), s('mailhost_delivery_plan_messages_limit')],
          },
          {
            // Messages the account will be short of when its quota resets, at its typical pace
            // (negative: left over); only for an account with a known reset.
            record: 'mailhost:delivery_quota_shortfall:messages',
            expr: |||
              (mailhost:delivery_quota_reset:timestamp_seconds - mailhost:delivery_quota_exhaustion:timestamp_seconds)
              * mailhost:delivery_messages_sent:pace
            |||,
          },
          {
            // Days of margin, in seconds: how long after the reset the messages left would last
            // at the typical pace (negative: how long before it they run out). The fleet
            // overview ranks accounts by it.
            record: 'mailhost:delivery_quota_margin:seconds',
            expr: 'mailhost:delivery_quota_exhaustion:timestamp_seconds - mailhost:delivery_quota_reset:timestamp_seconds',
          },
          {
            // Messages of every outcome over the last 24 hours, from the exact daily counters:
            // a whole day at any hour, so that the ratios below do not start afresh at each
            // local midnight, when today's figures do (docs/mixin.md, "Sending health").
            record: 'mailhost:delivery_messages:increase1d',
            expr: 'sum without (status) (increase(%s[1d]))' % s('mailhost_delivery_messages_total'),
          },
          {
            // Share of the last 24 hours' messages that bounced.
            record: 'mailhost:delivery_bounce:ratio1d',
            expr: 'sum without (status) (increase(%s[1d]))\n/ (mailhost:delivery_messages:increase1d > 0)' % s('mailhost_delivery_messages_total', 'status="bounced"'),
          },
          {
            // Absent for an account whose statistics report no complaint outcome: its
            // complaint alerts stay silent rather than read 0.
            record: 'mailhost:delivery_complaint:ratio1d',
            expr: 'sum without (status) (increase(%s[1d]))\n/ (mailhost:delivery_messages:increase1d > 0)' % s('mailhost_delivery_messages_total', 'status="complaint"'),
          },
          {
            // Messages of every outcome in the last hour, from the exact daily counters.
            record: 'mailhost:delivery_messages:increase1h',
            expr: 'sum without (status) (increase(%s[1h]))' % s('mailhost_delivery_messages_total'),
          },
          {
            // Bought extra messages left when they expire, at the current sending rate (which
            // spends the plan first, so this is the fewest that can be lost); only while the
            // expiry is ahead.
            record: 'mailhost:delivery_extra_messages_unused_at_expiry:estimate',
            expr: |||
              %(remaining)s
              - mailhost:delivery_messages_sent:rate1h / 3600 * ((%(expires)s - time()) > 0)
            ||| % {
              remaining: s('mailhost_delivery_remaining_extra_messages'),
              expires: s('mailhost_delivery_extra_messages_expiration_timestamp_seconds'),
            },
          },
          {
            record: 'mailhost:delivery_rejection:ratio1d',
            expr: 'sum without (status) (increase(%s[1d]))\n/ (mailhost:delivery_messages:increase1d > 0)' % s('mailhost_delivery_messages_total', 'status="rejected"'),
          },
          {
            record: 'mailhost:mailbox_quota_used:ratio',
            expr: '%s / (%s > 0)' % [s('mailhost_mailbox_quota_used_bytes'), s('mailhost_mailbox_quota_limit_bytes')],
          },
        ] + [
          // Each account series gets the threshold in force for it: its own where
          // accountOverrides sets one, else the global value.
          {
            record: lib.effective(name),
            expr: |||
              0 * %(base)s + on (account_id) group_left () %(override)s
              or
              0 * %(base)s + on () group_left () %(global)s
            ||| % { base: thresholdBase[name], override: lib.override(name), global: lib.global(name) },
          }
          for name in c.accountThresholds
        ],
      },
    ],
  },
}
