// The files generated from the mixin, by path from the repository root; mixin/build.sh writes
// them with `jsonnet -S -m`. `config` (top-level argument) is merged into _config, which is how
// the tests render with another selector or per-account thresholds. `parts='rules'` writes the
// rule files alone: the dashboards take most of a render's time, and a test of the rules needs
// none of them.
function(config={}, parts='all')
  assert parts == 'all' || parts == 'rules' : "parts is 'all' or 'rules', not '%s'" % parts;
  local mixin = (import 'mixin.libsonnet') + { _config+:: config };

  // YAML for rule files, written by hand because this jsonnet's std.manifestYamlDoc quotes a
  // multi-line expression into one line; a block scalar keeps each expression readable.
  // Numbers as people write them: jsonnet's own manifest prints 0.1 as 0.10000000000000001.
  local number(n) = if n == std.floor(n) && std.abs(n) < 1e15 then '%d' % n else '%.15g' % n;
  // Sets as objects: a field lookup is one step, a search of an array one per element.
  local set(chars) = { [ch]: true for ch in std.stringChars(chars) };
  local plainChars = set('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/#-');
  local letters = set('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ');
  // A name, duration or path needs no quotes; anything YAML could read otherwise gets them.
  local plain(v) =
    std.length(v) > 0
    && std.length([ch for ch in std.stringChars(v) if !std.objectHas(plainChars, ch)]) == 0
    && std.length([ch for ch in std.stringChars(v) if std.objectHas(letters, ch)]) > 0
    && !std.member(['true', 'false', 'yes', 'no', 'on', 'off', 'null'], std.asciiLower(v))
    && !std.member(['-', '.', ':', '#'], v[0]);
  local scalar(v, indent) =
    if std.isString(v) && std.length(std.findSubstr('\n', std.rstripChars(v, '\n'))) > 0 then
      '|-\n' + std.join('\n', [indent + l for l in std.split(std.rstripChars(v, '\n'), '\n')])
    else if std.isString(v) && plain(v) then v
    else if std.isString(v) then std.escapeStringJson(v)
    else if std.isNumber(v) then number(v)
    else std.toString(v);
  // JSON for dashboards, two-space indent, numbers as above.
  local json(v, indent) =
    if std.isObject(v) then
      if std.length(std.objectFields(v)) == 0 then '{}'
      else '{\n' + std.join(',\n', [
        indent + '  ' + std.escapeStringJson(k) + ': ' + json(v[k], indent + '  ')
        for k in std.objectFields(v)
      ]) + '\n' + indent + '}'
    else if std.isArray(v) then
      if std.length(v) == 0 then '[]'
      else '[\n' + std.join(',\n', [indent + '  ' + json(e, indent + '  ') for e in v]) + '\n' + indent + ']'
    else if std.isString(v) then std.escapeStringJson(v)
    else if std.isNumber(v) then number(v)
    else if v == null then 'null'
    else std.toString(v);
  // Annotations read best in the order an operator reads them.
  local keyOrder = ['summary', 'description', 'figure', 'time_left', 'quota_resets', 'shortfall', 'runbook_url'];
  local ordered(o) =
    [k for k in keyOrder if std.objectHas(o, k)] + [k for k in std.objectFields(o) if !std.member(keyOrder, k)];
  local mapping(o, indent) =
    std.join('\n', [
      indent + k + ':' + (
        if std.isObject(o[k]) then '\n' + mapping(o[k], indent + '  ')
        else ' ' + scalar(o[k], indent + '  ')
      )
      for k in ordered(o)
    ]);
  // Rule keys in the order Prometheus documents them, not alphabetical.
  local ruleKeys = ['record', 'alert', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations'];
  local rule(r) =
    local keys = [k for k in ruleKeys if std.objectHas(r, k)];
    assert std.length(keys) == std.length(std.objectFields(r)) : 'unexpected key in ' + std.toString(r);
    std.join('\n', [
      (if i == 0 then '      - ' else '        ') + keys[i] + ':' + (
        if std.isObject(r[keys[i]]) then '\n' + mapping(r[keys[i]], '          ')
        else ' ' + scalar(r[keys[i]], '          ')
      )
      for i in std.range(0, std.length(keys) - 1)
    ]);
  local ruleFile(header, groups) =
    header + 'groups:\n' + std.join('\n', [
      '  - name: ' + scalar(g.name, '') + (if std.objectHas(g, 'interval') then '\n    interval: ' + scalar(g.interval, '') else '') + '\n    rules:' + (
        if std.length(g.rules) == 0 then ' []\n'
        else '\n' + std.join('\n', [rule(r) for r in g.rules]) + '\n'
      )
      for g in groups
    ]);
  local generated = '# Generated from mixin/ by mixin/build.sh: edit the mixin, not this file.\n';

  {
    'prometheus/rules.yml': ruleFile(
      generated
      + '# Recording rules and thresholds of mailhost_exporter; docs/runbook.md documents each\n'
      + '# threshold, docs/mixin.md how to set them (globally or per account).\n',
      mixin.prometheusRules.groups
    ),
    'prometheus/alerts.yml': ruleFile(
      generated
      + '# Alerts of mailhost_exporter; docs/runbook.md explains each. runbook_url is relative to the\n'
      + '# repository root unless _config.runbookUrlPrefix says otherwise.\n',
      mixin.prometheusAlerts.groups
    ),
  } + if parts == 'rules' then {} else {
    ['dashboards/' + name]: json(mixin.grafanaDashboards[name], '') + '\n'
    for name in std.objectFields(mixin.grafanaDashboards)
  }
