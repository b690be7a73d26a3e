// Grafana dashboards: the panels live in dashboards/*.libsonnet; what an operator sets in
// _config (uid prefix, title prefix, tags, refresh, time range, time zone) is added here.
local dashboard(c, panels, uid, title, timeFrom) = panels {
  // The job variable offers the jobs that mailhostSelector selects; every panel filters on it.
  templating+: {
    list: [
      if v.name == 'job'
      then v { query+: { query: 'label_values(mailhost_build_info{%s}, job)' % c.mailhostSelector } }
      else v
      for v in super.list
    ],
  },
  uid: c.dashboardUidPrefix + '-' + uid,
  title: c.dashboardTitlePrefix + title,
  tags: c.dashboardTags,
  refresh: c.dashboardRefresh,
  time: { from: timeFrom, to: 'now' },
  timezone: c.dashboardTimezone,
  // Every dashboard that carries the tags, one drop-down away.
  links: [{
    title: 'Mailhost dashboards',
    type: 'dashboards',
    tags: c.dashboardTags,
    asDropdown: true,
    includeVars: true,
    keepTime: true,
    icon: 'external link',
    targetBlank: false,
    tooltip: '',
    url: '',
  }],
};

{
  grafanaDashboards+:: {
    local c = $._config,
    'account.json': dashboard(c, import 'dashboards/account.libsonnet', 'account', 'Account', c.dashboardTimeFrom),
    'exporter-health.json': dashboard(c, import 'dashboards/exporter-health.libsonnet', 'exporter-health', 'Exporter health', c.dashboardHealthTimeFrom),
    'fleet-overview.json': dashboard(c, import 'dashboards/fleet-overview.libsonnet', 'fleet', 'Fleet overview', c.dashboardTimeFrom),
    'migrations-mailboxes.json': dashboard(c, import 'dashboards/migrations-mailboxes.libsonnet', 'migrations-mailboxes', 'Migrations and mailboxes', c.dashboardTimeFrom),
  },
}
