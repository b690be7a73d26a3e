// Helpers shared by the rules and the alerts: selecting the exporter's series and naming the
// threshold series.
{
  // `metric{<selector>,<extra>}`: every raw series a rule reads goes through here, so that an
  // overridden mailhostSelector reaches every expression.
  series(config, metric, extra=''):: metric + '{' + std.join(',', std.filter(function(s) s != '', [config.mailhostSelector, extra])) + '}',

  // The global value of a threshold (one series, no labels).
  global(name):: 'mailhost:threshold:' + name,
  // The per-account values given in _config.accountOverrides (label account_id).
  override(name):: 'mailhost:threshold_override:' + name,
  // The threshold in force for each account series: its override, else the global value.
  effective(name):: 'mailhost_account:threshold:' + name,

  // A number as people write it: std.toString(0.1) gives 0.10000000000000001.
  number(n):: if n == std.floor(n) && std.abs(n) < 1e15 then '%d' % n else '%.15g' % n,

  // A Prometheus duration for a number of seconds: 1d, 12h, 90s.
  duration(seconds)::
    if seconds % 86400 == 0 then '%dd' % (seconds / 86400)
    else if seconds % 3600 == 0 then '%dh' % (seconds / 3600)
    else if seconds % 60 == 0 then '%dm' % (seconds / 60)
    else '%ds' % seconds,

  // Seconds of a single-unit Prometheus duration ('7d', '20s'): the forecast derives its
  // two-week windows from forecast.paceWindow.
  seconds(d)::
    local units = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
    local unit = d[std.length(d) - 1];
    assert std.objectHas(units, unit) : 'a duration such as 7d or 20s, not %s' % d;
    std.parseInt(std.substr(d, 0, std.length(d) - 1)) * units[unit],
}
