// The account dashboard without the fields _config sets (dashboards.libsonnet adds them).
{
  id: null,
  description: "One Delivery account in detail: quota and burn rate, plan dates, today's and yesterday's sending by outcome and per domain.",
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
        multi: false,
        includeAll: false,
        current: {},
        options: [],
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
      type: 'stat',
      title: 'Messages remaining',
      description: 'Messages the account can still send: plan quota left plus bought extras (mailhost_delivery_remaining_messages).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 1,
        w: 4,
        h: 6,
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
        colorMode: 'value',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'auto',
        wideLayout: true,
        showPercentChange: false,
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
      type: 'gauge',
      title: 'Plan used',
      description: "Plan messages used in the current period as a share of the plan's limit.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 4,
        y: 1,
        w: 4,
        h: 6,
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
        orientation: 'auto',
        showThresholdLabels: false,
        showThresholdMarkers: true,
        minVizHeight: 75,
        minVizWidth: 75,
        sizing: 'auto',
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
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 3,
    },
    {
      type: 'stat',
      title: 'Remaining share of plan',
      description: "Messages remaining (extras included) as a share of the plan's limit; yellow under 10%, red under 2%.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
        y: 1,
        w: 4,
        h: 6,
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
        colorMode: 'value',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'auto',
        wideLayout: true,
        showPercentChange: false,
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
      id: 4,
    },
    {
      type: 'stat',
      title: 'Extra messages',
      description: 'Extra messages bought in packs, in total, and those not used yet.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 1,
        w: 4,
        h: 6,
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
        colorMode: 'value',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'auto',
        wideLayout: true,
        showPercentChange: false,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_extra_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Bought',
          range: false,
          instant: true,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: 'mailhost_delivery_remaining_extra_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Not used yet',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 5,
    },
    {
      type: 'stat',
      title: 'Burn rate',
      description: 'Messages sent per hour, from the slope of mailhost_delivery_messages_sent over the rate interval.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 16,
        y: 1,
        w: 4,
        h: 6,
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
          decimals: 0,
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
        colorMode: 'value',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'auto',
        wideLayout: true,
        showPercentChange: false,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'clamp_min(deriv(mailhost_delivery_messages_sent{job=~"$job",instance=~"$instance",account_id=~"$account"}[$__rate_interval]), 0) * 3600',
          legendFormat: 'messages per hour',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 6,
    },
    {
      type: 'stat',
      title: 'Margin at renewal',
      description: "How long the messages left would last past the quota's renewal (or the plan's expiry) at the account's typical pace: the median, over three weeks, of its pace over a week (mailhost:delivery_quota_margin:seconds of the shipped recording rules, docs/mixin.md). Below zero it runs out that long before it renews; empty with no renewal date, no plan or no pace yet.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 20,
        y: 1,
        w: 4,
        h: 6,
      },
      fieldConfig: {
        defaults: {
          unit: 's',
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
                value: 259200,
              },
            ],
          },
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
        colorMode: 'value',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'auto',
        wideLayout: true,
        showPercentChange: false,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost:delivery_quota_margin:seconds{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: '{{account_id}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 7,
    },
    {
      type: 'timeseries',
      title: 'Plan used vs limit',
      description: 'Plan messages used in the current period against the messages the plan includes.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 7,
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
          expr: 'mailhost_delivery_plan_messages_used{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Used',
          range: true,
          instant: false,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: 'mailhost_delivery_plan_messages_limit{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Limit',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 8,
    },
    {
      type: 'timeseries',
      title: 'Messages remaining over time',
      description: "mailhost_delivery_remaining_messages and the bought extras still unused, over time, with the projection to the renewal: the messages that will be left when the quota renews (or the plan expires) at the account's typical pace (minus mailhost:delivery_quota_shortfall:messages of the shipped recording rules, docs/mixin.md). Below zero the account runs out before it renews.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 7,
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
          legendFormat: 'Remaining',
          range: true,
          instant: false,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: 'mailhost_delivery_remaining_extra_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Extras not used yet',
          range: true,
          instant: false,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'C',
          expr: '-mailhost:delivery_quota_shortfall:messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Left at the renewal (projection)',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 9,
    },
    {
      type: 'timeseries',
      title: 'Burn rate over time',
      description: 'Messages sent per hour, from the slope of mailhost_delivery_messages_sent over the rate interval.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 15,
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
          expr: 'clamp_min(deriv(mailhost_delivery_messages_sent{job=~"$job",instance=~"$instance",account_id=~"$account"}[$__rate_interval]), 0) * 3600',
          legendFormat: 'messages per hour',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 10,
    },
    {
      type: 'stat',
      title: 'Plan dates',
      description: 'When the plan last renewed, renews next and expires.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 15,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'dateTimeFromNow',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
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
        colorMode: 'none',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'value_and_name',
        wideLayout: true,
        showPercentChange: false,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_last_renewal_timestamp_seconds{job=~"$job",instance=~"$instance",account_id=~"$account"} * 1000',
          legendFormat: 'Last renewal',
          range: false,
          instant: true,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: 'mailhost_delivery_next_renewal_timestamp_seconds{job=~"$job",instance=~"$instance",account_id=~"$account"} * 1000',
          legendFormat: 'Next renewal',
          range: false,
          instant: true,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'C',
          expr: 'mailhost_delivery_plan_expiration_timestamp_seconds{job=~"$job",instance=~"$instance",account_id=~"$account"} * 1000',
          legendFormat: 'Expiry',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 11,
    },
    {
      type: 'row',
      title: 'Sending',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 23,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 12,
    },
    {
      type: 'bargauge',
      title: 'Today by outcome',
      description: "The account's messages today by outcome (mailhost_delivery_current_day_messages).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 24,
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
          expr: 'mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: '{{status}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 13,
    },
    {
      type: 'bargauge',
      title: 'Yesterday by outcome',
      description: "The account's messages yesterday by outcome (mailhost_delivery_previous_day_messages): final once the day is over.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
        y: 24,
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
          expr: 'mailhost_delivery_previous_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: '{{status}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 14,
    },
    {
      type: 'stat',
      title: 'Bounce and rejection ratio today',
      description: "Bounced and rejected messages as a share of all of today's messages; red above 5%.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 16,
        y: 24,
        w: 8,
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
        colorMode: 'value',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'value_and_name',
        wideLayout: true,
        showPercentChange: false,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: '(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account",status="bounced"}) or 0 * sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}))\n/ clamp_min(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}), 1)',
          legendFormat: 'Bounced',
          range: false,
          instant: true,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: '(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account",status="rejected"}) or 0 * sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}))\n/ clamp_min(sum by (job, instance, account_id) (mailhost_delivery_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"}), 1)',
          legendFormat: 'Rejected',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 15,
    },
    {
      type: 'timeseries',
      title: 'Messages per minute by outcome',
      description: "The account's sending rate by outcome, from the exact counters derived from the daily statistics (mailhost_delivery_messages_total): no drop at midnight, and the day's last minutes are counted.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 32,
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
      id: 16,
    },
    {
      type: 'timeseries',
      title: 'Today per sending domain',
      description: "Today's messages per sending domain of the account, every outcome summed (mailhost_delivery_domain_current_day_messages, top domains only).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 32,
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
          expr: 'sum by (domain) (mailhost_delivery_domain_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"})',
          legendFormat: '{{domain}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 17,
    },
    {
      type: 'table',
      title: 'Per-domain sending today by outcome',
      description: "Today's messages per sending domain and outcome.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 40,
        w: 24,
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
            align: 'auto',
            cellOptions: {
              type: 'auto',
            },
            inspect: false,
          },
        },
        overrides: [],
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
          expr: 'sum by (domain, status) (mailhost_delivery_domain_current_day_messages{job=~"$job",instance=~"$instance",account_id=~"$account"})',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
      ],
      transformations: [
        {
          id: 'groupingToMatrix',
          options: {
            columnField: 'status',
            rowField: 'domain',
            valueField: 'Value',
          },
        },
      ],
      id: 18,
    },
    {
      type: 'row',
      title: 'Account',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 48,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 19,
    },
    {
      type: 'stat',
      title: 'Status',
      description: 'The raw status (the simulator uses 1 enabled, 0 disabled), the number of sending domains, and whether suppression-list checks are ignored.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 49,
        w: 8,
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
        },
        overrides: [
          {
            matcher: {
              id: 'byName',
              options: 'Status',
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
            ],
          },
          {
            matcher: {
              id: 'byName',
              options: 'Suppression list ignored',
            },
            properties: [
              {
                id: 'mappings',
                value: [
                  {
                    type: 'value',
                    options: {
                      '0': {
                        text: 'No',
                        color: 'green',
                        index: 0,
                      },
                      '1': {
                        text: 'Yes',
                        color: 'red',
                        index: 1,
                      },
                    },
                  },
                ],
              },
            ],
          },
        ],
      },
      options: {
        reduceOptions: {
          calcs: [
            'lastNotNull',
          ],
          fields: '',
          values: false,
        },
        colorMode: 'none',
        graphMode: 'none',
        justifyMode: 'auto',
        orientation: 'auto',
        textMode: 'value_and_name',
        wideLayout: true,
        showPercentChange: false,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'A',
          expr: 'mailhost_delivery_account_status{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Status',
          range: false,
          instant: true,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: 'mailhost_delivery_domains{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Domains',
          range: false,
          instant: true,
          format: 'time_series',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'C',
          expr: 'mailhost_delivery_ignore_suppression_list{job=~"$job",instance=~"$instance",account_id=~"$account"}',
          legendFormat: 'Suppression list ignored',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 20,
    },
    {
      type: 'table',
      title: 'Account info',
      description: 'The descriptive labels of mailhost_delivery_account_info: user name, plan, type and status detail.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
        y: 49,
        w: 16,
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
        overrides: [],
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
          expr: 'mailhost_delivery_account_info{job=~"$job",instance=~"$instance",account_id=~"$account"}',
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
              Value: true,
            },
            indexByName: {},
            renameByName: {},
          },
        },
      ],
      id: 21,
    },
  ],
}
