//! Grafana dashboards: every `dashboards/*.json` follows the conventions that let one provisioned
//! file work against any Prometheus that scrapes the exporter, with or without our rules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

/// The dashboards we ship; more may follow, these may not go.
const REQUIRED_FILES: [&str; 4] = [
    "fleet-overview.json",
    "account.json",
    "migrations-mailboxes.json",
    "exporter-health.json",
];
/// Visualisations that exist in current Grafana; `graph` and `singlestat` are gone.
const PANEL_TYPES: [&str; 5] = ["timeseries", "stat", "gauge", "bargauge", "table"];
const DATASOURCE_UID: &str = "${datasource}";
const JOB_FILTER: &str = r#"job=~"$job""#;
const INSTANCE_FILTER: &str = r#"instance=~"$instance""#;
const ACCOUNT_FILTER: &str = r#"account_id=~"$account""#;
/// The jobs the mixin's `mailhostSelector` selects (its default, `job="mailhost"`).
const JOB_QUERY: &str = r#"label_values(mailhost_build_info{job="mailhost"}, job)"#;
const INSTANCE_QUERY: &str = r#"label_values(mailhost_build_info{job=~"$job"}, instance)"#;
const ACCOUNT_QUERY: &str = r#"label_values(mailhost_delivery_account_info{job=~"$job",instance=~"$instance"}, account_id)"#;
/// Grafana's own variables a query may use.
const BUILTIN_VARIABLES: [&str; 4] = ["__rate_interval", "__interval", "__range", "__range_s"];

struct Dashboard {
    file: String,
    json: Value,
}

impl Dashboard {
    fn variable(&self, name: &str) -> Option<&Value> {
        variables(&self.json)
            .into_iter()
            .find(|v| v["name"].as_str() == Some(name))
    }

