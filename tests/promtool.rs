//! Real tools check what we ship: `promtool check metrics` on a full `/metrics` output.

use std::io::Write as _;
use std::process::{Command, Stdio};

use mailhost_exporter::demo;
use mailhost_exporter::sim::SimConfig;

use crate::helpers::{TOKEN, promtool, spawn_exporter, spawn_sim, value};

#[tokio::test]
async fn promtool_finds_nothing_to_complain_about_in_metrics() {
    let Some(promtool) = promtool() else { return };
    let sim = spawn_sim().await;
    // Every collector of demo mode, plus an unknown account so failure series are checked too.
    let mut targets = SimConfig::demo(TOKEN).demo_targets();
    targets.accounts.push(999);
    let exporter = spawn_exporter(demo::config(&sim.url, TOKEN, &targets)).await;
    let collectors = [
        "delivery_account",
        "tracemail_dashboard",
        "tracemail_daily",
        "migration",
        "mailbox",
    ];
    let body = exporter
        .scrape_until("a full run of every collector", |b| {
            collectors.iter().all(|c| {
                value(
                    b,
                    &format!("mailhost_collector_success{{collector=\"{c}\"}}"),
                )
                .is_some()
            })
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
