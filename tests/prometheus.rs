//! End to end with a real Prometheus server on loopback: it scrapes the exporter in demo mode
//! with our rules loaded; every dashboard panel and variable query must succeed and return data,
//! also when run as Grafana runs it (`grafana_queries`: step, `$__rate_interval`, variable
//! chains, range queries), every metric a dashboard or rule names must be on `/metrics`, and the
//! quota alert of the demo account close to exhaustion must trip.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{PrometheusServer, Running, spawn_prometheus, tool, wait_for};

/// Values put in for Grafana's variables when a query is run by hand.
const SUBSTITUTIONS: [(&str, &str); 7] = [
    ("__rate_interval", "20s"),
    ("__interval", "5s"),
    ("__range", "1m"),
    ("job", ".+"),
    ("instance", ".+"),
    ("account", "1001"),
    ("datasource", "prometheus"),
];

/// How long every dashboard query together may take to return data.
const QUERY_PATIENCE: Duration = Duration::from_secs(90);
/// The test Prometheus' scrape interval, which a provisioned Grafana data source states as its
/// `timeInterval` (the floor of `$__interval` and the base of `$__rate_interval`).
const SCRAPE_INTERVAL_MS: i64 = 1_000;
/// How long the queries as Grafana runs them may take to return data: a panel whose step is a
/// minute shows its first point a minute after the first scrape.
const GRAFANA_PATIENCE: Duration = Duration::from_secs(240);

/// A Prometheus scraping `target` with the shipped rules and alerts loaded.
/// A Prometheus scraping `target` with the shipped rules, their forecast shrunk from weeks to
/// seconds (the dashboards' forecast panels read its recording rules); the directory of the
/// rendered rules lives as long as the server.
fn start_prometheus(
    binary: &str,
    jsonnet: &str,
    target: &str,
) -> (PrometheusServer, tempfile::TempDir) {
    let (rules, _) = crate::mixin::render_rules(jsonnet, crate::mixin::FORECAST_IN_SECONDS);
    let config = format!(
        "global:\n  scrape_interval: {}ms\n  evaluation_interval: 1s\nrule_files:\n  - {}\n  - {}\nscrape_configs:\n  - job_name: mailhost\n    static_configs:\n      - targets: [\"{target}\"]\n",
        SCRAPE_INTERVAL_MS,
        rules.path().join("prometheus/rules.yml").display(),
        rules.path().join("prometheus/alerts.yml").display()
    );
    (spawn_prometheus(binary, &config), rules)
}

/// Replaces `$name`, `${name}` and `${name:format}` with the test's values.
pub(crate) fn substitute(expr: &str) -> String {
    let mut out = expr.to_owned();
    for (name, value) in SUBSTITUTIONS {
        for form in [
            format!("${{{name}:regex}}"),
            format!("${{{name}}}"),
            format!("${name}"),
        ] {
            out = out.replace(&form, value);
        }
    }
    out
}

/// Every query of a dashboard: (where, kind, text). Kind is `expr` or `variable`.
pub(crate) fn queries(file: &Path) -> Vec<(String, &'static str, String)> {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = json["panels"].as_array().into_iter().flatten().collect();
    while let Some(p) = panels.pop() {
        panels.extend(p["panels"].as_array().into_iter().flatten());
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                out.push((
                    format!("{name}: panel {:?}", p["title"].as_str().unwrap_or("?")),
                    "expr",
                    expr.to_owned(),
                ));
            }
        }
    }
    for v in json["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] == "query" {
            let q = v["query"]["query"]
                .as_str()
                .or_else(|| v["query"].as_str())
                .unwrap_or_default();
            out.push((
                format!("{name}: variable {}", v["name"]),
                "variable",
                q.to_owned(),
            ));
        }
    }
    out
}

pub(crate) fn dashboards() -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(crate::helpers::repo_root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// Runs one query; `Ok(true)` when it returned data, `Err` when Prometheus refused it.
async fn has_data(
    client: &reqwest::Client,
    prom: &str,
    kind: &str,
    text: &str,
) -> Result<bool, String> {
    let text = substitute(text);
    let (url, params) = if kind == "variable" {
        // label_values(selector, label) or label_values(label): the series must exist.
        let inner = text
            .trim()
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| format!("unsupported variable query {text}"))?;
        let (selector, label) = match inner.rsplit_once(',') {
            Some((s, l)) => (s.trim().to_owned(), l.trim().to_owned()),
            None => (
                format!("{{{}=~\".+\"}}", inner.trim()),
                inner.trim().to_owned(),
            ),
        };
        (
            format!("{prom}/api/v1/label/{label}/values"),
            vec![("match[]", selector)],
        )
    } else {
        (
            format!("{prom}/api/v1/query"),
            vec![("query", text.clone())],
        )
    };
    let r = client
        .get(&url)
        .query(&params)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let body: Value = r.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() || body["status"] != "success" {
        return Err(format!("{text}: {}", body["error"]));
    }
    let data = &body["data"];
    Ok(match data.get("result") {
        Some(result) => result.as_array().is_some_and(|a| !a.is_empty()) || result.is_number(),
        None => data.as_array().is_some_and(|a| !a.is_empty()),
    })
}

fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(pos) = text[i..].find("mailhost_") {
        let start = i + pos;
        let preceded = start > 0
            && (bytes[start - 1].is_ascii_alphanumeric()
                || bytes[start - 1] == b'_'
                || bytes[start - 1] == b':');
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(text.len(), |e| start + e);
        // A recording rule (mailhost:...) is not a metric of ours; neither is a word in prose.
        if !preceded && !text[end..].starts_with(':') {
            names.insert(text[start..end].to_owned());
        }
        i = end;
    }
    names
}

#[tokio::test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn a_real_prometheus_answers_every_dashboard_query_and_trips_the_quota_alert() {
    let Some(prometheus) = tool("prometheus", "apt-get install prometheus") else {
        return;
    };
    let Some(jsonnet) = crate::mixin::jsonnet() else {
        return;
    };
    let demo = Running::start(&["--demo", "--web.listen-address=127.0.0.1:0"]);
    let metrics_url = demo.logged("open this URL", "url").await;
    let target = metrics_url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned();
    let (prom, _rules) = start_prometheus(prometheus, jsonnet, &target);
    let client = reqwest::Client::new();

    // Scraping has begun and every collector has reported once.
    wait_for("Prometheus to scrape every collector", || async {
        let r = has_data(
            &client,
            &prom.url,
            "expr",
            "count(mailhost_collector_success{job=\"mailhost\"}) >= 5",
        )
        .await;
        r.ok().filter(|ok| *ok)
    })
    .await;

    // Prometheus asks for gzip and gets two gzip members: the prepared body, gzipped once per
    // refresh, then the self-metrics of this scrape. Go's reader takes both: the target is up
    // and a self-metric from the second member is stored.
    for q in [
        "up{job=\"mailhost\"} == 1",
        "mailhost_build_info{job=\"mailhost\"} == 1",
    ] {
        wait_for(q, || async {
            has_data(&client, &prom.url, "expr", q)
                .await
                .ok()
                .filter(|ok| *ok)
        })
        .await;
    }

    // Every panel and variable query of every dashboard returns data.
    let files = dashboards();
    assert!(files.len() >= 4, "four dashboards at least");
    let mut pending: Vec<(String, &'static str, String)> =
        files.iter().flat_map(|f| queries(f)).collect();
    assert!(pending.len() > 20, "dashboards have queries");
    let total = pending.len();
    let started = Instant::now();
    let mut errors = Vec::new();
    while !pending.is_empty() && started.elapsed() < QUERY_PATIENCE {
        let mut still = Vec::new();
        for (place, kind, text) in pending {
            match has_data(&client, &prom.url, kind, &text).await {
                Ok(true) => {}
                Ok(false) => still.push((place, kind, text)),
                Err(e) => errors.push(format!("{place}: {e}")),
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    assert!(
        errors.is_empty(),
        "Prometheus refused queries:\n{}",
        errors.join("\n")
    );
    let empty: Vec<String> = pending
        .iter()
        .map(|(p, _, t)| format!("{p}: {t}"))
        .collect();
    assert!(
        empty.is_empty(),
        "queries without data after {QUERY_PATIENCE:?}:\n{}",
        empty.join("\n")
    );
    eprintln!(
        "{total} dashboard queries returned data after {:?}",
        started.elapsed()
    );

    // The same panels as Grafana queries them: over each dashboard's default time range, with
    // each panel's step and intervals and the variables resolved through their chain.
    let started = Instant::now();
    let ran = crate::grafana_queries::every_panel_gets_data(
        &client,
        &prom.url,
        &files,
        SCRAPE_INTERVAL_MS,
        GRAFANA_PATIENCE,
    )
    .await;
    eprintln!(
        "{ran} panel queries as Grafana runs them returned data after {:?}",
        started.elapsed()
    );

    // Every metric a dashboard or a rule names is on /metrics in demo mode.
    let body = client
        .get(&metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut used = BTreeSet::new();
    for f in &files {
        used.extend(queries(f).iter().flat_map(|(_, _, t)| metric_names(t)));
    }
    for f in ["prometheus/rules.yml", "prometheus/alerts.yml"] {
        let text: String = std::fs::read_to_string(crate::helpers::repo_root().join(f))
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        // Names inside annotations are prose, not queries: read only the expressions.
        let exprs: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        for g in exprs["groups"].as_sequence().unwrap() {
            for r in g["rules"].as_sequence().unwrap() {
                used.extend(metric_names(r["expr"].as_str().unwrap()));
            }
        }
    }
    let missing: Vec<&String> = used
        .iter()
        .filter(|n| !crate::helpers::ONLY_WHILE_FAILING.contains(&n.as_str()))
        .filter(|n| {
            !body
                .lines()
                .any(|l| l.starts_with(n.as_str()) && l[n.len()..].starts_with([' ', '{']))
        })
        // A histogram's own name is the series Prometheus 3 stores when it converts the
        // classic buckets into a native histogram (the latency panels read either).
        .filter(|n| !body.contains(&format!("# TYPE {n} histogram\n")))
        .collect();
    assert!(
        missing.is_empty(),
        "named in dashboards or rules but not on /metrics: {missing:?}"
    );

    // The demo account close to exhaustion trips its quota alert (pending until its `for:`).
    wait_for("the quota alert of account 1002", || async {
        let q = "ALERTS{alertname=~\"MailhostDeliveryQuota(Low|Critical)\",account_id=\"1002\",alertstate=~\"pending|firing\"}";
        has_data(&client, &prom.url, "expr", q).await.ok().filter(|ok| *ok)
    })
    .await;
}
