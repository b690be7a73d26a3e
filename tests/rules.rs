//! The Prometheus rules and config we ship: promtool lints them and runs their unit tests, every
//! alert carries what an operator needs, and every alert has a firing and a quiet test case.

use std::collections::BTreeSet;
use std::process::Command;

use serde_yaml_ng::Value;

use crate::helpers::{promtool, repo_root};

const RULE_FILES: [&str; 2] = ["prometheus/rules.yml", "prometheus/alerts.yml"];

fn yaml(path: &str) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(repo_root().join(path)).unwrap())
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every rule of a rules file.
fn rules(path: &str) -> Vec<Value> {
    yaml(path)["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().clone())
        .collect()
}

fn run(promtool: &str, args: &[&str]) {
    let out = Command::new(promtool)
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool {}:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn promtool_lints_every_rules_file_without_a_finding() {
    let Some(promtool) = promtool() else { return };
    for file in RULE_FILES {
        run(
            promtool,
            &["check", "rules", "--lint=all", "--lint-fatal", file],
        );
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn promtool_accepts_the_shipped_prometheus_config() {
    let Some(promtool) = promtool() else { return };
    run(promtool, &["check", "config", "prometheus/prometheus.yml"]);
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn promtool_rule_unit_tests_pass() {
    let Some(promtool) = promtool() else { return };
    let mut args = vec!["test", "rules"];
    args.extend(crate::mixin::UNIT_TEST_FILES);
    run(promtool, &args);
}

#[test]
fn every_alert_has_a_severity_a_for_and_annotations_that_point_at_the_runbook() {
    let runbook = std::fs::read_to_string(repo_root().join("docs/runbook.md")).unwrap();
    let anchors: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_lowercase().replace(' ', "-"))
        .collect();
    let alerts: Vec<Value> = rules("prometheus/alerts.yml");
    assert!(alerts.len() >= 15, "the alerts the issue lists");
    for rule in alerts {
        let name = rule["alert"]
            .as_str()
            .expect("alerts.yml holds alerts only");
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        assert!(rule["for"].as_str().is_some(), "{name}: no for:");
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][key]
                    .as_str()
                    .is_some_and(|v| !v.is_empty()),
                "{name}: no {key}"
            );
        }
        // Where the value is a measure, the description gives it; for these two the value is
        // only the 0 of a failed state, which the text already says.
        let state_only = [
            "MailhostExporterDown",
            "MailhostCollectorFailing",
            "MailhostTeamMemberApiWithoutSecondFactor",
            "MailhostMailboxApiWithoutSecondFactor",
        ]
        .contains(&name);
        let description = rule["annotations"]["description"].as_str().unwrap();
        assert!(
            state_only || description.contains("{{ $value"),
            "{name}: the description gives the value"
        );
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url
            .strip_prefix("docs/runbook.md#")
            .unwrap_or_else(|| panic!("{name}: runbook_url {url}"));
        assert_eq!(
            anchor,
            name.to_lowercase(),
            "{name}: anchor named after the alert"
        );
        assert!(
            anchors.contains(anchor),
            "{name}: docs/runbook.md has no section {anchor}"
        );
    }
}

#[test]
fn every_alert_has_a_firing_and_a_quiet_unit_test() {
    let files = crate::mixin::UNIT_TEST_FILES.map(yaml);
    let mut fires = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for test in files.iter().flat_map(|f| f["tests"].as_sequence().unwrap()) {
        for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().unwrap().to_owned();
            if case["exp_alerts"]
                .as_sequence()
                .is_some_and(|a| a.is_empty())
            {
                quiet.insert(name);
            } else {
                fires.insert(name);
            }
        }
    }
    for rule in rules("prometheus/alerts.yml") {
        let name = rule["alert"].as_str().unwrap();
        assert!(fires.contains(name), "{name}: no test case where it fires");
        assert!(
            quiet.contains(name),
            "{name}: no test case where it stays quiet"
        );
    }
}

