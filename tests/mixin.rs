//! The monitoring mixin (`mixin/`) is the one source of the rules and dashboards we ship: the
//! committed files are its fresh render, an overridden selector reaches every expression,
//! per-account thresholds work, and VictoriaMetrics' vmalert loads the rules too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

use crate::helpers::{promtool, repo_root, tool};

const JSONNET: (&str, &str) = ("jsonnet", "apt-get install jsonnet");

/// The shipped rule unit tests, by path from the repository root.
pub(crate) const UNIT_TEST_FILES: [&str; 3] = [
    "prometheus/tests/alerts.test.yml",
    "prometheus/tests/weekly.test.yml",
    "prometheus/tests/forecast.test.yml",
];
const VMALERT: (&str, &str) = ("vmalert", "apt-get install victoria-metrics");
/// A selector with a second label, as a multi-cluster set-up would use.
const OTHER_SELECTOR: &str = r#"job="other",cluster="x""#;

pub(crate) fn jsonnet() -> Option<&'static str> {
    tool(JSONNET.0, JSONNET.1)
}

/// The forecast of the quota rules shrunk from weeks to seconds, for tests that watch it move
/// (a `config` for [`render`] and [`render_rules`]): a pace over 20 s, its typical value over a
/// minute, what is left weighed over 2 s.
pub(crate) const FORECAST_IN_SECONDS: &str = "{ forecast+: { interval: '1s', paceWindow: '20s', typicalOver: '1m', lookback: '3s', levelWindowSeconds: 2 } }";

/// Renders the mixin with `config` (jsonnet code merged into `_config`) into a fresh directory
/// laid out like the repository; returns it and the paths written, relative to it.
pub(crate) fn render(jsonnet: &str, config: &str) -> (tempfile::TempDir, Vec<String>) {
    render_parts(jsonnet, config, "all")
}

/// [`render`], the rule files alone: a render without the dashboards takes a tenth of the time.
pub(crate) fn render_rules(jsonnet: &str, config: &str) -> (tempfile::TempDir, Vec<String>) {
    render_parts(jsonnet, config, "rules")
}

