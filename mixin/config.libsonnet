// Everything an operator may want to change without touching an expression. Override with
//   (import 'mixin.libsonnet') + { _config+:: { mailhostSelector: 'job="mail",cluster="eu"' } }
// docs/mixin.md explains each field; docs/runbook.md explains each threshold.
{
  _config+:: {
    // Label matchers (without braces) that select the exporter's series; every raw series in a
    // rule carries them, so a recorded series or an alert only ever sees the exporter's data.
    mailhostSelector: 'job="mailhost"',

    // Prefix of runbook_url; the default is relative to the repository root.
    runbookUrlPrefix: 'docs/runbook.md#',

    // Labels every alert carries besides severity, e.g. { team: 'mail' } for an Alertmanager
    // that routes on them. Alerts also keep every label of their series (tenant, account_id,
    // mailbox, ...), which is what examples/alertmanager routes and inhibits on.
    alertLabels: {},
    // Whether an alert on the targets of one collector carries collector="<name>", so that
    // Alertmanager can hold it back while MailhostCollectorFailing fires for that collector.
    alertCollectorLabel: true,
    // How long an alert (MailhostExporterDown, MailhostDeliveryAllowListChanged and
    // MailhostCollectorRestarted aside) keeps firing after its condition clears:
    // a failed scrape or an exporter restart then neither resolves nor re-opens it, and
    // Alertmanager holds it back under MailhostExporterDown. It delays each resolved
    // notification by as much. '' leaves keep_firing_for out, for evaluators without it
    // (Prometheus before 2.42, vmalert before 1.90).
    keepFiringFor: '10m',
    // keep_firing_for of single alerts, where it differs from keepFiringFor. The ratios of
    // the last 24 hours move slowly, and an account near a threshold crosses it back and forth
    // within hours: a ratio that fell below for less than 6 hours is not a problem solved
    // (docs/mixin.md, "Sending health").
    keepFiringForOf: {
      MailhostDeliveryQuotaExhaustionPredicted: '12h',
      MailhostDeliveryBounceRatioHigh: '6h',
      MailhostDeliveryBounceRatioCritical: '6h',
      MailhostDeliveryComplaintRatioHigh: '6h',
      MailhostDeliveryComplaintRatioCritical: '6h',
      MailhostDeliveryRejectionRatioHigh: '6h',
    },
    // The quota forecast (docs/mixin.md, "Quota exhaustion"). The group mailhost.forecast
    // computes, every `interval`, each account's pace over the last `paceWindow` (a whole
    // week, so every weekday counts once) and its typical value: the `typicalQuantile` of
    // those paces over `typicalOver`, which a campaign week, or two, does not reach, or a
    // recent level if that is higher (the latest week's pace for sending that grows steadily;
    // the lowest of the last `paceWindow` for sending with jumps, campaigns; none for a steady
    // sender). The recording rules read the latest typical pace within `lookback` (at least twice
    // `interval`), and weigh what is left over the last `levelWindowSeconds` (a whole day, so
    // that the hour of the day does not move the forecast). The tests shrink them to seconds.
    forecast: {
      interval: '1h',
      paceWindow: '7d',
      typicalOver: '28d',
      typicalQuantile: 0.4,
      lookback: '2h',
      levelWindowSeconds: 86400,
      // Sending that grows: the weekly pace rose by at least this factor in each of the last
      // two weeks (this week's against the one before, that one against the one before it),
      // and over the last week its fastest weekly pace was at most `steadySpread` times its
      // slowest (no campaign jumped into or out of the week). Only then does the forecast take
      // the latest week's pace, where it is above the percentile.
      risingFactor: 1.05,
      steadySpread: 2,
    },

    // Global thresholds, recorded in the group mailhost.thresholds so that alerts compare
    // against series, never against numbers of their own.
    thresholds: {
      // Warn when an account has less than this share of its plan's messages left.
      quota_remaining_warning_ratio: 0.10,
      // Page when an account has less than this share left.
      quota_remaining_critical_ratio: 0.02,
      // Warn when the account runs out of messages before its quota renews (or its plan
      // expires) even at a pace this share below its typical one, at least
      // quota_exhaustion_margin_seconds before the renewal, and within
      // quota_exhaustion_horizon_seconds from now (docs/mixin.md, "Quota exhaustion").
      quota_exhaustion_pace_margin_ratio: 0.20,
      quota_exhaustion_margin_seconds: 129600,
      quota_exhaustion_horizon_seconds: 10 * 86400,
      // Warn this long (seconds) before a plan expires.
      plan_expiry_seconds: 7 * 86400,
      // The last 24 hours' share of bounced messages above which an account is warned about.
      bounce_ratio: 0.05,
      // The last 24 hours' share of bounced messages above which it pages.
      bounce_ratio_critical: 0.10,
      // The last 24 hours' share of messages that drew a complaint above which an account is
      // warned about (the bulk-sender rules of the large mailbox providers since 2024 ask for
      // under 0.1%),
      // and above which it pages (they never accept 0.3%). A proxy: the mailbox provider's own
      // figure is the one that counts.
      complaint_ratio_warning: 0.001,
      complaint_ratio_critical: 0.003,
      // The last 24 hours' share of rejected messages above which an account is warned about.
      rejection_ratio: 0.05,
      // Ratios are judged only once an account has sent this many messages in the last 24 hours.
      ratio_min_messages: 100,
      // Warn when a mailbox uses more than this share of its quota.
      mailbox_quota_ratio: 0.90,
      // Values older than this many collector intervals are stale.
      stale_intervals: 3,
      // Share of an endpoint's calls answered 429 (over 5 minutes) above which the exporter is
      // warned: below it, the pacer's occasional probe for a raised limit.
      rate_limited_ratio: 0.05,
      // An account sending this many times what it sent in the same hour a week before (and at
      // least sending_spike_min_messages in the hour) is warned about: a stolen credential, or
      // a warm-up gone wrong.
      sending_spike_factor: 5,
      sending_spike_min_messages: 100,
      // Warn this long (seconds) before bought extra messages expire unused.
      extra_messages_expiry_seconds: 7 * 86400,
    },

    // Per-account thresholds: a list of { account_id: '1001', <threshold>: value, ... } using
    // any of the names in accountThresholds. An account without an entry (or without that
    // threshold in its entry) falls back to the global value above.
    accountOverrides: [],
    // The thresholds that may be set per account.
    accountThresholds: [
      'quota_remaining_warning_ratio',
      'quota_remaining_critical_ratio',
      'quota_exhaustion_pace_margin_ratio',
      'quota_exhaustion_margin_seconds',
      'quota_exhaustion_horizon_seconds',
      'plan_expiry_seconds',
      'bounce_ratio',
      'bounce_ratio_critical',
      'complaint_ratio_warning',
      'complaint_ratio_critical',
      'rejection_ratio',
      'ratio_min_messages',
    ],

    // How long a condition must hold before an alert fires.
    alertFor: {
      MailhostDeliveryQuotaLow: '2m',
      MailhostDeliveryQuotaCritical: '2m',
      MailhostDeliveryQuotaExhaustionPredicted: '6h',
      MailhostDeliveryPlanExpiring: '10m',
      MailhostDeliveryAccountStatusChanged: '5m',
      MailhostDeliveryBounceRatioHigh: '15m',
      MailhostDeliveryBounceRatioCritical: '15m',
      MailhostDeliveryComplaintRatioHigh: '15m',
      MailhostDeliveryComplaintRatioCritical: '15m',
      MailhostDeliverySendingSpike: '10m',
      MailhostDeliveryAccountOpenToAnyAddress: '30m',
      MailhostDeliveryAllowListChanged: '0m',
      MailhostTeamMemberApiWithoutSecondFactor: '30m',
      MailhostMailboxApiWithoutSecondFactor: '30m',
      MailhostDeliveryAccountScheduledForDeletion: '10m',
      MailhostDeliveryExtraMessagesExpiringUnused: '1h',
      MailhostDeliveryRejectionRatioHigh: '15m',
      MailhostMigrationFailures: '5m',
      MailhostMigrationStalled: '15m',
      MailhostMailboxQuotaHigh: '15m',
      MailhostMailboxOutboundLimitReached: '5m',
      MailhostExporterDown: '5m',
      MailhostCollectorFailing: '10m',
      // A restart of a collector's loop is a panic already over: nothing to wait out.
      MailhostCollectorRestarted: '0m',
      MailhostDataStale: '1m',
      MailhostApiRateLimited: '10m',
      MailhostProviderOutage: '5m',
      MailhostTenantFleetExceedsRateLimit: '15m',
    },
    // A running migration whose migrated count stays put this long is stalled.
    migrationStallWindow: '30m',
    // MailhostDeliveryAllowListChanged fires for this long after an allow-list changes.
    allowListChangeWindow: '10m',
    // MailhostCollectorRestarted fires for this long after a collector's loop was started
    // again: several scrapes, and more than a collector's usual interval (the longest wait
    // before a restart), so that a loop panicking at every run does not flap.
    collectorRestartWindow: '15m',

    // Grafana dashboards.
    dashboardUidPrefix: 'mailhost',
    dashboardTitlePrefix: 'Mailhost / ',
    dashboardTags: ['mailhost'],
    dashboardRefresh: '1m',
    dashboardTimeFrom: 'now-6h',
    dashboardTimezone: '',
    // The exporter-health dashboard looks at a shorter window by default.
    dashboardHealthTimeFrom: 'now-3h',
  },
}
