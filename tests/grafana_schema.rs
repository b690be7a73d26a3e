//! The dashboards against Grafana's own model: each goes through the dashboard, panel and query
//! models of Grafana's foundation SDK and back without losing a key or a value, every option
//! and field config is of the type its panel type declares, and every unit is one of the ids
//! `@grafana/data` lists. Both packages are read at test time (`.ci/grafana-packages`).

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::{GrafanaPackages, grafana_packages, repo_root};

fn checker() -> PathBuf {
    repo_root().join("tests/grafana/check_dashboards.py")
}

fn dashboards() -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(repo_root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// Runs the checker: (passed, its report).
fn check(packages: &GrafanaPackages, files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(packages.python)
        .arg(checker())
        .arg("--grafana-data")
        .arg(&packages.data)
        .args(files)
        .env("PYTHONPATH", &packages.sdk)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), report)
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn every_dashboard_survives_a_round_trip_through_grafanas_model() {
    let Some(packages) = grafana_packages() else {
        return;
    };
    let files = dashboards();
    assert!(files.len() >= 4, "four dashboards at least");
    let (passed, report) = check(&packages, &files);
    assert!(passed, "Grafana's model refuses our dashboards:\n{report}");
    // The summary counts what was read, so a checker that read nothing cannot pass.
    let summary = report.lines().last().unwrap_or_default();
    let count = |what: &str| -> usize {
        summary
            .split(", ")
            .flat_map(|part| part.split_once(' '))
            .find(|(_, rest)| rest.starts_with(what))
            .and_then(|(n, _)| {
                n.trim_start_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    assert!(
        count("panels") > 40 && count("units") > 40,
        "too little checked: {summary}"
    );
    eprintln!("{summary}");
}

/// Every panel of a dashboard, rows' nested panels included.
fn panels_mut(dashboard: &mut Value) -> Vec<&mut Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array_mut().unwrap() {
        let has_nested = panel["panels"].as_array().is_some_and(|p| !p.is_empty());
        if has_nested {
            out.extend(panel["panels"].as_array_mut().unwrap().iter_mut());
        } else {
            out.push(panel);
        }
    }
    out
}

fn first_of<'a>(panels: &'a mut [&mut Value], kind: &str) -> &'a mut Value {
    panels
        .iter_mut()
        .find(|p| p["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} panel to spoil"))
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_checker_finds_what_grafanas_model_refuses() {
    let Some(packages) = grafana_packages() else {
        return;
    };
    let source = repo_root().join("dashboards/fleet-overview.json");
    let mut dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(&source).unwrap()).unwrap();
    {
        let mut panels = panels_mut(&mut dashboard);
        let bars = first_of(&mut panels, "bargauge");
        bars["options"]["displayMode"] = json!("wiggly");
        bars["fieldConfig"]["defaults"]["unit"] = json!("messages");
        let series = first_of(&mut panels, "timeseries");
        series["options"]["frobnicate"] = json!(true);
        series["fieldConfig"]["defaults"]["custom"]["lineWidth"] = json!("thick");
        series["fieldConfig"]["overrides"] = json!([{
            "matcher": {"id": "byName", "options": "sent"},
            "properties": [
                {"id": "custom.sparkle", "value": 1},
                {"id": "unit", "value": "msgs"}
            ]
        }]);
    }
    dashboard["panels"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "graph", "title": "Old graph", "id": 990}));
    dashboard["templating"]["list"][1]["definition"] = json!("label_values(job)");
    let dir = tempfile::tempdir().unwrap();
    let spoiled = dir.path().join("spoiled.json");
    std::fs::write(&spoiled, serde_json::to_string_pretty(&dashboard).unwrap()).unwrap();

    let (passed, report) = check(&packages, &[spoiled]);
    assert!(!passed, "a spoiled dashboard passed:\n{report}");
    for finding in [
        ".options.display_mode: 'wiggly' is not",
        "unit 'messages' is not one of Grafana's unit ids",
        ".options.frobnicate: dropped by Grafana's model",
        ".custom.line_width: 'thick' is not",
        "(custom.sparkle).sparkle: dropped by Grafana's model",
        "unit 'msgs' is not one of Grafana's unit ids",
        "panel type 'graph' is not a Grafana panel",
        "templating.list[1].definition: dropped by Grafana's model",
    ] {
        assert!(
            report.contains(finding),
            "no finding {finding:?} in:\n{report}"
        );
    }
    // The untouched original passes: the findings come from the spoiling alone.
    assert!(check(&packages, &[source]).0);
}
