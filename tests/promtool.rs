//! Real tools check what we ship: `promtool check metrics` on a full `/metrics` output and on
//! one filtered by `collect[]`.

use mailhost_exporter::demo;
use mailhost_sim::SimConfig;

use crate::helpers::{TOKEN, promtool, promtool_check_metrics, spawn_exporter, spawn_sim, value};

#[tokio::test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
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
    if let Err(report) = promtool_check_metrics(promtool, &body) {
        panic!("promtool check metrics:\n{report}\non:\n{body}");
    }
    // A body filtered by `collect[]` is sections put together: it must read as one.
    let filtered = exporter
        .get("/metrics?collect[]=migration")
        .await
        .text()
        .await
        .unwrap();
    assert!(filtered.contains("mailhost_migration_"), "{filtered}");
    if let Err(report) = promtool_check_metrics(promtool, &filtered) {
        panic!("promtool check metrics, collect[]=migration:\n{report}\non:\n{filtered}");
    }
}
