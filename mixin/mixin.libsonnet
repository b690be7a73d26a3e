// The mailhost_exporter monitoring mixin: prometheusRules, prometheusAlerts and
// grafanaDashboards, configured by _config (config.libsonnet).
(import 'config.libsonnet')
+ (import 'rules.libsonnet')
+ (import 'alerts.libsonnet')
+ (import 'dashboards.libsonnet')
