// Alerts: each compares a series with the threshold series in force for it (see
// rules.libsonnet), carries a severity, and points at its section of docs/runbook.md.
local lib = import 'lib.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local s(metric, extra='') = lib.series(c, metric, extra),
    // The collector whose series an alert reads, as its `collector` label (with
    // alertCollectorLabel): Alertmanager holds the alert back while MailhostCollectorFailing
    // fires for that collector and tenant. MailhostDataStale and MailhostCollectorFailing
    // carry the label of their series; the rest read no collector's targets.
    local collectorOf = {
      MailhostDeliveryQuotaLow: 'delivery_account',
      MailhostDeliveryQuotaCritical: 'delivery_account',
      MailhostDeliveryQuotaExhaustionPredicted: 'delivery_account',
      MailhostDeliveryPlanExpiring: 'delivery_account',
      MailhostDeliveryAccountStatusChanged: 'delivery_account',
      MailhostDeliveryBounceRatioHigh: 'tracemail_daily',
      MailhostDeliveryBounceRatioCritical: 'tracemail_daily',
      MailhostDeliveryComplaintRatioHigh: 'tracemail_daily',
      MailhostDeliveryComplaintRatioCritical: 'tracemail_daily',
      MailhostDeliverySendingSpike: 'tracemail_daily',
      MailhostDeliveryAccountOpenToAnyAddress: 'delivery_account',
      MailhostDeliveryAllowListChanged: 'delivery_account',
      MailhostTeamMemberApiWithoutSecondFactor: 'team_member',
      MailhostMailboxApiWithoutSecondFactor: 'mailbox',
      MailhostDeliveryAccountScheduledForDeletion: 'delivery_account',
      MailhostDeliveryExtraMessagesExpiringUnused: 'delivery_account',
      MailhostDeliveryRejectionRatioHigh: 'tracemail_daily',
      MailhostMigrationFailures: 'migration',
      MailhostMigrationStalled: 'migration',
      MailhostMailboxQuotaHigh: 'mailbox',
      MailhostMailboxOutboundLimitReached: 'mailbox',
    },
    // A series of the alert's account, by the labels that name it, for an annotation.
    local accountQuery(metric, after='') = 'query (printf "%s{job=%%q,instance=%%q,tenant=%%q,account_id=%%q}%s" $labels.job $labels.instance $labels.tenant $labels.account_id)' % [metric, after],
    // The quota reset of the alert's account, for its annotation.
    local resetQuery = accountQuery('mailhost:delivery_quota_reset:timestamp_seconds'),
    // What a notification about an account's quota gives besides the description (see
    // examples/alertmanager/templates/mailhost.tmpl): the messages left, when they run out at
    // the account's typical pace, and when the quota starts afresh.
    local quotaAnnotations(figure) = {
      figure: figure,
      time_left: '{{ with ' + accountQuery('mailhost:delivery_quota_exhaustion:timestamp_seconds') + ' }}runs out around {{ . | first | value | humanizeTimestamp }}{{ end }}{{ with ' + accountQuery('mailhost:delivery_messages_sent:pace', ' * 86400') + ' }} at its typical pace of {{ . | first | value | printf "%.0f" }} messages a day{{ else }}no typical pace known yet{{ end }}',
      quota_resets: '{{ with ' + resetQuery + ' }}{{ . | first | value | humanizeTimestamp }}{{ else }}no renewal or expiration date known{{ end }}',
    },
    local messagesLeft = '{{ with ' + accountQuery('mailhost_delivery_remaining_messages') + ' }}{{ . | first | value | printf "%.0f" }}{{ end }} messages left',
    local annotationsOf = {
      MailhostDeliveryQuotaLow: quotaAnnotations(messagesLeft + ", {{ $value | humanizePercentage }} of the plan's"),
      MailhostDeliveryQuotaCritical: quotaAnnotations(messagesLeft + ", {{ $value | humanizePercentage }} of the plan's"),
      MailhostDeliveryQuotaExhaustionPredicted: quotaAnnotations(messagesLeft) {
        shortfall: '{{ with ' + accountQuery('mailhost:delivery_quota_shortfall:messages') + ' }}{{ . | first | value | printf "%.0f" }} messages short when the quota resets{{ end }}',
      },
    },
    local alert(name, severity, expr, summary, description) = {
      alert: name,
      expr: expr,
      'for': c.alertFor[name],
      // The exporter's own absence ends at once; an alert on its data outlives a failed
      // scrape or a restart, so that Alertmanager holds it back under MailhostExporterDown
      // instead of resolving it. An allow-list change and a collector's restart fire for a
      // window of their own, which a failed scrape does not shorten.
      [if c.keepFiringFor != '' && !std.member(['MailhostExporterDown', 'MailhostDeliveryAllowListChanged', 'MailhostCollectorRestarted'], name) then 'keep_firing_for']: std.get(c.keepFiringForOf, name, c.keepFiringFor),
      labels: c.alertLabels { severity: severity } + (
        if c.alertCollectorLabel && std.objectHas(collectorOf, name) then { collector: collectorOf[name] } else {}
      ),
      annotations: {
        summary: summary,
        description: description,
        runbook_url: c.runbookUrlPrefix + std.asciiLower(name),
      } + std.get(annotationsOf, name, {}),
    },
    // A tenant's pacer series, for an annotation: a rate in requests per second.
    local pacerValue(metric) = '{{ with query (printf "%s{job=%%q,instance=%%q,tenant=%%q}" $labels.job $labels.instance $labels.tenant) }}{{ . | first | value | printf "%%.4g" }}{{ end }}' % metric,
    // The tenant, or the token of a single-token config (whose series have no tenant label).
    local tenantOrToken = '{{ with $labels.tenant }}Tenant {{ . }}{{ else }}The token{{ end }}',

    groups+: [
      {
        name: 'mailhost.alerts',
        rules: [
          alert(
            'MailhostDeliveryQuotaLow',
            'warning',
            |||
              (mailhost:delivery_quota_remaining:ratio < %s)
              >= %s
            ||| % [lib.effective('quota_remaining_warning_ratio'), lib.effective('quota_remaining_critical_ratio')],
            'A Delivery account is running out of messages.',
            "Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) has {{ $value | humanizePercentage }} of its plan's messages left.",
          ),
          alert(
            'MailhostDeliveryQuotaCritical',
            'critical',
            'mailhost:delivery_quota_remaining:ratio < %s' % lib.effective('quota_remaining_critical_ratio'),
            'A Delivery account has almost no messages left.',
            "Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) has {{ $value | humanizePercentage }} of its plan's messages left; sends will be refused when it reaches zero.",
          ),
          alert(
            'MailhostDeliveryQuotaExhaustionPredicted',
            'warning',
            // Runs out before its quota renews (or its plan ends) even at a pace the pace
            // margin below its typical one, at least the margin before the renewal, and within
            // the horizon; the value is when. An account with no known reset, a limit of 0 or no
            // pace yet has no forecast (docs/mixin.md).
            |||
              mailhost:delivery_quota_exhaustion:timestamp_seconds
              and
              (
                mailhost:delivery_quota_exhaustion:timestamp_seconds - time()
                < (mailhost:delivery_quota_reset:timestamp_seconds - time()) * (1 - %s)
              )
              and
              (
                mailhost:delivery_quota_exhaustion:timestamp_seconds
                < mailhost:delivery_quota_reset:timestamp_seconds - %s
              )
              and
              (mailhost:delivery_quota_exhaustion:timestamp_seconds - time() < %s)
            ||| % [lib.effective('quota_exhaustion_pace_margin_ratio'), lib.effective('quota_exhaustion_margin_seconds'), lib.effective('quota_exhaustion_horizon_seconds')],
            'A Delivery account will run out of messages before its quota renews.',
            'Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) will run out of messages around {{ $value | humanizeTimestamp }} at its typical pace, before its quota renews ({{ with ' + resetQuery + ' }}{{ . | first | value | humanizeTimestamp }}{{ end }}).',
          ),
          alert(
            'MailhostDeliveryPlanExpiring',
            'warning',
            '(%s - time())\n< %s' % [s('mailhost_delivery_plan_expiration_timestamp_seconds'), lib.effective('plan_expiry_seconds')],
            'The plan of a Delivery account expires soon.',
            'The plan of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) expires in {{ $value | humanizeDuration }}.',
          ),
          alert(
            'MailhostDeliveryAccountStatusChanged',
            'warning',
            '%s\n!= quantile_over_time(0.5, %s[1d])' % [s('mailhost_delivery_account_status'), s('mailhost_delivery_account_status')],
            'A Delivery account changed status.',
            'Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) has status {{ $value }}, not the value it had for most of the last day.',
          ),
          alert(
            'MailhostDeliveryBounceRatioHigh',
            'warning',
            '((mailhost:delivery_bounce:ratio1d > %s) <= %s)\nand\n(mailhost:delivery_messages:increase1d >= %s)' % [lib.effective('bounce_ratio'), lib.effective('bounce_ratio_critical'), lib.effective('ratio_min_messages')],
            'A Delivery account bounces too many messages.',
            "{{ $value | humanizePercentage }} of the last 24 hours' messages of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) bounced.",
          ),
          alert(
            'MailhostDeliveryBounceRatioCritical',
            'critical',
            '(mailhost:delivery_bounce:ratio1d > %s)\nand\n(mailhost:delivery_messages:increase1d >= %s)' % [lib.effective('bounce_ratio_critical'), lib.effective('ratio_min_messages')],
            'A Delivery account bounces far too many messages.',
            "{{ $value | humanizePercentage }} of the last 24 hours' messages of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) bounced: mailbox providers throttle or block senders at such rates.",
          ),
          alert(
            'MailhostDeliveryComplaintRatioHigh',
            'warning',
            |||
              ((mailhost:delivery_complaint:ratio1d > %s) <= %s)
              and
              (mailhost:delivery_messages:increase1d >= %s)
            ||| % [lib.effective('complaint_ratio_warning'), lib.effective('complaint_ratio_critical'), lib.effective('ratio_min_messages')],
            'A Delivery account draws too many complaints.',
            "{{ $value | humanizePercentage }} of the last 24 hours' messages of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) drew a complaint, above the rate the large mailbox providers ask bulk senders to stay under. The provider's figure is a proxy: the mailbox provider's own (Postmaster Tools) is the one that counts.",
          ),
          alert(
            'MailhostDeliveryComplaintRatioCritical',
            'critical',
            |||
              (mailhost:delivery_complaint:ratio1d > %s)
              and
              (mailhost:delivery_messages:increase1d >= %s)
            ||| % [lib.effective('complaint_ratio_critical'), lib.effective('ratio_min_messages')],
            'A Delivery account draws far too many complaints.',
            "{{ $value | humanizePercentage }} of the last 24 hours' messages of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) drew a complaint: the large mailbox providers reject or junk bulk mail from senders above this rate.",
          ),
          alert(
            'MailhostDeliverySendingSpike',
            'warning',
            // An account with no history a week ago (a fresh install, a new account) is left
            // alone: the offset series is absent.
            |||
              (mailhost:delivery_messages:increase1h >= on () group_left () %(min)s)
              > (mailhost:delivery_messages:increase1h offset 1w) * on () group_left () %(factor)s
            ||| % { min: lib.global('sending_spike_min_messages'), factor: lib.global('sending_spike_factor') },
            'A Delivery account sends far more than a week ago.',
            'Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) sent {{ $value | humanize }} messages in the last hour, more than %s times what it sent in the same hour a week ago: a stolen credential, or a warm-up gone wrong.' % c.thresholds.sending_spike_factor,
          ),
          alert(
            'MailhostDeliveryAccountOpenToAnyAddress',
            'warning',
            '(mailhost:delivery_messages_sent:rate1h > 0)\nand\n(%s == 0)' % s('mailhost_delivery_allow_nets'),
            'A sending Delivery account has an empty IP allow-list.',
            'Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) sends {{ $value | humanize }} messages an hour and its IP allow-list is empty: anyone holding one of its Send API tokens can send from anywhere.',
          ),
          alert(
            'MailhostDeliveryAllowListChanged',
            'warning',
            'changes(%s[%s]) > 0' % [s('mailhost_delivery_allow_nets_fingerprint'), c.allowListChangeWindow],
            'The IP allow-list of a Delivery account changed.',
            'The IP allow-list of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) changed {{ $value }} times in the last ' + c.allowListChangeWindow + '; it now holds {{ with query (printf "mailhost_delivery_allow_nets{job=%q,instance=%q,account_id=%q}" $labels.job $labels.instance $labels.account_id) }}{{ . | first | value }}{{ end }} networks.',
          ),
          alert(
            'MailhostTeamMemberApiWithoutSecondFactor',
            'warning',
            |||
              (%s == 0)
              and (%s == 0)
              and (%s == 1)
            ||| % [s('mailhost_team_member_otp_enabled'), s('mailhost_team_member_api_access_blocked'), s('mailhost_team_member_enabled')],
            'A team member has API access and no second factor.',
            'Team member {{ $labels.team_member }} ({{ $labels.instance }}) is enabled, may use the Management API and signs in without a second factor: a leaked password is enough to act for the customer.',
          ),
          alert(
            'MailhostMailboxApiWithoutSecondFactor',
            'warning',
            |||
              (%s == 1)
              and (%s == 0)
              and (%s == 0)
              and (%s == 0)
            ||| % [s('mailhost_mailbox_api_enabled'), s('mailhost_mailbox_otp_enabled'), s('mailhost_mailbox_otp_forced'), s('mailhost_mailbox_domain_otp_forced')],
            'A mailbox has API access and no second factor.',
            'Mailbox {{ $labels.mailbox }} ({{ $labels.instance }}) may use the API and neither it nor its domain requires a second factor.',
          ),
          alert(
            'MailhostDeliveryAccountScheduledForDeletion',
            'warning',
            '(%s - time())\nand\n(mailhost:delivery_messages_sent:rate1h > 0)' % s('mailhost_delivery_delete_timestamp_seconds'),
            'A Delivery account scheduled for deletion still sends.',
            'Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) is still sending and the provider will delete it in {{ $value | humanizeDuration }}.',
          ),
          alert(
            'MailhostDeliveryExtraMessagesExpiringUnused',
            'warning',
            |||
              (mailhost:delivery_extra_messages_unused_at_expiry:estimate > 0)
              and
              ((%(expires)s - time()) < on () group_left () %(horizon)s)
            ||| % { expires: s('mailhost_delivery_extra_messages_expiration_timestamp_seconds'), horizon: lib.global('extra_messages_expiry_seconds') },
            'Bought extra messages of a Delivery account will expire unused.',
            'About {{ $value | printf "%.0f" }} bought extra messages of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) will expire unused on {{ with query (printf "mailhost_delivery_extra_messages_expiration_timestamp_seconds{job=%q,instance=%q,account_id=%q}" $labels.job $labels.instance $labels.account_id) }}{{ . | first | value | humanizeTimestamp }}{{ end }} at the current sending rate.',
          ),
          alert(
            'MailhostDeliveryRejectionRatioHigh',
            'warning',
            '(mailhost:delivery_rejection:ratio1d > %s)\nand\n(mailhost:delivery_messages:increase1d >= %s)' % [lib.effective('rejection_ratio'), lib.effective('ratio_min_messages')],
            'A Delivery account has too many messages rejected.',
            "{{ $value | humanizePercentage }} of the last 24 hours' messages of Delivery account {{ $labels.account_id }} ({{ $labels.instance }}) were rejected.",
          ),
          alert(
            'MailhostMigrationFailures',
            'warning',
            '%s > 0' % s('mailhost_migration_accounts', 'state="failed"'),
            'A mailbox migration has failed accounts.',
            'Migration {{ $labels.migration }} ({{ $labels.instance }}) has {{ $value }} failed accounts.',
          ),
          alert(
            'MailhostMigrationStalled',
            'warning',
            |||
              %(migrated)s
              and (changes(%(migrated)s[%(window)s]) == 0)
              and ignoring (status) (%(running)s == 1)
            ||| % {
              migrated: s('mailhost_migration_messages_migrated'),
              running: s('mailhost_migration_status', 'status="running"'),
              window: c.migrationStallWindow,
            },
            'A mailbox migration stopped progressing.',
            'Migration {{ $labels.migration }} ({{ $labels.instance }}) is running but has stayed at {{ $value | humanize }} migrated messages for at least %s.' % c.migrationStallWindow,
          ),
          alert(
            'MailhostMailboxQuotaHigh',
            'warning',
            'mailhost:mailbox_quota_used:ratio\n> on () group_left () %s' % lib.global('mailbox_quota_ratio'),
            'A mailbox is nearly full.',
            'Mailbox {{ $labels.mailbox }} ({{ $labels.instance }}) uses {{ $value | humanizePercentage }} of its quota.',
          ),
          alert(
            'MailhostMailboxOutboundLimitReached',
            'warning',
            '%s\n>= (%s > 0)' % [s('mailhost_mailbox_outbound_messages'), s('mailhost_mailbox_outbound_limit')],
            'A mailbox reached its outbound limit.',
            'Mailbox {{ $labels.mailbox }} ({{ $labels.instance }}) sent {{ $value }} messages in its outbound period and cannot send more until the count resets.',
          ),
          alert(
            'MailhostExporterDown',
            'critical',
            '%s == 0' % s('up'),
            'Prometheus cannot scrape mailhost_exporter.',
            'Prometheus cannot scrape mailhost_exporter at {{ $labels.instance }}; no quota or sending figures are being collected.',
          ),
          alert(
            'MailhostCollectorFailing',
            'warning',
            '%s == 0' % s('mailhost_collector_success'),
            'A collector of mailhost_exporter keeps failing.',
            'Every run of collector {{ $labels.collector }} on {{ $labels.instance }} for %s had a failing target; see mailhost_api_request_failures_total for the reason.' % c.alertFor.MailhostCollectorFailing,
          ),
          alert(
            'MailhostCollectorRestarted',
            'warning',
            // A restart is an event, a panic in the exporter (a bug), not a state to wait out:
            // the alert fires at the first evaluation that sees the counter rise (for 0m) and
            // for the window after the last restart. increase() takes a drop of the counter
            // (the exporter restarted) as a reset, not as a restart, and a counter that stays
            // at 0 (every collector from the start) increases by 0. The window (15m) holds
            // several scrapes, so a missed one does not hide a restart, and it is longer than
            // a collector's usual interval, the longest back-off: a loop that panics at every
            // run keeps the alert firing instead of flapping.
            'increase(%s[%s]) > 0' % [s('mailhost_collector_restarts_total'), c.collectorRestartWindow],
            'A collector of mailhost_exporter panicked and was started again.',
            'The loop of collector {{ $labels.collector }}{{ with $labels.tenant }} of tenant {{ . }}{{ end }} on {{ $labels.instance }} panicked and was started again (mailhost_collector_restarts_total rose by {{ $value | printf "%.0f" }} in the last ' + c.collectorRestartWindow + '); the log has the panic. Its targets keep their values until max_age meanwhile.',
          ),
          alert(
            'MailhostDataStale',
            'warning',
            // A tenant whose fleet needs more calls than its rate limit allows refreshes each
            // account only every few intervals, by design: MailhostTenantFleetExceedsRateLimit
            // speaks for the tenant once, rather than this alert for each of its targets. The
            // join ignores only what the tenant's series lack, so tenant and any label of the
            // selector or relabelling must match.
            |||
              (time() - %(lastSuccess)s)
              > ignoring (target) group_left ()
              (%(interval)s * on () group_left () %(stale)s)
              unless ignoring (collector, target)
              (%(demand)s > %(rate)s)
            ||| % {
              lastSuccess: s('mailhost_target_last_success_timestamp_seconds'),
              interval: s('mailhost_collector_interval_seconds'),
              stale: lib.global('stale_intervals'),
              demand: s('mailhost_api_pacer_demand'),
              rate: s('mailhost_api_pacer_rate'),
            },
            'Values of a mailhost_exporter target are stale.',
            'Target {{ $labels.target }} of collector {{ $labels.collector }} on {{ $labels.instance }} last succeeded {{ $value | humanizeDuration }} ago.',
          ),
          alert(
            'MailhostApiRateLimited',
            'warning',
            // The pacer probes for a raised limit now and then, so a stray 429 is expected; a
            // share of the calls is not. mailhost_api_requests_total has no tenant label: the
            // share is per endpoint.
            |||
              sum without (code) (rate(%(limited)s[5m]))
              / sum without (code) (rate(%(calls)s[5m]))
              > on () group_left () %(ratio)s
            ||| % {
              limited: s('mailhost_api_requests_total', 'code="429"'),
              calls: s('mailhost_api_requests_total'),
              ratio: lib.global('rate_limited_ratio'),
            },
            'The provider is rate-limiting mailhost_exporter.',
            '{{ $value | humanizePercentage }} of the calls to {{ $labels.endpoint }} from {{ $labels.instance }} were answered HTTP 429 over the last 5 minutes, although the exporter paces itself.',
          ),
          alert(
            'MailhostProviderOutage',
            'warning',
            // One per tenant and endpoint, not one per account: the accounts of an endpoint
            // in an outage are not called, and keep their values until max_age.
            // The value is how long it has lasted (the series exists only during an outage);
            // an HA pair's replicas make one alert.
            'max without (instance) (time() - %s)' % s('mailhost_api_endpoint_outage_since_timestamp_seconds'),
            'The provider fails every call of an endpoint.',
            tenantOrToken + ': every call of {{ $labels.endpoint }} has failed for {{ $value | humanizeDuration }} (5xx, timeouts or refused connections, no answer between). The exporter has paused it and asks once per cool-down; its targets keep their values until max_age.',
          ),
          alert(
            'MailhostTenantFleetExceedsRateLimit',
            'warning',
            // The value is ceil(needed / allowed): how many intervals apart each account is
            // refreshed. It is above 1 exactly when the needed rate exceeds the allowed one,
            // and never while there is no allowed rate (the provider has not limited the token).
            'ceil(%s / %s) > 1' % [s('mailhost_api_pacer_demand'), s('mailhost_api_pacer_rate')],
            'A tenant needs more API calls than its rate limit allows.',
            tenantOrToken + ' ({{ $labels.instance }}) needs ' + pacerValue('mailhost_api_pacer_demand')
            + ' requests per second to refresh every target once per interval, but the provider allows '
            + pacerValue('mailhost_api_pacer_rate')
            + ': each account is refreshed every {{ $value }} intervals and keeps its values meanwhile.',
          ),
        ],
      },
    ],
  },
}
