//! Prometheus 3, proven with the pieces of it that are packaged: every `Accept` header it sends
//! (its default, each `scrape_protocols` value alone, each `escaping=` value) gets a
//! Content-Type it accepts with a body of that type, on `/metrics` and `/probe`; every body
//! passes the strict OpenMetrics parser of PyPI's prometheus-client and `promtool check
//! metrics`; every rule and dashboard expression parses with Prometheus 3's PromQL grammar (npm
//! `@prometheus-io/lezer-promql`); and no expression matches an exact `le` value.

use std::path::Path;

use crate::helpers::{Running, promtool, promtool_check_metrics, repo_root, run_with_input, tool};

const OPENMETRICS_PARSE: (&str, &str) = ("openmetrics-parse", "bash .ci/prometheus3-tools");
const PROMQL_PARSE: (&str, &str) = ("promql-parse", "bash .ci/prometheus3-tools");

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The media types Prometheus 3 parses a scrape with (it fails a scrape on any other, unless
/// `fallback_scrape_protocol` is set).
const PROMETHEUS_3_PARSES: [&str; 3] = [
    "text/plain",
    "application/openmetrics-text",
    "application/vnd.google.protobuf",
];

/// Each scrape protocol's media range, as Prometheus 3 writes it in `Accept`.
const PROTOCOLS: [(&str, &str, bool); 5] = [
    (
        "PrometheusProto",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
        false,
    ),
    ("PrometheusText0.0.4", "text/plain;version=0.0.4", false),
    ("PrometheusText1.0.0", "text/plain;version=1.0.0", true),
    (
        "OpenMetricsText0.0.1",
        "application/openmetrics-text;version=0.0.1",
        false,
    ),
    (
        "OpenMetricsText1.0.0",
        "application/openmetrics-text;version=1.0.0",
        true,
    ),
];

const ESCAPING: [&str; 4] = ["allow-utf-8", "underscores", "dots", "values"];

/// `Accept` as Prometheus 3 builds it from `scrape_protocols`: weights from 0.6 down, the
/// escaping scheme on the 1.0.0 text formats, then `*/*`.
fn accept(protocols: &[&str], escaping: &str) -> String {
    let mut weight = PROTOCOLS.len() + 1;
    let mut ranges = Vec::new();
    for name in protocols {
        let (_, range, escapes) = PROTOCOLS.iter().find(|p| p.0 == *name).unwrap();
        let mut range = (*range).to_owned();
        if *escapes {
            range.push_str(&format!(";escaping={escaping}"));
        }
        ranges.push(format!("{range};q=0.{weight}"));
        weight -= 1;
    }
    ranges.push(format!("*/*;q=0.{weight}"));
    ranges.join(",")
}

/// Every `Accept` of the table, with the Content-Type it must get.
fn table() -> Vec<(String, Option<String>, &'static str)> {
    let default = [
        "OpenMetricsText1.0.0",
        "OpenMetricsText0.0.1",
        "PrometheusText1.0.0",
        "PrometheusText0.0.4",
    ];
    let mut rows = Vec::new();
    for escaping in ESCAPING {
        rows.push((
            format!("Prometheus 3 default, escaping={escaping}"),
            Some(accept(&default, escaping)),
            OPENMETRICS,
        ));
        for (name, _, escapes) in PROTOCOLS {
            if escapes || escaping == ESCAPING[0] {
                let want = if name == "OpenMetricsText1.0.0" {
                    OPENMETRICS
                } else {
                    CLASSIC
                };
                rows.push((
                    format!("scrape_protocols: [{name}], escaping={escaping}"),
                    Some(accept(&[name], escaping)),
                    want,
                ));
            }
        }
    }
    rows.push((
        "Prometheus 2.42 default".into(),
        Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1".into()),
        OPENMETRICS,
    ));
    rows.push(("no Accept".into(), None, CLASSIC));
    rows
}

/// Checks `body` as the type `content_type` says: OpenMetrics through the strict parser (and
/// its terminator), classic text through `promtool check metrics`.
fn check_body(what: &str, content_type: &str, body: &str) {
    if content_type.starts_with("application/openmetrics-text") {
        assert!(body.ends_with("# EOF\n"), "{what}: no # EOF at the end");
        if let Some(parse) = tool(OPENMETRICS_PARSE.0, OPENMETRICS_PARSE.1) {
            let (ok, report) = run_with_input(parse, &[], body);
            assert!(ok, "{what}: {report}");
        }
    } else {
        assert!(!body.contains("# EOF"), "{what}: # EOF in classic text");
        if let Some(promtool) = promtool() {
            promtool_check_metrics(promtool, body).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
}

#[tokio::test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn every_accept_of_prometheus_3_gets_a_type_it_parses_with_a_body_of_that_type() {
    let mut demo = Running::start(&["--demo", "--web.listen-address=127.0.0.1:0"]);
    // The URL it logs is the metrics page; the base is what precedes its path.
    let metrics = demo.logged("open this URL", "url").await;
    let url = metrics.trim_end_matches("/metrics").to_owned();
    let client = reqwest::Client::new();
    crate::helpers::wait_for("demo mode's first values", || async {
        let body = client
            .get(format!("{url}/metrics"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        body.contains("mailhost_delivery_remaining_messages{account_id=\"1001\"}")
            .then_some(())
    })
    .await;
    let rows = table();
    // 4 escaping schemes x (the default and the two 1.0.0 formats), the three older formats,
    // Prometheus 2.42 and no header.
    assert_eq!(rows.len(), 17);
    for path in ["/metrics", "/probe?target=1001"] {
        for (name, accept, want) in &rows {
            let mut request = client.get(format!("{url}{path}"));
            if let Some(accept) = accept {
                request = request.header("Accept", accept);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200, "{path}, {name}");
            let content_type = response.headers()["content-type"]
                .to_str()
                .unwrap()
                .to_owned();
            let media = content_type.split(';').next().unwrap().trim();
            assert!(
                PROMETHEUS_3_PARSES.contains(&media),
                "{path}, {name}: {content_type}"
            );
            assert_eq!(&content_type, want, "{path}, {name}");
            let body = response.text().await.unwrap();
            check_body(&format!("{path}, {name}"), &content_type, &body);
        }
    }
    demo.terminate();
}

/// Every PromQL expression we ship: rules, alerts, dashboard panels and the expressions inside
/// dashboard variables, with Grafana's variables put in as a query would have them.
fn shipped_expressions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for rule in crate::mixin::alert_rules(&repo_root()) {
        out.push((
            format!("alert {}", rule["alert"].as_str().unwrap()),
            rule["expr"].as_str().unwrap().to_owned(),
        ));
    }
    let rules: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo_root().join("prometheus/rules.yml")).unwrap(),
    )
    .unwrap();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            out.push((
                format!("record {}", rule["record"].as_str().unwrap()),
                rule["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    for file in crate::prometheus::dashboards() {
        for (place, kind, text) in crate::prometheus::queries(&file) {
            let expr = crate::prometheus::substitute(&text);
            let expr = if kind == "variable" {
                // label_values(EXPR, label): the selector inside is PromQL.
                match expr
                    .strip_prefix("label_values(")
                    .and_then(|e| e.rsplit_once(','))
                {
                    Some((inner, _)) => inner.to_owned(),
                    None => continue,
                }
            } else {
                expr
            };
            out.push((place, expr));
        }
    }
    out
}

/// Runs the grammar over `exprs`; the lines of its report.
fn parse(tool: &str, exprs: &[&str]) -> (bool, Vec<String>) {
    let (ok, report) = run_with_input(tool, &[], &serde_json::to_string(exprs).unwrap());
    (ok, report.lines().map(str::to_owned).collect())
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn every_rule_and_dashboard_expression_parses_with_prometheus_3s_grammar() {
    let Some(promql) = tool(PROMQL_PARSE.0, PROMQL_PARSE.1) else {
        return;
    };
    let shipped = shipped_expressions();
    assert!(shipped.len() > 80, "{}", shipped.len());
    let exprs: Vec<&str> = shipped.iter().map(|(_, e)| e.as_str()).collect();
    let (ok, lines) = parse(promql, &exprs);
    let bad: Vec<String> = shipped
        .iter()
        .zip(&lines)
        .filter(|(_, line)| *line != "ok")
        .map(|((place, expr), line)| format!("{place}: {line}\n  {expr}"))
        .collect();
    assert!(ok && bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(lines.len(), exprs.len());
    // The grammar bites: an operator without its right side, an unclosed selector.
    let (ok, lines) = parse(promql, &["sum(x) or", "x{job=\"a\"", "rate(x[5m])"]);
    assert!(!ok);
    assert!(lines[0].starts_with("invalid") && lines[1].starts_with("invalid"));
    assert_eq!(lines[2], "ok");
}

/// Prometheus 3 normalises `le` and `quantile` values (`le="1"` is stored as `le="1.0"`), so a
/// matcher on an exact value silently stops matching; histograms are read through
/// `histogram_quantile` and `sum by (le)` only.
#[test]
fn no_expression_matches_an_exact_le_or_quantile_value() {
    let exact = |expr: &str| {
        let squeezed: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
        ["{le=", ",le=", "{quantile=", ",quantile="]
            .iter()
            .any(|m| squeezed.contains(m))
    };
    assert!(exact("x_bucket{job=\"a\", le=\"0.5\"}"));
    assert!(!exact("sum by (le) (rate(x_bucket[5m]))"));
    let found: Vec<String> = shipped_expressions()
        .into_iter()
        .filter(|(_, e)| exact(e))
        .map(|(place, e)| format!("{place}: {e}"))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Puts both renderings of a golden case through the strict parsers (called by
/// tests/golden.rs).
pub(crate) fn check_golden(case: &Path, classic: &str, openmetrics: &str) {
    let what = case.display().to_string();
    check_body(&what, CLASSIC, classic);
    check_body(&what, OPENMETRICS, openmetrics);
}