fn render_parts(jsonnet: &str, config: &str, parts: &str) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["prometheus/tests", "dashboards"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let out = Command::new(jsonnet)
        .args(["-S", "-m"])
        .arg(dir.path())
        .arg("--tla-code")
        .arg(format!("config={config}"))
        .arg("--tla-str")
        .arg(format!("parts={parts}"))
        .arg(repo_root().join("mixin/render.jsonnet"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "jsonnet render.jsonnet:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = format!("{}/", dir.path().display());
    let files = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.strip_prefix(&prefix).unwrap_or(l).to_owned())
        .collect();
    (dir, files)
}

fn run(program: &str, args: &[&str], dir: &Path) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {}:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn yaml(path: &Path) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every expression of the rule files under `dir`.
fn exprs(dir: &Path) -> Vec<String> {
    ["prometheus/rules.yml", "prometheus/alerts.yml"]
        .iter()
        .flat_map(|f| {
            let file = yaml(&dir.join(f));
            file["groups"]
                .as_sequence()
                .unwrap()
                .iter()
                .flat_map(|g| g["rules"].as_sequence().unwrap().clone())
                .map(|r| r["expr"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The raw series an expression reads (the exporter's metrics and `up`), each with the text
/// that follows its name. Recorded series (with a colon) are derived from these.
fn raw_series(expr: &str) -> Vec<(String, String)> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut found = Vec::new();
    let mut rest = expr;
    let mut in_string = false;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            in_string = !in_string;
            rest = &rest[1..];
            continue;
        }
        if in_string || !(c.is_ascii_alphabetic() || c == '_') {
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let end = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
        let name = &rest[..end];
        if !name.contains(':') && (name.starts_with("mailhost_") || name == "up") {
            found.push((name.to_owned(), rest[end..].to_owned()));
        }
        rest = &rest[end..];
    }
    found
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_committed_rules_and_dashboards_are_a_fresh_render_of_the_mixin() {
    let Some(jsonnet) = jsonnet() else { return };
    let (dir, files) = render(jsonnet, "{}");
    let mut stale = Vec::new();
    for f in &files {
        let fresh = std::fs::read_to_string(dir.path().join(f)).unwrap();
        let committed = std::fs::read_to_string(repo_root().join(f)).unwrap_or_default();
        if fresh != committed {
            stale.push(f.clone());
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from a fresh render of mixin/: run mixin/build.sh and commit the result"
    );
    // Nothing hand-written beside the render: every shipped rule file and dashboard is one.
    let rendered: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    let mut shipped = vec![
        "prometheus/rules.yml".to_owned(),
        "prometheus/alerts.yml".to_owned(),
    ];
    for entry in std::fs::read_dir(repo_root().join("dashboards")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        shipped.push(format!("dashboards/{name}"));
    }
    for f in shipped {
        assert!(
            rendered.contains(f.as_str()),
            "{f} is not rendered by mixin/"
        );
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_mixin_sources_are_formatted_by_jsonnetfmt() {
    if jsonnet().is_none() {
        return;
    }
    // jsonnetfmt ships in the same package as jsonnet.
    let dir = repo_root().join("mixin");
    let mut sources: Vec<PathBuf> = Vec::new();
    for sub in [dir.clone(), dir.join("dashboards"), dir.join("tests")] {
        for entry in std::fs::read_dir(sub).unwrap() {
            let path = entry.unwrap().path();
            if path
                .extension()
                .is_some_and(|e| e == "libsonnet" || e == "jsonnet")
            {
                sources.push(path);
            }
        }
    }
    assert!(sources.len() >= 8, "{sources:?}");
    for path in sources {
        let out = Command::new("jsonnetfmt")
            .arg("--test")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} is not as jsonnetfmt writes it (jsonnetfmt -i {0}){}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn an_overridden_selector_reaches_every_expression_and_the_unit_tests_still_pass() {
    let Some(jsonnet) = jsonnet() else { return };
    let Some(promtool) = promtool() else { return };
    let config = format!("{{ mailhostSelector: '{OTHER_SELECTOR}' }}");
    let (dir, _) = render(jsonnet, &config);

    let mut reads = 0;
    for expr in exprs(dir.path()) {
        assert!(!expr.contains(r#"job="mailhost""#), "{expr}");
        for (name, after) in raw_series(&expr) {
            reads += 1;
            assert!(
                after.starts_with(&format!("{{{OTHER_SELECTOR}")),
                "{name} does not carry the selector in: {expr}"
            );
        }
    }
    assert!(
        reads >= 20,
        "only {reads} raw series found: the scan is broken"
    );

    // Every dashboard's job variable offers the jobs the selector selects.
    for file in [
        "account",
        "exporter-health",
        "fleet-overview",
        "migrations-mailboxes",
    ] {
        let text =
            std::fs::read_to_string(dir.path().join(format!("dashboards/{file}.json"))).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let job = json["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "job")
            .unwrap_or_else(|| panic!("{file}: no job variable"));
        assert_eq!(
            job["query"]["query"],
            format!("label_values(mailhost_build_info{{{OTHER_SELECTOR}}}, job)"),
            "{file}"
        );
    }

    // The shipped unit tests, with the selector's labels on every input series and every
    // expected alert.
    let mut series_moved = 0;
    for file in UNIT_TEST_FILES {
        let mut tests = yaml(&repo_root().join(file));
        for test in tests["tests"].as_sequence_mut().unwrap() {
            for input in test["input_series"].as_sequence_mut().unwrap() {
                let series = input["series"].as_str().unwrap();
                assert!(series.contains(r#"job="mailhost""#), "{series}");
                input["series"] = Value::from(series.replace(r#"job="mailhost""#, OTHER_SELECTOR));
                series_moved += 1;
            }
            let exprs = test
                .get_mut("promql_expr_test")
                .and_then(Value::as_sequence_mut);
            for case in exprs.into_iter().flatten() {
                let samples = case.get_mut("exp_samples").and_then(Value::as_sequence_mut);
                for sample in samples.into_iter().flatten() {
                    let labels = sample["labels"].as_str().unwrap_or_default();
                    sample["labels"] =
                        Value::from(labels.replace(r#"job="mailhost""#, OTHER_SELECTOR));
                }
            }
            let cases = test
                .get_mut("alert_rule_test")
                .and_then(Value::as_sequence_mut);
            for case in cases.into_iter().flatten() {
                for alert in case["exp_alerts"].as_sequence_mut().unwrap() {
                    let labels = alert["exp_labels"].as_mapping_mut().unwrap();
                    assert_eq!(labels.remove("job"), Some(Value::from("mailhost")));
                    labels.insert("job".into(), "other".into());
                    labels.insert("cluster".into(), "x".into());
                }
            }
        }
        std::fs::write(
            dir.path().join(file),
            serde_yaml_ng::to_string(&tests).unwrap(),
        )
        .unwrap();
    }
    assert!(series_moved > 30);
    let mut args = vec!["test", "rules"];
    args.extend(UNIT_TEST_FILES);
    run(promtool, &args, dir.path());
    run(
        promtool,
        &[
            "check",
            "rules",
            "--lint=all",
            "--lint-fatal",
            "prometheus/rules.yml",
            "prometheus/alerts.yml",
        ],
        dir.path(),
    );
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn per_account_thresholds_fire_where_the_default_would_not_and_the_other_way_round() {
    let Some(jsonnet) = jsonnet() else { return };
    let Some(promtool) = promtool() else { return };
    let tests = repo_root().join("mixin/tests");
    let config = std::fs::read_to_string(tests.join("account_overrides.jsonnet")).unwrap();
    let (dir, _) = render_rules(jsonnet, &config);

    // The overrides are recorded series in their own group, one per account and threshold.
    let rules = yaml(&dir.path().join("prometheus/rules.yml"));
    let overrides: Vec<(String, String)> = rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter(|g| g["name"] == "mailhost.thresholds.accounts")
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .map(|r| {
            (
                r["record"].as_str().unwrap().to_owned(),
                r["labels"]["account_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(overrides.len(), 4, "{overrides:?}");
    assert!(overrides.contains(&(
        "mailhost:threshold_override:quota_remaining_critical_ratio".into(),
        "1006".into()
    )));

    std::fs::copy(
        tests.join("account_overrides.test.yml"),
        dir.path()
            .join("prometheus/tests/account_overrides.test.yml"),
    )
    .unwrap();
    run(
        promtool,
        &[
            "test",
            "rules",
            "prometheus/tests/account_overrides.test.yml",
        ],
        dir.path(),
    );
    // The shipped tests hold for accounts without an override.
    std::fs::copy(
        repo_root().join("prometheus/tests/alerts.test.yml"),
        dir.path().join("prometheus/tests/alerts.test.yml"),
    )
    .unwrap();
    run(
        promtool,
        &["test", "rules", "prometheus/tests/alerts.test.yml"],
        dir.path(),
    );
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn an_override_of_a_threshold_that_is_not_per_account_is_refused() {
    let Some(jsonnet) = jsonnet() else { return };
    let out = Command::new(jsonnet)
        .arg("--tla-code")
        .arg("config={ accountOverrides: [{ account_id: '1', stale_intervals: 5 }] }")
        .args(["--tla-str", "parts=rules"])
        .arg(repo_root().join("mixin/render.jsonnet"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("accountOverrides may set only"), "{stderr}");
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn a_forecast_setting_out_of_range_is_refused_with_its_fix() {
    let Some(jsonnet) = jsonnet() else { return };
    for (config, says) in [
        (
            "{ forecast+: { typicalQuantile: 40 } }",
            "forecast.typicalQuantile is a share between 0 and 1",
        ),
        (
            "{ forecast+: { risingFactor: 0.9 } }",
            "forecast.risingFactor is a weekly growth factor of at least 1",
        ),
        (
            "{ forecast+: { steadySpread: 1 } }",
            "forecast.steadySpread is a ratio above 1",
        ),
        (
            "{ thresholds+: { quota_exhaustion_pace_margin_ratio: 1 } }",
            "quota_exhaustion_pace_margin_ratio is a share from 0",
        ),
        (
            "{ accountOverrides: [{ account_id: '1', quota_exhaustion_pace_margin_ratio: -0.1 }] }",
            "quota_exhaustion_pace_margin_ratio is a share from 0",
        ),
    ] {
        let out = Command::new(jsonnet)
            .arg("--tla-code")
            .arg(format!("config={config}"))
            .args(["--tla-str", "parts=rules"])
            .arg(repo_root().join("mixin/render.jsonnet"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{config}: rendered");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{config}: {stderr}");
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn vmalert_loads_the_shipped_rule_files_in_dry_run() {
    let Some(vmalert) = tool(VMALERT.0, VMALERT.1) else {
        return;
    };
    let Some(jsonnet) = jsonnet() else { return };
    let root = repo_root();
    // Debian's vmalert (1.79) predates keep_firing_for (1.90): the alerts load once the mixin
    // leaves it out, and that render is the shipped file without its keep_firing_for lines.
    let (dir, _) = render_rules(jsonnet, "{ keepFiringFor: '' }");
    let alerts = dir.path().join("prometheus/alerts.yml");
    let shipped = std::fs::read_to_string(root.join("prometheus/alerts.yml")).unwrap();
    let without: Vec<&str> = shipped
        .lines()
        .filter(|l| !l.trim_start().starts_with("keep_firing_for:"))
        .collect();
    assert_eq!(
        std::fs::read_to_string(&alerts).unwrap(),
        without.join("\n") + "\n"
    );
    assert!(shipped.contains("keep_firing_for: 10m"));
    // A file vmalert cannot load (expression or template) is a fatal exit, not a warning.
    run(
        vmalert,
        &[
            "-dryRun",
            "-rule=prometheus/rules.yml",
            &format!("-rule={}", alerts.display()),
        ],
        &root,
    );
}

/// The alert rules of a render (or of the repository, at its root).
pub(crate) fn alert_rules(dir: &Path) -> Vec<Value> {
    yaml(&dir.join("prometheus/alerts.yml"))["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().clone())
        .collect()
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_labels_alerts_carry_follow_the_config_switches() {
    let Some(jsonnet) = jsonnet() else { return };
    // Shipped: a collector label on each alert on one collector's targets, no other label.
    let (dir, _) = render_rules(jsonnet, "{}");
    let shipped = alert_rules(dir.path());
    let with_collector = shipped
        .iter()
        .filter(|a| a["labels"]["collector"].is_string())
        .count();
    assert!(with_collector >= 20, "{with_collector}");
    // alertLabels reach every alert but cannot change its severity; the collector label goes.
    let (dir, _) = render_rules(
        jsonnet,
        "{ alertLabels: { team: 'mail', severity: 'none' }, alertCollectorLabel: false }",
    );
    let changed = alert_rules(dir.path());
    assert_eq!(changed.len(), shipped.len());
    for (alert, before) in changed.iter().zip(&shipped) {
        let name = alert["alert"].as_str().unwrap();
        assert_eq!(alert["labels"]["team"], "mail", "{name}");
        assert_eq!(
            alert["labels"]["severity"], before["labels"]["severity"],
            "{name}"
        );
        assert!(alert["labels"]["collector"].is_null(), "{name}");
    }
}

/// The backtest of the shipped rules (`bench/alerts.py`, docs/mixin.md "The backtest") on a
/// smaller fleet: five accounts of each kind over 40 judged days; it fails when a figure misses
/// its floor.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_backtest_of_the_shipped_rules_meets_its_floors() {
    let Some(_) = tool(VMALERT.0, VMALERT.1) else {
        return;
    };
    let Some(_) = tool("victoria-metrics", "apt-get install victoria-metrics") else {
        return;
    };
    let out = Command::new("python3")
        .current_dir(repo_root())
        .args(["bench/alerts.py", "--per-kind", "5", "--check"])
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("every figure within its floor"), "{text}");
}
