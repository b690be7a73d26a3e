// The migrations-mailboxes dashboard without the fields _config sets (dashboards.libsonnet adds them).
{
  id: null,
  description: 'Mailbox migrations: progress, accounts by state, errors, status. Mailboxes: quota, outbound limit, archiving, last login, expired passwords.',
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
    ],
  },
  panels: [
    {
      type: 'row',
      title: 'Migrations',
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
      title: 'Messages migrated',
      description: 'Messages moved so far as a share of the messages to move, per migration.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 1,
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
                color: 'blue',
                value: null,
              },
              {
                color: 'green',
                value: 1,
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
          expr: 'mailhost_migration_messages_migrated{job=~"$job",instance=~"$instance"}\n/ (mailhost_migration_messages{job=~"$job",instance=~"$instance"} > 0)',
          legendFormat: '{{migration}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 2,
    },
    {
      type: 'bargauge',
      title: 'Bytes migrated',
      description: 'Size moved so far as a share of the size to move, per migration.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 1,
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
                color: 'blue',
                value: null,
              },
              {
                color: 'green',
                value: 1,
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
          expr: 'mailhost_migration_migrated_bytes{job=~"$job",instance=~"$instance"}\n/ (mailhost_migration_size_bytes{job=~"$job",instance=~"$instance"} > 0)',
          legendFormat: '{{migration}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 3,
    },
    {
      type: 'timeseries',
      title: 'Messages migrated vs total',
      description: 'Messages moved so far and messages to move, per migration.',
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
        overrides: [
          {
            matcher: {
              id: 'byRegexp',
              options: '.* total',
            },
            properties: [
              {
                id: 'custom.lineStyle',
                value: {
                  fill: 'dash',
                  dash: [
                    10,
                    10,
                  ],
                },
              },
            ],
          },
        ],
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
          expr: 'mailhost_migration_messages_migrated{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{migration}} migrated',
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
          expr: 'mailhost_migration_messages{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{migration}} total',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 4,
    },
    {
      type: 'timeseries',
      title: 'Bytes migrated vs total',
      description: 'Size moved so far and size to move, per migration.',
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
          unit: 'bytes',
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
        overrides: [
          {
            matcher: {
              id: 'byRegexp',
              options: '.* total',
            },
            properties: [
              {
                id: 'custom.lineStyle',
                value: {
                  fill: 'dash',
                  dash: [
                    10,
                    10,
                  ],
                },
              },
            ],
          },
        ],
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
          expr: 'mailhost_migration_migrated_bytes{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{migration}} migrated',
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
          expr: 'mailhost_migration_size_bytes{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{migration}} total',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 5,
    },
    {
      type: 'bargauge',
      title: 'Accounts by state',
      description: 'Accounts of each migration by state (pending, running, completed, failed, ...).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 17,
        w: 8,
        h: 10,
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
          expr: 'sum by (migration, state) (mailhost_migration_accounts{job=~"$job",instance=~"$instance"})',
          legendFormat: '{{migration}} {{state}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 6,
    },
    {
      type: 'stat',
      title: 'Errors',
      description: 'Errors met by each migration (mailhost_migration_errors).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
        y: 17,
        w: 4,
        h: 10,
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
              {
                color: 'red',
                value: 1,
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
          expr: 'mailhost_migration_errors{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{migration}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 7,
    },
    {
      type: 'table',
      title: 'Status',
      description: 'The current status of each migration, when it started and how long ago its statistics last changed (a migration that stops changing may be stalled).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 17,
        w: 12,
        h: 10,
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
              options: 'last change',
            },
            properties: [
              {
                id: 'unit',
                value: 's',
              },
            ],
          },
          {
            matcher: {
              id: 'byName',
              options: 'started',
            },
            properties: [
              {
                id: 'unit',
                value: 'dateTimeFromNow',
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
          expr: 'mailhost_migration_status{job=~"$job",instance=~"$instance"} == 1',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: 'time() - mailhost_migration_updated_timestamp_seconds{job=~"$job",instance=~"$instance"}',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'C',
          expr: 'mailhost_migration_started_timestamp_seconds{job=~"$job",instance=~"$instance"} * 1000',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
      ],
      transformations: [
        {
          id: 'merge',
          options: {},
        },
        {
          id: 'organize',
          options: {
            excludeByName: {
              Time: true,
              __name__: true,
              'Value #A': true,
            },
            indexByName: {},
            renameByName: {
              'Value #B': 'last change',
              'Value #C': 'started',
            },
          },
        },
      ],
      id: 8,
    },
    {
      type: 'table',
      title: 'Other statistics',
      description: "Every other numeric statistic of each migration's aggregate, by dotted key (mailhost_migration_aggregate).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 27,
        w: 24,
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
          expr: 'mailhost_migration_aggregate{job=~"$job",instance=~"$instance"}',
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
            renameByName: {},
          },
        },
      ],
      id: 9,
    },
    {
      type: 'row',
      title: 'Mailboxes',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 33,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 10,
    },
    {
      type: 'bargauge',
      title: 'Mailbox quota used',
      description: 'Space used as a share of the space allowed, per mailbox; yellow above 90%.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 34,
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
                value: 1,
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
          expr: '(mailhost_mailbox_quota_used_bytes{job=~"$job",instance=~"$instance"}\n/ (mailhost_mailbox_quota_limit_bytes{job=~"$job",instance=~"$instance"} > 0))\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{address}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 11,
    },
    {
      type: 'bargauge',
      title: 'Outbound messages vs limit',
      description: "Messages sent in the current outbound period as a share of the period's limit; at 100% the mailbox cannot send until the limit resets.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 34,
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
                value: 0.8,
              },
              {
                color: 'red',
                value: 1,
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
          expr: '(mailhost_mailbox_outbound_messages{job=~"$job",instance=~"$instance"}\n/ (mailhost_mailbox_outbound_limit{job=~"$job",instance=~"$instance"} > 0))\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{address}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 12,
    },
    {
      type: 'timeseries',
      title: 'Mailbox space used',
      description: 'Space used by each mailbox, and in its vault.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 42,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'bytes',
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
          expr: 'mailhost_mailbox_quota_used_bytes{job=~"$job",instance=~"$instance"}\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{address}}',
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
          expr: 'mailhost_mailbox_vault_used_bytes{job=~"$job",instance=~"$instance"}\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{address}} vault',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 13,
    },
    {
      type: 'timeseries',
      title: 'Outbound messages',
      description: 'Messages sent in the current outbound period, per mailbox.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 42,
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
          expr: 'mailhost_mailbox_outbound_messages{job=~"$job",instance=~"$instance"}\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{address}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 14,
    },
    {
      type: 'table',
      title: 'Archive status',
      description: 'The archiving state of each mailbox (active, activating, deactivating, disabled, or another reported state).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 50,
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
          expr: '(mailhost_mailbox_archive_status{job=~"$job",instance=~"$instance"} == 1)\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
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
      id: 15,
    },
    {
      type: 'bargauge',
      title: 'Last login age',
      description: 'Time since each mailbox last logged in. A mailbox that never logged in has no bar.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
        y: 50,
        w: 8,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 's',
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
              {
                color: 'yellow',
                value: 2592000,
              },
              {
                color: 'red',
                value: 7776000,
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
          expr: '(time() - mailhost_mailbox_last_auth_timestamp_seconds{job=~"$job",instance=~"$instance"})\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{address}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 16,
    },
    {
      type: 'stat',
      title: 'Password expired',
      description: "Whether each mailbox's password has expired (mailhost_mailbox_password_expired).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 16,
        y: 50,
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
              {
                color: 'red',
                value: 1,
              },
            ],
          },
          mappings: [
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
          expr: 'mailhost_mailbox_password_expired{job=~"$job",instance=~"$instance"}\n* on (job, instance, mailbox) group_left (address)\nmailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{address}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 17,
    },
    {
      type: 'table',
      title: 'Mailboxes',
      description: 'Every mailbox with its address, domain and status, messages stored and when its outbound count resets.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 58,
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
              options: 'messages',
            },
            properties: [
              {
                id: 'unit',
                value: 'short',
              },
            ],
          },
          {
            matcher: {
              id: 'byName',
              options: 'outbound reset',
            },
            properties: [
              {
                id: 'unit',
                value: 'dateTimeFromNow',
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
          expr: 'mailhost_mailbox_info{job=~"$job",instance=~"$instance"}',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'B',
          expr: 'mailhost_mailbox_messages{job=~"$job",instance=~"$instance"}',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          refId: 'C',
          expr: 'mailhost_mailbox_outbound_limit_reset_timestamp_seconds{job=~"$job",instance=~"$instance"} * 1000',
          legendFormat: '__auto',
          range: false,
          instant: true,
          format: 'table',
        },
      ],
      transformations: [
        {
          id: 'merge',
          options: {},
        },
        {
          id: 'organize',
          options: {
            excludeByName: {
              Time: true,
              __name__: true,
              'Value #A': true,
            },
            indexByName: {},
            renameByName: {
              'Value #B': 'messages',
              'Value #C': 'outbound reset',
            },
          },
        },
      ],
      id: 18,
    },
    {
      type: 'row',
      title: 'Access and second factors',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 66,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 19,
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: 'Enabled team members who may use the Management API and sign in without a second factor (mailhost_team_member_otp_enabled, mailhost_team_member_api_access_blocked, mailhost_team_member_enabled): a leaked password is enough to act for the customer.',
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
                color: 'red',
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
        w: 6,
        x: 0,
        y: 67,
      },
      id: 20,
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
          expr: 'count((mailhost_team_member_otp_enabled{job=~"$job",instance=~"$instance"} == 0) and (mailhost_team_member_api_access_blocked{job=~"$job",instance=~"$instance"} == 0) and (mailhost_team_member_enabled{job=~"$job",instance=~"$instance"} == 1)) or vector(0)',
          format: 'time_series',
          instant: true,
          legendFormat: 'Team members',
          range: false,
          refId: 'A',
        },
      ],
      title: 'Team members: API without a second factor',
      type: 'stat',
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: 'Mailboxes that may use the API while neither they nor their domain require a second factor (mailhost_mailbox_api_enabled, mailhost_mailbox_otp_enabled, mailhost_mailbox_otp_forced, mailhost_mailbox_domain_otp_forced).',
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
                color: 'red',
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
        w: 6,
        x: 6,
        y: 67,
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
          expr: 'count((mailhost_mailbox_api_enabled{job=~"$job",instance=~"$instance"} == 1) and (mailhost_mailbox_otp_enabled{job=~"$job",instance=~"$instance"} == 0) and (mailhost_mailbox_otp_forced{job=~"$job",instance=~"$instance"} == 0) and (mailhost_mailbox_domain_otp_forced{job=~"$job",instance=~"$instance"} == 0)) or vector(0)',
          format: 'time_series',
          instant: true,
          legendFormat: 'Mailboxes',
          range: false,
          refId: 'A',
        },
      ],
      title: 'Mailboxes: API without a second factor',
      type: 'stat',
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: "Each team member polled (mailhost_team_member_info): status, type, language and customer; the name and email address only when the collector's identity_labels is true.",
      fieldConfig: {
        defaults: {
          custom: {
            align: 'auto',
            cellOptions: {
              type: 'auto',
            },
            inspect: false,
          },
          thresholds: {
            mode: 'absolute',
            steps: [
              {
                color: 'green',
                value: null,
              },
            ],
          },
          unit: 'none',
        },
        overrides: [
          {
            matcher: {
              id: 'byName',
              options: 'messages',
            },
            properties: [
              {
                id: 'unit',
                value: 'short',
              },
            ],
          },
          {
            matcher: {
              id: 'byName',
              options: 'outbound reset',
            },
            properties: [
              {
                id: 'unit',
                value: 'dateTimeFromNow',
              },
            ],
          },
        ],
      },
      gridPos: {
        h: 8,
        w: 12,
        x: 12,
        y: 67,
      },
      id: 22,
      options: {
        cellHeight: 'sm',
        footer: {
          countRows: false,
          reducer: [
            'sum',
          ],
          show: false,
        },
        showHeader: true,
      },
      targets: [
        {
          datasource: {
            type: 'prometheus',
            uid: '${datasource}',
          },
          expr: 'mailhost_team_member_info{job=~"$job",instance=~"$instance"}',
          format: 'table',
          instant: true,
          legendFormat: '__auto',
          range: false,
          refId: 'A',
        },
      ],
      title: 'Team members',
      transformations: [
        {
          id: 'merge',
          options: {},
        },
        {
          id: 'organize',
          options: {
            excludeByName: {
              Time: true,
              'Value #A': true,
              __name__: true,
            },
            indexByName: {},
            renameByName: {
              'Value #B': 'messages',
              'Value #C': 'outbound reset',
            },
          },
        },
      ],
      type: 'table',
    },
  ],
}
