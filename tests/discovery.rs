//! Discovery: the accounts of the dashboard's top lists join the account collectors, and the
//! sending domains of the daily statistics become dashboard views; allow and deny lists and caps
//! hold, a 404 removes, and `/sd` says where each target came from.

use mailhost_exporter::config::Config;
use mailhost_sim::{Account, AccountSeed, ManagementToken, SimConfig};

use crate::helpers::{spawn_exporter, spawn_sim_with, value, wait_for};

const TOKEN: &str = "acme-token";

fn sim_config() -> SimConfig {
    SimConfig {
        management_tokens: vec![ManagementToken {
            token: TOKEN.to_owned(),
            accounts: Some((1..=6).collect()),
        }],
        accounts: (1..=6)
            .map(|id| {
                AccountSeed::from(Account {
                    id,
                    domains: vec![format!("shop{id}.example")],
                    ..Account::default()
                })
            })
            .collect(),
        // Every account has sent mail today: the dashboard's top lists name them.
        history: true,
        ..SimConfig::default()
    }
}

/// Discovered accounts live `idle_intervals` dashboard intervals after they were last named: 30
/// of 1 s, so that dashboard runs slowed past their deadline on a loaded machine do not let the
/// discovered set change under the test.
fn config(base_url: &str) -> Config {
    let yaml = format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\nprobe:\n  idle_intervals: 30\ncollectors:\n  delivery_account:\n    interval: 1s\n    deadline: 900ms\n    max_age: 30s\n  tracemail_dashboard:\n    interval: 1s\n    deadline: 900ms\n    max_age: 30s\n  tracemail_daily:\n    interval: 1s\n    deadline: 900ms\n    max_age: 30s\ntenants:\n  - name: acme\n    token_env: ACME\n    collectors:\n      tracemail_daily:\n        accounts: [1]\n    discovery:\n      accounts: true\n      domains: true\n      deny: [2]\n      max_accounts: 4\n"
    );
    Config::parse_with_env(&yaml, &|_| Some(TOKEN.to_owned())).unwrap()
}

fn remaining(id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{tenant=\"acme\",account_id=\"{id}\"}}")
}

#[tokio::test]
async fn top_accounts_and_sending_domains_are_discovered_within_the_lists_and_a_404_removes() {
    let sim = spawn_sim_with(sim_config()).await;
    let exporter = spawn_exporter(config(&sim.url)).await;
    // The delivery_account collector has no static account: what it polls, it discovered.
    let body = wait_for("discovered accounts polled", || async {
        let body = exporter.scrape().await;
        let found = (1..=6)
            .filter(|id| value(&body, &remaining(*id)).is_some())
            .count();
        (found == 4).then_some(body)
    })
    .await;
    // 2 is denied; the cap of 4 leaves one of the other five out.
    assert!(value(&body, &remaining(2)).is_none(), "{body}");
    // The daily statistics of account 1 name its sending domain: a dashboard view of it.
    wait_for("a discovered domain view", || async {
        let body = exporter.scrape().await;
        body.lines()
            .any(|l| {
                l.starts_with("mailhost_tracemail_current_day_messages{tenant=\"acme\",domain=\"shop1.example\"")
            })
            .then_some(())
    })
    .await;
    // /sd says where each came from.
    let groups: Vec<serde_json::Value> = exporter.get("/sd").await.json().await.unwrap();
    let discovered: Vec<String> = groups
        .iter()
        .filter(|g| g["labels"]["__meta_mailhost_source"] == "discovered")
        .map(|g| g["labels"]["__param_target"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(discovered.len(), 4, "{groups:?}");
    assert!(!discovered.contains(&"2".to_owned()));
    // The provider removes a discovered account: its 404 takes it out of the poll set.
    let gone: i32 = discovered[0].parse().unwrap();
    assert!(sim.sim.remove_account(gone));
    wait_for("the removed account dropped", || async {
        let body = exporter.scrape().await;
        value(&body, &remaining(gone)).is_none().then_some(())
    })
    .await;
    let groups: Vec<serde_json::Value> = exporter.get("/sd").await.json().await.unwrap();
    assert!(
        groups
            .iter()
            .all(|g| g["labels"]["__param_target"] != gone.to_string().as_str()),
        "{groups:?}"
    );
}
