// The fleet-overview dashboard without the fields _config sets (dashboards.libsonnet adds them).
{
  id: null,
  description: "Every Delivery account at a glance: quota left, plan expiry, today's sending and its bounce and rejection ratios, top senders, status.",
  schemaVersion: 39,
  version: 1,
  editable: true,
  graphTooltip: 1,
  fiscalYearStartMonth: 0,
  liveNow: false,
  timepicker: {},
  weekStart: '',
  annotations: {
    list: [],
  },
  templating: {
    list: [
      {
        name: 'datasource',
        label: 'Data source',
        type: 'datasource',
        query: 'prometheus',
        current: {},
        hide: 0,
        refresh: 1,
        regex: '',
        includeAll: false,
        multi: false,
        options: [],
      },
      {
        name: 'job',
        label: 'Job',
        type: 'query',
        datasource: {
          type: 'prometheus',
          uid: '${datasource}',
        },
        query: {
          qryType: 1,
          query: 'label_values(mailhost_build_info, job)',
          refId: 'PrometheusVariableQueryEditor-VariableQuery',
        },
        refresh: 2,
        regex: '',
        sort: 1,
        hide: 0,
        multi: true,
        includeAll: true,
        current: {},
        options: [],
        allValue: '.+',
      },
      {
        name: 'instance',
        label: 'Instance',
        type: 'query',
        datasource: {
          type: 'prometheus',
          uid: '${datasource}',
        },
        query: {
          qryType: 1,
          query: 'label_values(mailhost_build_info{job=~"$job"}, instance)',
          refId: 'PrometheusVariableQueryEditor-VariableQuery',
        },
        refresh: 2,
        regex: '',
        sort: 1,
        hide: 0,
        multi: true,
        includeAll: true,
        current: {},
        options: [],
        allValue: '.+',
      },
      {
        name: 'account',
        label: 'Account',
        type: 'query',
        datasource: {
          type: 'prometheus',
          uid: '${datasource}',
        },
        query: {
          qryType: 1,
          query: 'label_values(mailhost_delivery_account_info{job=~"$job",instance=~"$instance"}, account_id)',
          refId: 'PrometheusVariableQueryEditor-VariableQuery',
        },
        refresh: 2,
        regex: '',
        sort: 1,
        hide: 0,
        multi: true,
        includeAll: true,
        current: {},
        options: [],
        allValue: '.+',
      },
    ],
  },
  panels: [
    {
      type: 'row',
      title: 'Quota',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 0,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 1,
    },
    {
      type: 'bargauge',
      title: 'Messages remaining',
      description: 'Messages each account can still send: plan quota left plus bought extras (mailhost_delivery_remaining_messages). At zero the provider refuses its sends.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 1,
        w: 6,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          min: 0,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_remaining_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 2,
    },
    {
      type: 'bargauge',
      title: 'Remaining share of plan',
      description: 'Messages remaining (extras included) divided by the messages the plan includes per period. Above 100% with unused extras. Yellow under 10%, red under 2% (the thresholds of prometheus/rules.yml).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 6,
        y: 1,
        w: 6,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'percentunit',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'red',
                value: null,
              },
              {
                color: 'yellow',
                value: 0.02,
              },
              {
                color: 'green',
                value: 0.1,
              },
            ],
          },
          min: 0,
          max: 1,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_remaining_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}\n/ (mailhost_delivery_plan_messages_limit{job=~"$job",instance=~"$instance",account_id=~"$account"} > 0)',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 3,
    },
    {
      type: 'bargauge',
      title: 'Days to plan expiry',
      description: "Days until each account's plan expires (mailhost_delivery_plan_expiration_timestamp_seconds minus now). Red under 7 days, when the plan-expiry alert fires.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 1,
        w: 6,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'd',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'red',
                value: null,
              },
              {
                color: 'yellow',
                value: 7,
              },
              {
                color: 'green',
                value: 30,
              },
            ],
          },
          decimals: 1,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: '(mailhost_delivery_plan_expiration_timestamp_seconds{job=~"$job",instance=~"$instance",account_id=~"$account"} - time()) / 86400',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 4,
    },
    {
      type: 'bargauge',
      title: 'Days of margin at renewal',
      description: "Accounts ranked by how long their messages would last past the quota's renewal (or the plan's expiry) at their typical pace, fewest first (mailhost:delivery_quota_margin:seconds of the shipped recording rules, docs/mixin.md). Below zero the account runs out that many days before it renews; accounts with no renewal date, no plan or no pace yet are not listed.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 18,
        y: 1,
        w: 6,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'd',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'red',
                value: null,
              },
              {
                color: 'yellow',
                value: 0,
              },
              {
                color: 'green',
                value: 3,
              },
            ],
          },
          decimals: 1,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'sort(mailhost:delivery_quota_margin:seconds{job=~"$job",instance=~"$instance",account_id=~"$account"} / 86400)',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 22,
    },
    {
      type: 'timeseries',
      title: 'Messages remaining over time',
      description: 'mailhost_delivery_remaining_messages per account: a steep fall is heavy sending, a jump up is a renewal or a bought pack.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 9,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
            stacking: {
              mode: 'none',
              group: 'A',
            },
            thresholdsStyle: {
              mode: 'off',
            },
          },
        },
        overrides: [],
      },
      options: {
        legend: {
          displayMode: 'table',
          placement: 'bottom',
          showLegend: true,
          calcs: [
            'lastNotNull',
            'max',
          ],
        },
        tooltip: {
          mode: 'multi',
          sort: 'desc',
        },
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_remaining_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: '{{account_id}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 5,
    },
    {
      type: 'timeseries',
      title: 'Plan used',
      description: "Plan messages used in the current period divided by the plan's limit, per account.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 9,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'percentunit',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
              {
                color: 'yellow',
                value: 0.9,
              },
              {
                color: 'red',
                value: 0.98,
              },
            ],
          },
          min: 0,
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
            stacking: {
              mode: 'none',
              group: 'A',
            },
            thresholdsStyle: {
              mode: 'dashed',
            },
          },
        },
        overrides: [],
      },
      options: {
        legend: {
          displayMode: 'table',
          placement: 'bottom',
          showLegend: true,
          calcs: [
            'lastNotNull',
            'max',
          ],
        },
        tooltip: {
          mode: 'multi',
          sort: 'desc',
        },
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_plan_messages_used{job=~"$job",instance=~"$instance",account_id=~"$account"}\n/ (mailhost_delivery_plan_messages_limit{job=~"$job",instance=~"$instance",account_id=~"$account"} > 0)',
          legendFormat: '{{account_id}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 6,
    },
    {
      type: 'row',
      title: "Today's sending",
      collapsed: false,
      gridPos: {
        x: 0,
        y: 17,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 7,
    },
    {
      type: 'timeseries',
      title: 'Messages per minute by outcome (selected accounts)',
      description: "The selected accounts' sending rate by outcome, from the exact counters derived from the daily statistics (mailhost_delivery_messages_total): no drop at midnight, and the day's last minutes are counted.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 18,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 30,
            showPoints: 'never',
            spanNulls: false,
            stacking: {
              mode: 'normal',
              group: 'A',
            },
            thresholdsStyle: {
              mode: 'off',
            },
          },
        },
        overrides: [],
      },
      options: {
        legend: {
          displayMode: 'table',
          placement: 'bottom',
          showLegend: true,
          calcs: [
            'lastNotNull',
            'max',
          ],
        },
        tooltip: {
          mode: 'multi',
          sort: 'desc',
        },
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'sum by (status) (rate(mailhost_delivery_messages_total{job=~"$job",instance=~"$instance",account_id=~"$account"}[$__rate_interval])) * 60',
          legendFormat: '{{status}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 8,
    },
    {
      type: 'bargauge',
      title: "Today's messages by outcome (whole customer)",
      description: "Today's messages by outcome for the whole customer, from the mail-tracing dashboard (mailhost_tracemail_current_day_messages without the account or domain view labels, so nothing is counted twice).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 18,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          min: 0,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'sum by (status) (mailhost_tracemail_current_day_messages{job=~"$job",instance=~"$instance",account="",domain=""})',
          legendFormat: '{{status}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 9,
    },
    {
      type: 'timeseries',
      title: 'Bounce ratio today',
      description: "Bounced messages as a share of all of today's messages, per account. An account that sent nothing shows 0. The bounce alert fires above 5% once an account has sent 100 messages today.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 26,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'percentunit',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
              {
                color: 'red',
                value: 0.05,
              },
            ],
          },
          min: 0,
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
            stacking: {
              mode: 'none',
              group: 'A',
            },
            thresholdsStyle: {
              mode: 'dashed',
            },
          },
        },
        overrides: [],
      },
      options: {
        legend: {
          displayMode: 'table',
          placement: 'bottom',
          showLegend: true,
          calcs: [
            'lastNotNull',
            'max',
          ],
        },
        tooltip: {
          mode: 'multi',
          sort: 'desc',
        },
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: '(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account",status="bounced"}) or 0 * sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}))\n/ clamp_min(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}), 1)',
          legendFormat: '{{account_id}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 10,
    },
    {
      type: 'timeseries',
      title: 'Rejection ratio today',
      description: "Rejected messages as a share of all of today's messages, per account. An account that sent nothing shows 0. The rejection alert fires above 5% once an account has sent 100 messages today.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 26,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'percentunit',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
              {
                color: 'red',
                value: 0.05,
              },
            ],
          },
          min: 0,
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
            stacking: {
              mode: 'none',
              group: 'A',
            },
            thresholdsStyle: {
              mode: 'dashed',
            },
          },
        },
        overrides: [],
      },
      options: {
        legend: {
          displayMode: 'table',
          placement: 'bottom',
          showLegend: true,
          calcs: [
            'lastNotNull',
            'max',
          ],
        },
        tooltip: {
          mode: 'multi',
          sort: 'desc',
        },
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: '(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account",status="rejected"}) or 0 * sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}))\n/ clamp_min(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}), 1)',
          legendFormat: '{{account_id}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 11,
    },
    {
      type: 'bargauge',
      title: 'Top senders today',
      description: "Today's messages of the top accounts, from the mail-tracing dashboard (mailhost_tracemail_top_account_messages of the whole-customer view).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 34,
        w: 8,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          min: 0,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'sort_desc(mailhost_tracemail_top_account_messages{job=~"$job",instance=~"$instance",account_id=~"$account",account="",domain=""})',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 12,
    },
    {
      type: 'bargauge',
      title: "Today's messages per account",
      description: "All of today's messages of each account, every outcome summed (mailhost_delivery_current_day_messages).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
        y: 34,
        w: 8,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          min: 0,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'sort_desc(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}))',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 13,
    },
    {
      type: 'bargauge',
      title: "Yesterday's messages per account",
      description: "All of yesterday's messages of each account, every outcome summed (mailhost_delivery_previous_day_messages): final once the day is over.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 16,
        y: 34,
        w: 8,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          min: 0,
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        displayMode: 'gradient',
        orientation: 'horizontal',
        showUnfilled: true,
        valueMode: 'color',
        namePlacement: 'auto',
        sizing: 'auto',
        minVizHeight: 16,
        minVizWidth: 8,
        maxVizHeight: 300,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'sort_desc(sum by (job, instance, account_id) (mailhost_delivery_previous_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}))',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 14,
    },
    {
      type: 'row',
      title: 'Accounts',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 42,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 15,
    },
    {
      type: 'table',
      title: 'Account status',
      description: "Each account's raw status (the simulator uses 1 enabled, 0 disabled) with its descriptive labels from mailhost_delivery_account_info.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 43,
        w: 24,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'none',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          custom: {
            align: 'auto',
            cellOptions: {
              type: 'auto',
            },
            inspect: false,
          },
        },
        overrides: [
          {
            matcher: {
              id: 'byName',
              options: 'status',
            },
            properties: [
              {
                id: 'mappings',
                value: [
                  {
                    type: 'value',
                    options: {
                      '0': {
                        text: 'Disabled',
                        color: 'red',
                        index: 0,
                      },
                      '1': {
                        text: 'Enabled',
                        color: 'green',
                        index: 1,
                      },
                    },
                  },
                ],
              },
              {
                id: 'custom.cellOptions',
                value: {
                  type: 'color-background',
                },
              },
            ],
          },
        ],
      },
      options: {
        showHeader: true,
        cellHeight: 'sm',
        footer: {
          show: false,
          reducer: [
            'sum',
          ],
          countRows: false,
        },
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_account_status{job=~"$job",instance=~"$instance",account_id=~"$account"}\n* on (job, instance, account_id) group_left (username, plan, account_type, status_detail)\nmailhost_delivery_account_info{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
      ],
      transformations: [
        {
          id: 'organize',
          options: {
            excludeByName: {
              Time: true,
              __name__: true,
            },
            indexByName: {},
            renameByName: {
              Value: 'status',
            },
          },
        },
      ],
      id: 16,
    },
    {
      type: 'row',
      title: 'Security and lifecycle',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 51,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 17,
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: "Networks in each account's IP allow-list (mailhost_delivery_allow_nets). 0 means any address may send with one of the account's Send API tokens: a leaked token can be used from anywhere.",
      fieldConfig: {
        defaults: {
          min: 0,
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'red',
                value: null,
              },
              {
                color: 'green',
                value: 1,
              },
            ],
          },
          unit: 'short',
        },
        overrides: [],
      },
      gridPos: {
        h: 8,
        w: 8,
        x: 0,
        y: 52,
      },
      id: 18,
      options: {
        displayMode: 'gradient',
        maxVizHeight: 300,
        minVizHeight: 16,
        minVizWidth: 8,
        namePlacement: 'auto',
        orientation: 'horizontal',
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        showUnfilled: true,
        sizing: 'auto',
        valueMode: 'color',
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          expr: 'mailhost_delivery_allow_nets{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          format: 'time_series',
          instant: true,
          legendFormat: '{{account_id}}',
          range: false,
          refId: 'A',
        },
      ],
      title: 'IP allow-list networks',
      type: 'bargauge',
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: "Share of each account's messages today that drew a complaint. The large mailbox providers ask bulk senders to stay under 0.1 % and never reach 0.3 %; this is the provider's figure, a proxy for the mailbox providers' own (Postmaster Tools). 0 where no complaint outcome is reported.",
      fieldConfig: {
        defaults: {
          custom: {
            drawStyle: 'line',
            fillOpacity: 10,
            lineWidth: 1,
            showPoints: 'never',
            spanNulls: false,
            stacking: {
              group: 'A',
              mode: 'none',
            },
            thresholdsStyle: {
              mode: 'dashed',
            },
          },
          min: 0,
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
              {
                color: 'red',
                value: 0.05,
              },
            ],
          },
          unit: 'percentunit',
        },
        overrides: [],
      },
      gridPos: {
        h: 8,
        w: 8,
        x: 8,
        y: 52,
      },
      id: 19,
      options: {
        legend: {
          calcs: [
            'lastNotNull',
            'max',
          ],
          displayMode: 'table',
          placement: 'bottom',
          showLegend: true,
        },
        tooltip: {
          mode: 'multi',
          sort: 'desc',
        },
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          expr: '(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account",status="complaint"}) or 0 * sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}))\n/ clamp_min(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}), 1)',
          format: 'time_series',
          instant: false,
          legendFormat: '{{account_id}}',
          range: true,
          refId: 'A',
        },
      ],
      title: 'Complaint ratio today',
      type: 'timeseries',
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: "When each account's bought extra messages expire (mailhost_delivery_extra_messages_expiration_timestamp_seconds); MailhostDeliveryExtraMessagesExpiringUnused warns when some would be left unused.",
      fieldConfig: {
        defaults: {
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          unit: 'dateTimeFromNow',
        },
        overrides: [],
      },
      gridPos: {
        h: 8,
        w: 5,
        x: 16,
        y: 52,
      },
      id: 20,
      options: {
        colorMode: 'none',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        showPercentChange: false,
        textMode: 'value_and_name',
        wideLayout: true,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          expr: 'mailhost_delivery_extra_messages_expiration_timestamp_seconds{job=~"$job",instance=~"$instance",account_id=~"$account"} * 1000',
          format: 'time_series',
          instant: true,
          legendFormat: '{{account_id}}',
          range: false,
          refId: 'A',
        },
      ],
      title: 'Bought extras expire',
      type: 'stat',
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: 'Accounts the provider has scheduled for deletion (mailhost_delivery_delete_timestamp_seconds exists for them); MailhostDeliveryAccountScheduledForDeletion warns when one still sends.',
      fieldConfig: {
        defaults: {
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
              {
                color: 'orange',
                value: 1,
              },
            ],
          },
          unit: 'short',
        },
        overrides: [],
      },
      gridPos: {
        h: 8,
        w: 3,
        x: 21,
        y: 52,
      },
      id: 21,
      options: {
        colorMode: 'value',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        showPercentChange: false,
        textMode: 'value_and_name',
        wideLayout: true,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          expr: 'count(mailhost_delivery_delete_timestamp_seconds{job=~"$job",instance=~"$instance",account_id=~"$account"}) or vector(0)',
          format: 'time_series',
          instant: true,
          legendFormat: 'Accounts',
          range: false,
          refId: 'A',
        },
      ],
      title: 'Deletions scheduled',
      type: 'stat',
    },
  ],
}
