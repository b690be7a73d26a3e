//! Real tools check what we ship: `promtool check metrics` on a full `/metrics` output.

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::helpers::{TOKEN, config, promtool, spawn_exporter, spawn_sim, value};

#[tokio::test]
async fn promtool_finds_nothing_to_complain_about_in_metrics() {
    let Some(promtool) = promtool() else { return };
    let sim = spawn_sim().await;
    // One unknown account too, so failure series are part of what is checked.
    let exporter =
        spawn_exporter(config(&sim.url, TOKEN, &[1001, 1002, 1003, 1004, 999], "")).await;
    let body = exporter
        .scrape_until("a full run", |b| {
            value(
                b,
                "mailhost_collector_success{collector=\"delivery_account\"}",
            )
            .is_some()
        })
        .await;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics:\n{report}\non:\n{body}"
    );
}
