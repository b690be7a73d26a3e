//! Panel queries run as Grafana runs them: each panel's step and `$__interval` from its time
//! range, max data points and min interval, `$__rate_interval` from the scrape interval, every
//! template variable resolved through its `label_values` chain in dependency order, then range
//! (or, for instant targets, instant) queries against a real Prometheus.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Width of the browser window the panels are laid out in: Grafana asks for as many points as
/// a panel has pixels when the panel sets no max data points, and a grid column is 1/24 of it.
const DASHBOARD_WIDTH_PX: i64 = 1920;

/// The Prometheus data source returns at most this many points per series; Grafana widens the
/// step so that a range query stays below it.
const MAX_POINTS_PER_SERIES: i64 = 11_000;

/// Grafana's nice intervals: a computed interval below the first bound is rounded to the
/// second (milliseconds), so a panel's step is one a person would pick.
const ROUNDED_INTERVALS: [(i64, i64); 26] = [
    (15, 10),
    (35, 20),
    (75, 50),
    (150, 100),
    (350, 200),
    (750, 500),
    (1_500, 1_000),
    (3_500, 2_000),
    (7_500, 5_000),
    (12_500, 10_000),
    (17_500, 15_000),
    (25_000, 20_000),
    (45_000, 30_000),
    (90_000, 60_000),
    (450_000, 300_000),
    (1_050_000, 600_000),
    (2_100_000, 1_200_000),
    (5_400_000, 3_600_000),
    (9_000_000, 7_200_000),
    (16_200_000, 10_800_000),
    (24_300_000, 21_600_000),
    (54_000_000, 43_200_000),
    (129_600_000, 86_400_000),
    (604_800_000, 86_400_000),
    (1_814_400_000, 604_800_000),
    (3_628_800_000, 2_592_000_000),
];

pub fn round_interval(ms: i64) -> i64 {
    ROUNDED_INTERVALS
        .iter()
        .find(|(below, _)| ms < *below)
        .map_or(31_536_000_000, |(_, rounded)| *rounded)
}

/// `500ms`, `30s`, `1m`, `6h`, `1d`, `1w` in milliseconds.
pub fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: i64 = number.parse().ok()?;
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        _ => return None,
    };
    n.checked_mul(unit_ms)
}