#[test]
fn thresholds_live_in_one_group_and_are_documented() {
    let runbook = std::fs::read_to_string(repo_root().join("docs/runbook.md")).unwrap();
    let file = yaml("prometheus/rules.yml");
    let groups = file["groups"].as_sequence().unwrap();
    let thresholds: Vec<&str> = groups
        .iter()
        .filter(|g| g["name"] == "mailhost.thresholds")
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .map(|r| r["record"].as_str().unwrap())
        .collect();
    assert!(!thresholds.is_empty());
    for t in &thresholds {
        assert!(t.starts_with("mailhost:threshold:"), "{t}");
        assert!(
            runbook.contains(&format!("`{t}`")),
            "{t} is not documented in docs/runbook.md"
        );
    }
    // No alert hides a threshold of its own in a comparison with a bare number below 1 or
    // a ratio: they compare against the threshold series.
    for rule in rules("prometheus/alerts.yml") {
        let expr = rule["expr"].as_str().unwrap();
        assert!(
            !expr.contains("> 0.") && !expr.contains("< 0."),
            "{}: {expr}",
            rule["alert"].as_str().unwrap()
        );
    }
}

/// What `mixtool lint` checks on an alert, re-implemented (mixtool is a Go tool, not packaged):
/// a CamelCase name, a severity of critical, warning or info, a summary that is a sentence
/// without template variables, a templated description and a runbook_url. Returns the
/// findings, each naming the alert and the fix.
fn mixin_lint(rule: &Value) -> Vec<String> {
    let name = rule["alert"].as_str().unwrap_or_default();
    let mut findings = Vec::new();
    let camel = name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && name.chars().any(|c| c.is_ascii_lowercase());
    if !camel {
        findings.push(format!("{name:?}: the alert name is not CamelCase"));
    }
    let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
    if !["critical", "warning", "info"].contains(&severity) {
        findings.push(format!(
            "{name}: severity {severity:?} is not one of critical, warning, info"
        ));
    }
    let annotation = |key: &str| rule["annotations"][key].as_str().unwrap_or_default();
    let summary = annotation("summary");
    if summary.is_empty() {
        findings.push(format!("{name}: no summary annotation"));
    }
    if summary.contains("{{") || summary.contains('$') {
        findings.push(format!(
            "{name}: the summary {summary:?} has template variables; move them to the description"
        ));
    }
    if !summary.ends_with('.') {
        findings.push(format!(
            "{name}: the summary {summary:?} does not end with a period"
        ));
    }
    if !summary.chars().next().is_some_and(|c| c.is_uppercase()) {
        findings.push(format!(
            "{name}: the summary {summary:?} does not start with a capital letter"
        ));
    }
    let description = annotation("description");
    if !(description.contains("{{") && description.contains("}}")) {
        findings.push(format!(
            "{name}: the description {description:?} is not templated (give the labels and the value)"
        ));
    }
    if annotation("runbook_url").is_empty() {
        findings.push(format!("{name}: no runbook_url annotation"));
    }
    findings
}

#[test]
fn every_alert_follows_the_monitoring_mixins_conventions() {
    let findings: Vec<String> = rules("prometheus/alerts.yml")
        .iter()
        .flat_map(mixin_lint)
        .collect();
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

#[test]
fn the_mixin_lint_finds_each_breach_of_the_conventions() {
    let source = "alert: MailhostThing\nlabels: {severity: warning}\nannotations:\n  summary: A thing broke.\n  description: 'Thing {{ $labels.id }} broke.'\n  runbook_url: docs/runbook.md#mailhostthing\n";
    let good: Value = serde_yaml_ng::from_str(source).unwrap();
    assert!(mixin_lint(&good).is_empty(), "{:?}", mixin_lint(&good));
    let breaches = [
        ("alert: MailhostThing", "alert: mailhost_thing", "CamelCase"),
        ("alert: MailhostThing", "alert: MAILHOST", "CamelCase"),
        ("severity: warning", "severity: page", "severity"),
        (
            "summary: A thing broke.",
            "summary: 'Thing {{ $labels.id }} broke.'",
            "template",
        ),
        (
            "summary: A thing broke.",
            "summary: A thing broke",
            "period",
        ),
        (
            "summary: A thing broke.",
            "summary: a thing broke.",
            "capital",
        ),
        (
            "description: 'Thing {{ $labels.id }} broke.'",
            "description: A thing broke.",
            "not templated",
        ),
        (
            "  runbook_url: docs/runbook.md#mailhostthing\n",
            "",
            "runbook_url",
        ),
    ];
    for (from, to, finding) in breaches {
        assert!(source.contains(from), "{from}");
        let bad: Value = serde_yaml_ng::from_str(&source.replace(from, to)).unwrap();
        let found = mixin_lint(&bad);
        assert!(
            found.iter().any(|f| f.contains(finding)),
            "{to:?} should be found ({finding}): {found:?}"
        );
    }
}
