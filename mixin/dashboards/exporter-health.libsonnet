// The exporter-health dashboard without the fields _config sets (dashboards.libsonnet adds them).
{
  id: null,
  description: 'Is the exporter getting its data? Collector and target success, data age, upstream requests, failures by reason, latency, parse problems, provider rate limits, provider outages and retries refused, build.',
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
      title: 'Collectors',
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
      title: 'Up',
      description: 'mailhost_up: 1 when the last run of every collector succeeded (every target answered). 0 until every collector has run once.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 1,
        w: 6,
        h: 6,
      },
      fieldConfig: {
        defaults: {
          unit: 'none',
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
          mappings: [
            {
              type: 'value',
              options: {
                '0': {
                  text: 'Failing',
                  color: 'red',
                  index: 0,
                },
                '1': {
                  text: 'OK',
                  color: 'green',
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
          expr: 'mailhost_up{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{instance}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 2,
    },
    {
      type: 'stat',
      title: 'Collector success',
      description: "mailhost_collector_success: 1 when the collector's last run succeeded for every target.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 6,
        y: 1,
        w: 18,
        h: 6,
      },
      fieldConfig: {
        defaults: {
          unit: 'none',
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
          mappings: [
            {
              type: 'value',
              options: {
                '0': {
                  text: 'Failing',
                  color: 'red',
                  index: 0,
                },
                '1': {
                  text: 'OK',
                  color: 'green',
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
        colorMode: 'background',
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
          expr: 'mailhost_collector_success{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{collector}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 3,
    },
    {
      type: 'timeseries',
      title: 'Data age per target',
      description: "How old each target's values are: now minus its last success (mailhost_target_last_success_timestamp_seconds).",
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
          unit: 's',
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
          expr: 'time() - mailhost_target_last_success_timestamp_seconds{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{collector}} {{target}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 4,
    },
    {
      type: 'timeseries',
      title: 'Data age in collector intervals',
      description: "Each target's data age divided by its collector's configured interval (mailhost_collector_interval_seconds). Above 3 the values are stale and the stale-data alert fires.",
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
                value: 3,
              },
            ],
          },
          min: 0,
          decimals: 1,
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
          expr: '(time() - mailhost_target_last_success_timestamp_seconds{job=~"$job",instance=~"$instance"})\n/ on (job, instance, collector) group_left ()\nmailhost_collector_interval_seconds{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{collector}} {{target}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 5,
    },
    {
      type: 'bargauge',
      title: 'Targets succeeding',
      description: "Share of each collector's targets whose last attempt succeeded (mailhost_target_success).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 15,
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
                color: 'red',
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
          expr: 'avg by (collector) (mailhost_target_success{job=~"$job",instance=~"$instance"})',
          legendFormat: '{{collector}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 6,
    },
    {
      type: 'timeseries',
      title: 'Collector duration',
      description: "How long each collector's last run took (mailhost_collector_duration_seconds).",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
        y: 15,
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
          expr: 'mailhost_collector_duration_seconds{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{collector}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 7,
    },
    {
      type: 'stat',
      title: 'Collector interval',
      description: 'The configured interval of each collector (mailhost_collector_interval_seconds).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 16,
        y: 15,
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
          expr: 'mailhost_collector_interval_seconds{job=~"$job",instance=~"$instance"}',
          legendFormat: '{{collector}}',
          range: false,
          instant: true,
          format: 'time_series',
        },
      ],
      id: 8,
    },
    {
      type: 'row',
      title: 'Upstream API',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 23,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 9,
    },
    {
      type: 'timeseries',
      title: 'API requests by code',
      description: 'Upstream requests per second by route and HTTP status (none when no answer came).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 24,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'reqps',
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
          expr: 'sum by (endpoint, code) (rate(mailhost_api_requests_total{job=~"$job",instance=~"$instance"}[$__rate_interval]))',
          legendFormat: '{{endpoint}} {{code}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 10,
    },
    {
      type: 'timeseries',
      title: 'API failures by reason',
      description: 'Failed upstream calls per second by route and reason (timeout, connect, unauthorized, rate_limited, server_error, decode, ...).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 24,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'reqps',
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
          expr: 'sum by (endpoint, reason) (rate(mailhost_api_request_failures_total{job=~"$job",instance=~"$instance"}[$__rate_interval]))',
          legendFormat: '{{endpoint}} {{reason}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 11,
    },
    {
      type: 'timeseries',
      title: 'Request latency',
      description: 'Upstream request latency per route: 50th, 90th and 99th percentile from mailhost_api_request_duration_seconds.',
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
          unit: 's',
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
          expr: 'histogram_quantile(0.5, sum by (endpoint) (rate(mailhost_api_request_duration_seconds{job=~"$job",instance=~"$instance"}[$__rate_interval])))\nor\nhistogram_quantile(0.5, sum by (endpoint, le) (rate(mailhost_api_request_duration_seconds_bucket{job=~"$job",instance=~"$instance"}[$__rate_interval])))',
          legendFormat: '{{endpoint}} p50',
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
          expr: 'histogram_quantile(0.9, sum by (endpoint) (rate(mailhost_api_request_duration_seconds{job=~"$job",instance=~"$instance"}[$__rate_interval])))\nor\nhistogram_quantile(0.9, sum by (endpoint, le) (rate(mailhost_api_request_duration_seconds_bucket{job=~"$job",instance=~"$instance"}[$__rate_interval])))',
          legendFormat: '{{endpoint}} p90',
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
          expr: 'histogram_quantile(0.99, sum by (endpoint) (rate(mailhost_api_request_duration_seconds{job=~"$job",instance=~"$instance"}[$__rate_interval])))\nor\nhistogram_quantile(0.99, sum by (endpoint, le) (rate(mailhost_api_request_duration_seconds_bucket{job=~"$job",instance=~"$instance"}[$__rate_interval])))',
          legendFormat: '{{endpoint}} p99',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 12,
    },
    {
      type: 'timeseries',
      title: 'Parse problems',
      description: 'Fields whose shape could not be read, per route (mailhost_parse_problems_total): the value was skipped. Each path is logged once at warn.',
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
          expr: 'sum by (endpoint) (increase(mailhost_parse_problems_total{job=~"$job",instance=~"$instance"}[$__rate_interval]))',
          legendFormat: '{{endpoint}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 13,
    },
    {
      type: 'row',
      title: 'Provider rate limits',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 40,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 16,
    },
    {
      type: 'timeseries',
      title: 'Allowed and needed request rate',
      description: "Per tenant: the requests per second its collectors need to refresh every target once per interval (needed: mailhost_api_pacer_demand), and the rate its pacer lets through (allowed, dashed: mailhost_api_pacer_rate), learned from the provider's 429s and rate-limit headers or set by rate_limit. No allowed line while the provider has never limited the token. Needed above allowed: each account is refreshed every ceil(needed / allowed) intervals.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 41,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'reqps',
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
              options: '.*allowed$',
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
          expr: 'label_replace(mailhost_api_pacer_demand{job=~"$job",instance=~"$instance"}, "series", "needed", "", "")\nor\nlabel_replace(mailhost_api_pacer_rate{job=~"$job",instance=~"$instance"}, "series", "allowed", "", "")',
          legendFormat: '{{tenant}} {{series}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 17,
    },
    {
      type: 'timeseries',
      title: 'Time waiting on the pacer',
      description: "Seconds per second that each tenant's calls spent waiting for its pacer: its rate, and pauses the provider asked for (mailhost_api_pacer_wait_seconds_total). Calls waiting at the same time add up, so it can exceed one second per second.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 41,
        w: 12,
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
          expr: 'sum by (tenant) (rate(mailhost_api_pacer_wait_seconds_total{job=~"$job",instance=~"$instance"}[$__rate_interval]))',
          legendFormat: '{{tenant}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 18,
    },
    {
      type: 'timeseries',
      title: '429 answers per tenant',
      description: 'Answers HTTP 429 per second, per tenant (mailhost_api_request_failures_total, reason rate_limited). The pacer probes for a raised limit now and then, so an occasional 429 is expected; a steady share of the calls is what the rate-limit alert watches.',
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
          unit: 'reqps',
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
          expr: 'sum by (tenant) (rate(mailhost_api_request_failures_total{job=~"$job",instance=~"$instance",reason="rate_limited"}[$__rate_interval]))',
          legendFormat: '{{tenant}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 19,
    },
    {
      type: 'timeseries',
      title: 'Tokens paused by the provider',
      description: 'Tokens the provider has paused (a Retry-After, or an exhausted X-RateLimit-Remaining or RateLimit r=0) at any time in each interval, stacked: the height is how many tenants were paused (mailhost_api_pacer_paused).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 8,
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
          min: 0,
          decimals: 0,
          custom: {
            drawStyle: 'line',
            lineInterpolation: 'stepAfter',
            lineWidth: 1,
            fillOpacity: 10,
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
          expr: 'max by (tenant) (max_over_time(mailhost_api_pacer_paused{job=~"$job",instance=~"$instance"}[$__rate_interval]))',
          legendFormat: '{{tenant}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 20,
    },
    {
      type: 'timeseries',
      title: 'Deferred targets',
      description: "Targets the last run of each collector did not reach before its deadline because of the tenant's rate limit (mailhost_collector_deferred_targets); they keep their values and go first next run.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 16,
        y: 49,
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
          decimals: 0,
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
          expr: 'sum by (tenant, collector) (mailhost_collector_deferred_targets{job=~"$job",instance=~"$instance"})',
          legendFormat: '{{tenant}} {{collector}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 21,
    },
    {
      type: 'row',
      title: 'Build',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 57,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 14,
    },
    {
      type: 'table',
      title: 'Build info',
      description: 'Version, revision and compiler of each exporter instance (mailhost_build_info).',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 58,
        w: 24,
        h: 5,
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
          expr: 'mailhost_build_info{job=~"$job",instance=~"$instance"}',
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
      type: 'row',
      title: 'Failing targets',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 63,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 22,
    },
    {
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      description: 'Targets whose last attempt failed, by collector and reason (mailhost_target_failure_info: one series per failing target). The landing page links each failing target to /probe?target=ID&collector=NAME&debug=true, the trail of its last failed poll. 0 while nothing fails.',
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
              mode: 'off',
            },
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
          unit: 'short',
        },
        overrides: [],
      },
      gridPos: {
        h: 8,
        w: 24,
        x: 0,
        y: 64,
      },
      id: 23,
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
          expr: 'sum by (collector, reason) (mailhost_target_failure_info{job=~"$job",instance=~"$instance"}) or vector(0)',
          format: 'time_series',
          instant: false,
          legendFormat: '{{collector}} {{reason}}',
          range: true,
          refId: 'A',
        },
      ],
      title: 'Failing targets by reason',
      type: 'timeseries',
    },
    {
      type: 'row',
      title: 'Pace per endpoint',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 72,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 24,
    },
    {
      type: 'timeseries',
      title: 'Pace of each endpoint',
      description: "Per tenant and endpoint: the requests per second the provider allows that endpoint on its own (mailhost_api_pacer_endpoint_rate), learned from 429s that stayed on it while the token's other endpoints succeeded, from its own rate-limit headers, or set by endpoint_rate_limits. No line for an endpoint not limited on its own; a limit of the whole token is the allowed line of 'Allowed and needed request rate'.",
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 73,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'reqps',
          min: 0,
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
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
            'min',
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
          expr: 'max by (tenant, endpoint) (mailhost_api_pacer_endpoint_rate{job=~"$job",instance=~"$instance"})',
          legendFormat: '{{tenant}} {{endpoint}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 25,
    },
    {
      type: 'timeseries',
      title: 'Targets refused on their own',
      description: 'Per tenant and endpoint: targets whose HTTP 429s are their own (mailhost_api_throttled_targets): refused again and again while their neighbours on the endpoint succeed. Each backs off alone, fails rate_limited and keeps its values until max_age, and slows no one else. Which ones: the landing page, or /probe?target=ID&debug=true. 0 while none is.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 73,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          min: 0,
          decimals: 0,
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
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
          expr: 'sum by (tenant, endpoint) (mailhost_api_throttled_targets{job=~"$job",instance=~"$instance"})',
          legendFormat: '{{tenant}} {{endpoint}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 26,
    },
    {
      type: 'row',
      title: 'Provider health',
      collapsed: false,
      gridPos: {
        x: 0,
        y: 81,
        w: 24,
        h: 1,
      },
      panels: [],
      id: 27,
    },
    {
      type: 'timeseries',
      title: 'Endpoint outages',
      description: 'Per tenant and endpoint: 1 while every call of the endpoint fails (5xx without Retry-After, timeouts, refused connections, no answer between; mailhost_api_endpoint_outage). Its calls are paused and one probe asks after a cool-down that doubles while it fails (mailhost_api_endpoint_next_probe_timestamp_seconds); the first answer lifts it. Targets not called fail with reason outage and keep their values until max_age. 0 while the endpoint answers.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 0,
        y: 82,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'short',
          min: 0,
          decimals: 0,
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
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
          expr: 'max by (tenant, endpoint) (mailhost_api_endpoint_outage{job=~"$job",instance=~"$instance"})',
          legendFormat: '{{tenant}} {{endpoint}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 28,
    },
    {
      type: 'timeseries',
      title: 'Retries refused by the budget',
      description: 'Per tenant and endpoint, per second: failed calls not retried because the retry budget of the endpoint was spent (mailhost_api_retries_refused_total). Retries are at most a tenth of first attempts over 10 s, plus 5: while the provider fails, the exporter asks less, not more. Beside it, mailhost_api_retries_total counts the retries that went.',
      datasource: {
        type: 'prometheus',
        uid: '${datasource}',
      },
      gridPos: {
        x: 12,
        y: 82,
        w: 12,
        h: 8,
      },
      fieldConfig: {
        defaults: {
          unit: 'reqps',
          min: 0,
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: 10,
            showPoints: 'never',
            spanNulls: false,
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
          expr: 'sum by (tenant, endpoint) (rate(mailhost_api_retries_refused_total{job=~"$job",instance=~"$instance"}[$__rate_interval]))',
          legendFormat: '{{tenant}} {{endpoint}}',
          range: true,
          instant: false,
          format: 'time_series',
        },
      ],
      id: 29,
    },
  ],
}