/// A duration as Grafana writes it into a query: the largest whole unit.
pub fn format_duration(ms: i64) -> String {
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// `now`, `now-6h`: milliseconds since the epoch.
fn relative_time(text: &str, now_ms: i64) -> Option<i64> {
    let rest = text.trim().strip_prefix("now")?;
    if rest.is_empty() {
        return Some(now_ms);
    }
    Some(now_ms - parse_duration(rest.strip_prefix('-')?)?)
}

/// What Grafana derives for one panel over one time range.
#[derive(Debug, PartialEq, Eq)]
pub struct PanelIntervals {
    /// `$__interval`: the range over the points the panel can show, rounded, at least the
    /// panel's min interval (else the data source's scrape interval).
    pub interval_ms: i64,
    /// The range query's step.
    pub step_ms: i64,
    /// `$__rate_interval`: max(`$__interval` + scrape interval, 4 x scrape interval).
    pub rate_interval_ms: i64,
}

pub fn panel_intervals(
    range_ms: i64,
    max_data_points: i64,
    min_interval_ms: Option<i64>,
    scrape_interval_ms: i64,
) -> PanelIntervals {
    let floor = min_interval_ms.unwrap_or(scrape_interval_ms);
    let interval_ms = round_interval(range_ms / max_data_points.max(1)).max(floor);
    // In whole seconds, as Grafana widens it.
    let safe_ms = (range_ms / 1000 + MAX_POINTS_PER_SERIES - 1) / MAX_POINTS_PER_SERIES * 1000;
    PanelIntervals {
        interval_ms,
        step_ms: interval_ms.max(safe_ms),
        rate_interval_ms: (interval_ms + scrape_interval_ms).max(4 * scrape_interval_ms),
    }
}

/// Replaces `$name`, `${name}` and `${name:format}` by their values; unknown names stay, so
/// Prometheus refuses the query and the test names it.
pub fn interpolate(expr: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => {
                    let inner = &braced[..end];
                    (inner.split(':').next().unwrap_or(inner), end + 2)
                }
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        match values.get(name) {
            Some(value) if consumed > 0 => {
                out.push_str(value);
                rest = &after[consumed..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A value inside `=~"..."`: Grafana escapes regex syntax in the values of multi-value and
/// "All" variables, and backslashes once more for the PromQL string.
fn regex_escape(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        if r"\^$*+?.()|{}[]".contains(c) {
            out.push_str(r"\\");
        }
        out.push(c);
    }
    out
}

/// `label_values(selector, label)` or `label_values(label)`: (selector, label).
fn label_values_query(query: &str) -> Option<(Option<String>, String)> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    Some(match inner.rsplit_once(',') {
        Some((selector, label)) => (Some(selector.trim().to_owned()), label.trim().to_owned()),
        None => (None, inner.trim().to_owned()),
    })
}

fn variable_query(variable: &Value) -> &str {
    variable["query"]["query"]
        .as_str()
        .or_else(|| variable["query"].as_str())
        .unwrap_or_default()
}

/// Names of the dashboard's variables that `text` refers to.
fn references<'a>(text: &str, names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    names
        .filter(|n| {
            let probe: BTreeMap<String, String> = [((*n).to_owned(), "\u{0}".to_owned())].into();
            interpolate(text, &probe).contains('\u{0}')
        })
        .collect()
}

struct Range {
    from_ms: i64,
    to_ms: i64,
}

async fn get_json(
    client: &reqwest::Client,
    url: &str,
    params: &[(&str, String)],
) -> Result<Value, String> {
    let r = client
        .get(url)
        .query(params)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let body: Value = r.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() || body["status"] != "success" {
        return Err(format!("{}", body["error"]));
    }
    Ok(body["data"].clone())
}

/// Resolves every variable in dependency order, each query run over the dashboard's range with
/// the values of the variables it names; picks what Grafana picks for a fresh dashboard: "All"
/// where offered (its allValue, else every value as a regex), otherwise the first value in the
/// variable's sort order. `Ok(None)` while a variable has no values yet.
async fn resolve_variables(
    client: &reqwest::Client,
    prom: &str,
    dashboard: &Value,
    range: &Range,
) -> Result<Option<BTreeMap<String, String>>, String> {
    let list: Vec<&Value> = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let names: Vec<&str> = list.iter().filter_map(|v| v["name"].as_str()).collect();
    let mut values = BTreeMap::new();
    let mut pending: Vec<&Value> = Vec::new();
    for v in &list {
        match v["type"].as_str() {
            Some("datasource") => {
                values.insert(
                    v["name"].as_str().unwrap_or_default().to_owned(),
                    "prometheus".to_owned(),
                );
            }
            Some("query") => pending.push(v),
            other => {
                return Err(format!(
                    "variable {}: type {other:?} not run here",
                    v["name"]
                ));
            }
        }
    }
    while !pending.is_empty() {
        let ready = pending.iter().position(|v| {
            references(variable_query(v), names.iter().copied())
                .iter()
                .all(|n| values.contains_key(*n))
        });
        let Some(index) = ready else {
            return Err(format!(
                "variables that depend on each other: {:?}",
                pending.iter().map(|v| &v["name"]).collect::<Vec<_>>()
            ));
        };
        let v = pending.remove(index);
        let name = v["name"].as_str().unwrap_or_default();
        if v["regex"].as_str().is_some_and(|r| !r.is_empty()) {
            return Err(format!("variable {name}: a regex filter is not run here"));
        }
        let query = interpolate(variable_query(v), &values);
        let (selector, label) = label_values_query(&query)
            .ok_or_else(|| format!("variable {name}: unsupported query {query}"))?;
        let mut params = vec![
            ("start", (range.from_ms / 1000).to_string()),
            ("end", (range.to_ms / 1000).to_string()),
        ];
        if let Some(selector) = selector {
            params.push(("match[]", selector));
        }
        let data = get_json(
            client,
            &format!("{prom}/api/v1/label/{label}/values"),
            &params,
        )
        .await
        .map_err(|e| format!("variable {name}: {query}: {e}"))?;
        let mut options: Vec<String> = data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect();
        if options.is_empty() {
            return Ok(None);
        }
        let numeric = |s: &String| s.parse::<f64>().unwrap_or(f64::NAN);
        match v["sort"].as_i64().unwrap_or(0) {
            1 | 5 => options.sort(),
            2 | 6 => options.sort_by(|a, b| b.cmp(a)),
            3 => options.sort_by(|a, b| numeric(a).total_cmp(&numeric(b))),
            4 => options.sort_by(|a, b| numeric(b).total_cmp(&numeric(a))),
            _ => {}
        }
        let multi = v["multi"] == true || v["includeAll"] == true;
        let value = if v["includeAll"] == true {
            match v["allValue"].as_str().filter(|a| !a.is_empty()) {
                Some(all) => all.to_owned(),
                None => format!(
                    "({})",
                    options
                        .iter()
                        .map(|o| regex_escape(o))
                        .collect::<Vec<_>>()
                        .join("|")
                ),
            }
        } else if multi {
            regex_escape(&options[0])
        } else {
            options[0].clone()
        };
        values.insert(name.to_owned(), value);
    }
    Ok(Some(values))
}

/// One target of one panel, ready to run.
struct Query {
    place: String,
    expr: String,
    /// Instant targets run at the range's end, as Grafana runs them; the rest as range queries.
    instant: bool,
    intervals: PanelIntervals,
}

fn panel_queries(
    file: &str,
    dashboard: &Value,
    range: &Range,
    scrape_interval_ms: i64,
    values: &BTreeMap<String, String>,
) -> Vec<Query> {
    let range_ms = range.to_ms - range.from_ms;
    let mut panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let mut out = Vec::new();
    while let Some(p) = panels.pop() {
        panels.extend(p["panels"].as_array().into_iter().flatten());
        let width_px = p["gridPos"]["w"].as_i64().unwrap_or(24) * DASHBOARD_WIDTH_PX / 24;
        let max_data_points = p["maxDataPoints"].as_i64().unwrap_or(width_px);
        let min_interval = p["interval"].as_str().and_then(parse_duration);
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            if t["hide"] == true {
                continue;
            }
            let target_min = t["interval"].as_str().and_then(parse_duration);
            let intervals = panel_intervals(
                range_ms,
                max_data_points,
                target_min.or(min_interval),
                scrape_interval_ms,
            );
            let mut all = values.clone();
            for (name, ms) in [
                ("__interval", intervals.interval_ms),
                ("__rate_interval", intervals.rate_interval_ms),
                ("__range", range_ms),
            ] {
                all.insert(name.to_owned(), format_duration(ms));
            }
            all.insert("__interval_ms".into(), intervals.interval_ms.to_string());
            all.insert(
                "__rate_interval_ms".into(),
                intervals.rate_interval_ms.to_string(),
            );
            all.insert("__range_s".into(), (range_ms / 1000).to_string());
            all.insert("__range_ms".into(), range_ms.to_string());
            out.push(Query {
                place: format!(
                    "{file}: panel {:?} target {}",
                    p["title"].as_str().unwrap_or("?"),
                    t["refId"].as_str().unwrap_or("?")
                ),
                expr: interpolate(expr, &all),
                instant: t["instant"] == true && t["range"] != true,
                intervals,
            });
        }
    }
    out
}

/// Runs one query as Grafana sends it; `Ok(true)` when a series came back with a point.
async fn run(
    client: &reqwest::Client,
    prom: &str,
    q: &Query,
    range: &Range,
) -> Result<bool, String> {
    let data = if q.instant {
        let params = [
            ("query", q.expr.clone()),
            ("time", format!("{:.3}", range.to_ms as f64 / 1000.0)),
        ];
        get_json(client, &format!("{prom}/api/v1/query"), &params).await?
    } else {
        // Grafana aligns both ends down to a multiple of the step, so that refreshes reuse the
        // same points.
        let step_s = (q.intervals.step_ms / 1000).max(1);
        let align = |ms: i64| (ms / 1000) / step_s * step_s;
        let params = [
            ("query", q.expr.clone()),
            ("start", align(range.from_ms).to_string()),
            ("end", align(range.to_ms).to_string()),
            ("step", step_s.to_string()),
        ];
        get_json(client, &format!("{prom}/api/v1/query_range"), &params).await?
    };
    if data["resultType"] == "scalar" {
        return Ok(true);
    }
    let result = data["result"].as_array().cloned().unwrap_or_default();
    Ok(result.iter().any(|series| {
        series["value"].is_array() || series["values"].as_array().is_some_and(|v| !v.is_empty())
    }))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .try_into()
        .unwrap()
}

/// Every panel of every dashboard in `files` gets data from `prom` when queried as Grafana
/// would over the dashboard's default time range; retried until `patience` runs out, since a
/// step of a minute needs a minute of data. Returns how many queries ran.
pub async fn every_panel_gets_data(
    client: &reqwest::Client,
    prom: &str,
    files: &[impl AsRef<Path>],
    scrape_interval_ms: i64,
    patience: Duration,
) -> usize {
    let started = Instant::now();
    loop {
        let mut waiting: BTreeMap<String, String> = BTreeMap::new();
        let mut errors = Vec::new();
        let mut total = 0;
        for file in files {
            let file = file.as_ref();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let dashboard: Value =
                serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
            let now = now_ms();
            let time = &dashboard["time"];
            let range = Range {
                from_ms: relative_time(time["from"].as_str().unwrap_or("now-6h"), now)
                    .unwrap_or_else(|| panic!("{name}: time.from {}", time["from"])),
                to_ms: relative_time(time["to"].as_str().unwrap_or("now"), now)
                    .unwrap_or_else(|| panic!("{name}: time.to {}", time["to"])),
            };
            let values = match resolve_variables(client, prom, &dashboard, &range).await {
                Ok(Some(values)) => values,
                Ok(None) => {
                    waiting.insert(format!("{name}: variables"), "no values yet".into());
                    continue;
                }
                Err(e) => {
                    errors.push(format!("{name}: {e}"));
                    continue;
                }
            };
            for q in panel_queries(&name, &dashboard, &range, scrape_interval_ms, &values) {
                total += 1;
                match run(client, prom, &q, &range).await {
                    Ok(true) => {}
                    Ok(false) => {
                        let kind = if q.instant { "instant" } else { "range" };
                        waiting.insert(
                            q.place,
                            format!("{kind}, step {}ms: {}", q.intervals.step_ms, q.expr),
                        );
                    }
                    Err(e) => errors.push(format!("{}: {}: {e}", q.place, q.expr)),
                }
            }
        }
        assert!(
            errors.is_empty(),
            "Prometheus refused Grafana's queries:\n{}",
            errors.join("\n")
        );
        if waiting.is_empty() {
            return total;
        }
        assert!(
            started.elapsed() < patience,
            "panels without data after {patience:?} (queried as Grafana would):\n{}",
            waiting
                .iter()
                .map(|(p, q)| format!("{p}: {q}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

#[test]
fn intervals_are_rounded_to_what_a_person_would_pick() {
    assert_eq!(round_interval(22_500), 20_000);
    assert_eq!(round_interval(67_500), 60_000);
    assert_eq!(round_interval(11_250), 10_000);
    assert_eq!(round_interval(100), 100);
    assert_eq!(round_interval(4_000_000_000), 31_536_000_000);
}

#[test]
fn a_panel_step_follows_its_width_its_min_interval_and_the_point_limit() {
    // Six hours on a half-width panel: 960 points, 22.5 s rounded to 20 s.
    let half = panel_intervals(21_600_000, 960, None, 1_000);
    assert_eq!(
        half,
        PanelIntervals {
            interval_ms: 20_000,
            step_ms: 20_000,
            rate_interval_ms: 21_000
        }
    );
    // A min interval of a minute wins over a finer computed interval.
    assert_eq!(
        panel_intervals(3_600_000, 1_920, Some(60_000), 15_000).interval_ms,
        60_000
    );
    // Fast scrapes: $__rate_interval is at least four scrape intervals.
    assert_eq!(
        panel_intervals(300_000, 1_920, None, 15_000).rate_interval_ms,
        60_000
    );
    // Thirty days at 100,000 points would pass Prometheus' point limit: the step widens.
    let wide = panel_intervals(2_592_000_000, 100_000, Some(1_000), 1_000);
    assert_eq!(wide.interval_ms, 30_000);
    assert_eq!(wide.step_ms, 236_000);
}

#[test]
fn variables_are_substituted_in_every_form_grafana_accepts() {
    let values: BTreeMap<String, String> = [
        ("job".to_owned(), ".+".to_owned()),
        ("__range".to_owned(), "6h".to_owned()),
        ("__range_s".to_owned(), "21600".to_owned()),
    ]
    .into();
    assert_eq!(
        interpolate(
            r#"x{job=~"$job"}[$__range] / $__range_s + ${job:regex}$missing"#,
            &values
        ),
        r#"x{job=~".+"}[6h] / 21600 + .+$missing"#
    );
    assert_eq!(format_duration(61_000), "61s");
    assert_eq!(format_duration(3_600_000), "1h");
    assert_eq!(regex_escape("a.b"), r"a\\.b");
    assert_eq!(
        references(
            r#"label_values(m{job=~"$job",instance=~"${instance}"}, x)"#,
            ["job", "instance", "account"].into_iter()
        ),
        ["job", "instance"]
    );
}