    /// Every `(panel label, expr)` of the dashboard, rows' nested panels included.
    fn exprs(&self) -> Vec<(String, String)> {
        panels(&self.json)
            .into_iter()
            .flat_map(|p| {
                let label = panel_label(&self.file, p);
                targets(p)
                    .iter()
                    .filter_map(|t| t["expr"].as_str())
                    .map(move |e| (label.clone(), e.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

fn root() -> PathBuf {
    crate::helpers::repo_root()
}

/// Every `dashboards/*.json`, parsed; a file that does not parse fails here, by name.
fn dashboards() -> Vec<Dashboard> {
    let dir = root().join("dashboards");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{file} is not valid JSON: {e}"));
            Dashboard { file, json }
        })
        .collect()
}

fn variables(dashboard: &Value) -> Vec<&Value> {
    dashboard["templating"]["list"]
        .as_array()
        .map(|l| l.iter().collect())
        .unwrap_or_default()
}

/// Top-level panels and the panels inside (collapsed) rows.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

fn targets(panel: &Value) -> &[Value] {
    panel["targets"].as_array().map_or(&[], Vec::as_slice)
}

fn panel_label(file: &str, panel: &Value) -> String {
    format!(
        "{file}: panel {} {:?}",
        panel["id"],
        panel["title"].as_str().unwrap_or("<untitled>")
    )
}

/// A variable's query: a plain string, or the `{"query": ...}` object of newer Grafana.
fn variable_query(variable: &Value) -> Option<&str> {
    variable["query"]
        .as_str()
        .or_else(|| variable["query"]["query"].as_str())
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The expression with the contents of string literals blanked, so that names inside label
/// values are not taken for metrics; byte offsets are kept.
fn without_strings(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                    continue;
                }
                out.extend(std::iter::repeat_n(' ', c.len_utf8()));
            }
            None => {
                if matches!(c, '"' | '\'' | '`') {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// Every identifier of the expression outside string literals (metric, function, label and
/// keyword names alike), with its byte offset.
fn identifiers(expr: &str) -> Vec<(usize, String)> {
    let code = without_strings(expr);
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in code.char_indices().chain([(code.len(), ' ')]) {
        match (start, is_ident(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                let word = &code[s..i];
                // Numbers and durations (`30s`, `1e-9`) are not names.
                if !word.starts_with(|c: char| c.is_ascii_digit()) {
                    out.push((s, word.to_owned()));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Every metric selector of ours: the metric name and its `{...}` matchers, if any.
fn selectors(expr: &str) -> Vec<(String, Option<String>)> {
    identifiers(expr)
        .into_iter()
        .filter(|(_, name)| name.starts_with("mailhost_"))
        .map(|(at, name)| {
            let rest = expr[at + name.len()..].trim_start();
            let matchers = rest
                .strip_prefix('{')
                .and_then(|r| r.find('}').map(|end| r[..end].to_owned()));
            (name, matchers)
        })
        .collect()
}

/// The `$name` and `${name}` variables an expression uses.
fn used_variables(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in expr.match_indices('$') {
        let rest = &expr[i + 1..];
        let rest = rest.strip_prefix('{').unwrap_or(rest);
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        out.insert(name);
    }
    out
}

/// The metrics of `docs/metrics.md` (first column of its tables) with their labels; a
/// histogram brings its `_bucket`, `_sum` and `_count` series.
fn documented_metrics() -> BTreeMap<String, BTreeSet<String>> {
    let path = root().join("docs/metrics.md");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with("`mailhost_") {
            continue;
        }
        let name = cells[1].trim_matches('`').to_owned();
        let labels: BTreeSet<String> = cells[3]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        if cells[2] == "histogram" {
            let mut with_le = labels.clone();
            with_le.insert("le".to_owned());
            out.insert(format!("{name}_bucket"), with_le);
            out.insert(format!("{name}_sum"), labels.clone());
            out.insert(format!("{name}_count"), labels.clone());
        }
        out.insert(name, labels);
    }
    assert!(
        out.len() > 40,
        "docs/metrics.md: expected its metric tables, found {} names",
        out.len()
    );
    out
}

/// Panics with every problem found, one a line.
fn assert_none(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_four_dashboards_exist_and_every_file_parses() {
    let dashboards = dashboards();
    assert!(
        dashboards.len() >= REQUIRED_FILES.len(),
        "expected at least {} dashboards, found {}",
        REQUIRED_FILES.len(),
        dashboards.len()
    );
    let files: BTreeSet<&str> = dashboards.iter().map(|d| d.file.as_str()).collect();
    assert_none(
        REQUIRED_FILES
            .iter()
            .filter(|f| !files.contains(*f))
            .map(|f| format!("dashboards/{f} is missing"))
            .collect(),
    );
}

#[test]
fn every_dashboard_has_its_own_fixed_uid_and_no_id() {
    let mut problems = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for d in dashboards() {
        if !d.json["id"].is_null() {
            problems.push(format!(
                "{}: \"id\" must be null, not {}",
                d.file, d.json["id"]
            ));
        }
        let Some(uid) = d.json["uid"].as_str() else {
            problems.push(format!("{}: no fixed \"uid\"", d.file));
            continue;
        };
        // Grafana's own limit: at most 40 characters, letters, digits, '-' and '_'.
        let valid = !uid.is_empty()
            && uid.len() <= 40
            && uid
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            problems.push(format!(
                "{}: uid {uid:?} is not a valid Grafana uid",
                d.file
            ));
        }
        if let Some(other) = seen.insert(uid.to_owned(), d.file.clone()) {
            problems.push(format!("{}: uid {uid:?} is also used by {other}", d.file));
        }
        if d.json["title"].as_str().is_none_or(str::is_empty) {
            problems.push(format!("{}: no title", d.file));
        }
    }
    assert_none(problems);
}

#[test]
fn every_dashboard_can_be_provisioned_from_its_file() {
    let mut problems = Vec::new();
    for d in dashboards() {
        for key in ["__inputs", "__requires"] {
            if d.json.get(key).is_some() {
                problems.push(format!(
                    "{}: {key} is for UI import only; file provisioning needs it gone",
                    d.file
                ));
            }
        }
        match d.json["schemaVersion"].as_u64() {
            Some(v) if v >= 39 => {}
            other => problems.push(format!(
                "{}: schemaVersion must be 39 or later, is {other:?}",
                d.file
            )),
        }
        // An export "for sharing externally" leaves ${DS_...} placeholders behind.
        if d.json.to_string().contains("${DS_") {
            problems.push(format!(
                "{}: a ${{DS_...}} placeholder; use ${{datasource}}",
                d.file
            ));
        }
    }
    assert_none(problems);
}

#[test]
fn every_dashboard_offers_datasource_job_and_instance_variables() {
    let mut problems = Vec::new();
    for d in dashboards() {
        match d.variable("datasource") {
            None => problems.push(format!("{}: no variable \"datasource\"", d.file)),
            Some(v) => {
                if v["type"] != "datasource" || variable_query(v) != Some("prometheus") {
                    problems.push(format!(
                        "{}: variable \"datasource\" must be of type datasource with query prometheus",
                        d.file
                    ));
                }
            }
        }
        for (name, query) in [("job", JOB_QUERY), ("instance", INSTANCE_QUERY)] {
            let Some(v) = d.variable(name) else {
                problems.push(format!("{}: no variable {name:?}", d.file));
                continue;
            };
            if v["type"] != "query" || variable_query(v) != Some(query) {
                problems.push(format!(
                    "{}: variable {name:?} must be a query variable on {query}, is {:?}",
                    d.file,
                    variable_query(v)
                ));
            }
            if v["multi"] != true || v["includeAll"] != true || v["allValue"] != ".+" {
                problems.push(format!(
                    "{}: variable {name:?} must be multi, includeAll, allValue \".+\"",
                    d.file
                ));
            }
        }
    }
    assert_none(problems);
}

#[test]
fn the_account_variable_is_multi_on_the_fleet_and_single_on_the_account_dashboard() {
    let mut problems = Vec::new();
    for d in dashboards() {
        let uses_account = d
            .exprs()
            .iter()
            .any(|(_, e)| used_variables(e).contains("account"));
        let wanted_multi = match d.file.as_str() {
            "fleet-overview.json" => Some(true),
            "account.json" => Some(false),
            _ => None,
        };
        let Some(v) = d.variable("account") else {
            if uses_account || wanted_multi.is_some() {
                problems.push(format!("{}: no variable \"account\"", d.file));
            }
            continue;
        };
        if v["type"] != "query" || variable_query(v) != Some(ACCOUNT_QUERY) {
            problems.push(format!(
                "{}: variable \"account\" must be a query variable on {ACCOUNT_QUERY}, is {:?}",
                d.file,
                variable_query(v)
            ));
        }
        let multi = v["multi"] == true;
        if multi && (v["includeAll"] != true || v["allValue"] != ".+") {
            problems.push(format!(
                "{}: a multi-value \"account\" needs includeAll and allValue \".+\"",
                d.file
            ));
        }
        if let Some(wanted) = wanted_multi {
            if multi != wanted {
                problems.push(format!(
                    "{}: variable \"account\" must be {}",
                    d.file,
                    if wanted {
                        "multi-value"
                    } else {
                        "single-value"
                    }
                ));
            }
            if !wanted && v["includeAll"] == true {
                problems.push(format!(
                    "{}: the drill-down's \"account\" picks one account, no All",
                    d.file
                ));
            }
        }
    }
    assert_none(problems);
}

#[test]
fn every_query_variable_refreshes_on_time_range_change_from_the_chosen_datasource() {
    let mut problems = Vec::new();
    for d in dashboards() {
        for v in variables(&d.json)
            .into_iter()
            .filter(|v| v["type"] == "query")
        {
            let name = &v["name"];
            if v["refresh"] != 2 {
                problems.push(format!(
                    "{}: variable {name} must have \"refresh\": 2, has {}",
                    d.file, v["refresh"]
                ));
            }
            let ds = &v["datasource"];
            let uid = ds.as_str().or_else(|| ds["uid"].as_str());
            if uid != Some(DATASOURCE_UID) {
                problems.push(format!(
                    "{}: variable {name} must query {DATASOURCE_UID}, queries {ds}",
                    d.file
                ));
            }
        }
    }
    assert_none(problems);
}

#[test]
fn every_panel_has_a_title_description_unit_prometheus_datasource_and_current_type() {
    let mut problems = Vec::new();
    for d in dashboards() {
        for p in panels(&d.json) {
            let label = panel_label(&d.file, p);
            let kind = p["type"].as_str().unwrap_or("");
            if kind == "row" {
                if !targets(p).is_empty() {
                    problems.push(format!("{label}: a row only groups, it has no queries"));
                }
                continue;
            }
            if !PANEL_TYPES.contains(&kind) {
                problems.push(format!(
                    "{label}: type {kind:?} is not one of {PANEL_TYPES:?}"
                ));
            }
            for key in ["title", "description"] {
                if p[key].as_str().is_none_or(|s| s.trim().is_empty()) {
                    problems.push(format!("{label}: no {key}"));
                }
            }
            if p["fieldConfig"]["defaults"]["unit"]
                .as_str()
                .is_none_or(str::is_empty)
            {
                problems.push(format!("{label}: no fieldConfig.defaults.unit"));
            }
            let ds = &p["datasource"];
            if ds["type"] != "prometheus" || ds["uid"] != DATASOURCE_UID {
                problems.push(format!(
                    "{label}: datasource must be {{\"type\":\"prometheus\",\"uid\":\"{DATASOURCE_UID}\"}}, is {ds}"
                ));
            }
            if targets(p).is_empty() {
                problems.push(format!("{label}: no query"));
            }
            for t in targets(p) {
                if t["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                    problems.push(format!("{label}: target {} has no expr", t["refId"]));
                }
                if let Some(tds) = t.get("datasource")
                    && tds["uid"] != DATASOURCE_UID
                {
                    problems.push(format!(
                        "{label}: target {} queries {tds}, not {DATASOURCE_UID}",
                        t["refId"]
                    ));
                }
            }
        }
    }
    assert_none(problems);
}

#[test]
fn every_metric_selector_is_filtered_by_job_and_instance() {
    let mut problems = Vec::new();
    for d in dashboards() {
        for (label, expr) in d.exprs() {
            for (metric, matchers) in selectors(&expr) {
                let matchers = matchers.unwrap_or_default();
                for filter in [JOB_FILTER, INSTANCE_FILTER] {
                    if !matchers.contains(filter) {
                        problems.push(format!("{label}: {metric} lacks {filter} in {expr:?}"));
                    }
                }
            }
        }
    }
    assert_none(problems);
}

#[test]
fn metrics_of_an_account_follow_the_account_variable_where_there_is_one() {
    let documented = documented_metrics();
    let mut problems = Vec::new();
    for d in dashboards() {
        if d.variable("account").is_none() {
            continue;
        }
        for (label, expr) in d.exprs() {
            for (metric, matchers) in selectors(&expr) {
                let has_account = documented
                    .get(&metric)
                    .is_some_and(|labels| labels.contains("account_id"));
                if has_account && !matchers.unwrap_or_default().contains(ACCOUNT_FILTER) {
                    problems.push(format!(
                        "{label}: {metric} lacks {ACCOUNT_FILTER} in {expr:?}"
                    ));
                }
            }
        }
    }
    assert_none(problems);
}

#[test]
fn range_functions_use_the_rate_interval() {
    let mut problems = Vec::new();
    for d in dashboards() {
        for (label, expr) in d.exprs() {
            let code = without_strings(&expr);
            for (i, _) in code.match_indices('[') {
                if !code[i..].starts_with("[$__rate_interval]") {
                    problems.push(format!(
                        "{label}: a range other than [$__rate_interval] in {expr:?}"
                    ));
                }
            }
        }
    }
    assert_none(problems);
}

/// The recording rules a dashboard may read: the quota forecast, whose typical weekly pace over
/// four weeks no dashboard can compute for a fleet at view time. Their panels say so in
/// their description, and docs/dashboards.md lists them.
const FORECAST_RECORDS: [&str; 2] = [
    "mailhost:delivery_quota_margin:seconds",
    "mailhost:delivery_quota_shortfall:messages",
];

#[test]
fn queries_use_only_documented_raw_metrics_and_no_recording_rules_but_the_forecast() {
    let documented = documented_metrics();
    let rules = std::fs::read_to_string(root().join("prometheus/rules.yml")).unwrap();
    let docs = std::fs::read_to_string(root().join("docs/dashboards.md")).unwrap();
    for name in FORECAST_RECORDS {
        assert!(
            rules.contains(&format!("record: {name}\n")),
            "{name}: not recorded by prometheus/rules.yml"
        );
        assert!(
            docs.contains(&format!("`{name}`")),
            "{name}: docs/dashboards.md does not list it among the recording rules dashboards read"
        );
    }
    let mut problems = Vec::new();
    for d in dashboards() {
        for p in panels(&d.json) {
            let reads_forecast = targets(p).iter().any(|t| {
                let expr = t["expr"].as_str().unwrap_or_default();
                FORECAST_RECORDS.iter().any(|r| expr.contains(r))
            });
            let says_so = p["description"]
                .as_str()
                .is_some_and(|text| text.contains("shipped recording rules"));
            if reads_forecast && !says_so {
                problems.push(format!(
                    "{}: reads the forecast's recording rules; its description must say it needs \
                     the shipped recording rules",
                    panel_label(&d.file, p)
                ));
            }
        }
        let mut exprs = d.exprs();
        exprs.extend(
            variables(&d.json)
                .into_iter()
                .filter(|v| v["type"] == "query")
                .filter_map(|v| {
                    let q = variable_query(v)?;
                    Some((format!("{}: variable {}", d.file, v["name"]), q.to_owned()))
                }),
        );
        for (label, expr) in exprs {
            for (_, name) in identifiers(&expr) {
                if name.contains(':') && !FORECAST_RECORDS.contains(&name.as_str()) {
                    problems.push(format!(
                        "{label}: {name} is a recording rule; use the raw metrics so the \
                         dashboard works without the rules"
                    ));
                } else if name.starts_with("mailhost_") && !documented.contains_key(&name) {
                    problems.push(format!("{label}: {name} is not in docs/metrics.md"));
                }
            }
        }
    }
    assert_none(problems);
}

#[test]
fn queries_use_only_variables_the_dashboard_defines() {
    let mut problems = Vec::new();
    for d in dashboards() {
        let defined: BTreeSet<String> = variables(&d.json)
            .into_iter()
            .filter_map(|v| v["name"].as_str().map(str::to_owned))
            .chain(BUILTIN_VARIABLES.iter().map(|s| (*s).to_owned()))
            .collect();
        for (label, expr) in d.exprs() {
            for name in used_variables(&expr) {
                if !defined.contains(&name) {
                    problems.push(format!("{label}: ${name} is not defined in {expr:?}"));
                }
            }
        }
    }
    assert_none(problems);
}

#[test]
fn the_selector_parser_sees_through_strings_and_functions() {
    let expr = r#"sum by (s) (rate(mailhost_a_total{job=~"$job",x="mailhost_b"}[$__rate_interval])) / on (j) mailhost_c"#;
    assert_eq!(
        selectors(expr),
        [
            (
                "mailhost_a_total".to_owned(),
                Some(r#"job=~"$job",x="mailhost_b""#.to_owned())
            ),
            ("mailhost_c".to_owned(), None),
        ]
    );
    assert_eq!(
        used_variables(expr),
        BTreeSet::from(["job".to_owned(), "__rate_interval".to_owned()])
    );
    assert!(
        identifiers("mailhost:quota:ratio > 0.5")
            .iter()
            .any(|(_, n)| n == "mailhost:quota:ratio")
    );
}
