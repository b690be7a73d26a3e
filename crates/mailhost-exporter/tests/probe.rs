//! `/probe` and `/sd`: each account its own Prometheus target. A probe registers the account
//! in the poll set and never fetches itself; a probed account leaves after idle intervals; bad
//! input is a 400, the allow-list and cap a 403 that is counted; `/sd` lists every known account
//! ready for an `http_sd_configs` job.

use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_sim::{AccountSeed, ManagementToken, SimConfig};

use crate::helpers::{Exporter, spawn_exporter, spawn_sim_with, value, wait_for};

fn sim_config() -> SimConfig {
    let token = |t: &str, ids: std::ops::RangeInclusive<i32>| ManagementToken {
        token: t.to_owned(),
        accounts: Some(ids.collect()),
    };
    SimConfig {
        management_tokens: vec![token("alpha-token", 1..=5), token("beta-token", 11..=15)],
        accounts: (1..=5)
            .chain(11..=15)
            .map(|id| AccountSeed {
                id,
                ..AccountSeed::default()
            })
            .collect(),
        ..SimConfig::default()
    }
}

fn config(base_url: &str) -> Config {
    let yaml = format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 1s\n    deadline: 900ms\n    max_age: 30s\nprobe:\n  idle_intervals: 2\ntenants:\n  - name: alpha\n    token_env: ALPHA\n    collectors:\n      delivery_account:\n        accounts: [1]\n    probe:\n      allow: [1, 2, 3]\n  - name: beta\n    token_env: BETA\n    probe:\n      max_targets: 2\n"
    );
    Config::parse_with_env(&yaml, &|name| {
        Some(format!("{}-token", name.to_ascii_lowercase()))
    })
    .unwrap()
}

async fn probe(exporter: &Exporter, query: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(exporter.url(&format!("/probe?{query}")))
        .header("X-Prometheus-Scrape-Timeout-Seconds", "10")
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn hits(sim: &mailhost_sim::Simulator, id: i32) -> u64 {
    sim.hits(&format!("/api/delivery/accounts/{id}"))
}

#[tokio::test]
async fn a_probe_registers_its_account_once_and_later_probes_never_fetch() {
    let sim = spawn_sim_with(sim_config()).await;
    let exporter = spawn_exporter(config(&sim.url)).await;
    // Account 11 is no static target: the first probe waits for its first fetch.
    assert_eq!(hits(&sim.sim, 11), 0);
    let (status, body) = probe(&exporter, "tenant=beta&target=11").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        value(
            &body,
            "mailhost_delivery_remaining_messages{tenant=\"beta\",account_id=\"11\"}"
        )
        .is_some(),
        "{body}"
    );
    assert_eq!(
        value(
            &body,
            "mailhost_target_success{tenant=\"beta\",collector=\"delivery_account\",target=\"11\"}"
        ),
        Some(1.0)
    );
    // One account's series only, and no exporter-wide health.
    assert!(!body.contains("account_id=\"12\"") && !body.contains("mailhost_up"));
    assert!(!body.contains("mailhost_collector_success"));
    // Two Prometheus servers probing it ten times a second each, for three seconds: the account
    // is still fetched once per interval (1s), not once per probe.
    let before = hits(&sim.sim, 11);
    let started = std::time::Instant::now();
    let mut probes = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let (a, b) = tokio::join!(
            probe(&exporter, "tenant=beta&target=11"),
            probe(&exporter, "tenant=beta&target=11")
        );
        assert_eq!((a.0, b.0), (200, 200));
        probes += 2;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fetched = hits(&sim.sim, 11) - before;
    let elapsed = started.elapsed().as_secs();
    assert!(
        fetched <= elapsed + 2 && probes >= 10,
        "{fetched} fetches for {probes} probes in {elapsed}s"
    );
    // A configured account is answered without registering anything.
    let (status, body) = probe(&exporter, "tenant=alpha&target=1").await;
    assert_eq!(status, 200);
    assert!(
        body.contains("mailhost_delivery_remaining_messages{tenant=\"alpha\",account_id=\"1\"}")
    );
    // The probed account is on /metrics as well, with its tenant.
    let metrics = exporter.scrape().await;
    assert!(metrics.contains(
        "mailhost_target_success{tenant=\"beta\",collector=\"delivery_account\",target=\"11\"} 1"
    ));
}

#[tokio::test]
async fn bad_probes_are_refused_and_the_allow_list_and_cap_are_counted() {
    let sim = spawn_sim_with(sim_config()).await;
    let exporter = spawn_exporter(config(&sim.url)).await;
    for (query, status, says) in [
        ("target=1", 400, "tenant is missing"),
        (
            "tenant=nope&target=1",
            400,
            "tenant \"nope\" is not configured; configured tenants: alpha, beta",
        ),
        (
            "tenant=alpha&target=abc",
            400,
            "target \"abc\" is not a Delivery account id",
        ),
        (
            "tenant=alpha&target=-4",
            400,
            "is not a Delivery account id",
        ),
        (
            "tenant=alpha&target=99999999999",
            400,
            "is not a Delivery account id",
        ),
        ("tenant=alpha", 400, "target is missing"),
        (
            "tenant=alpha&target=4",
            403,
            "account 4 is not in the tenant's probe.allow list",
        ),
    ] {
        let (got, body) = probe(&exporter, query).await;
        assert_eq!(got, status, "{query}: {body}");
        assert!(body.contains(says), "{query}: {body}");
    }
    assert_eq!(probe(&exporter, "tenant=beta&target=12").await.0, 200);
    assert_eq!(probe(&exporter, "tenant=beta&target=13").await.0, 200);
    let (status, body) = probe(&exporter, "tenant=beta&target=14").await;
    assert_eq!(status, 403);
    assert!(body.contains("probe.max_targets"), "{body}");
    let metrics = exporter.scrape().await;
    assert_eq!(
        value(
            &metrics,
            "mailhost_probe_refused_total{tenant=\"beta\",reason=\"max_targets\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &metrics,
            "mailhost_probe_refused_total{tenant=\"alpha\",reason=\"not_allowed\"}"
        ),
        Some(1.0)
    );
    // Nothing refused was ever fetched.
    assert_eq!(hits(&sim.sim, 4) + hits(&sim.sim, 14), 0);
}

#[tokio::test]
async fn an_account_no_longer_probed_leaves_the_poll_set_after_its_idle_intervals() {
    let sim = spawn_sim_with(sim_config()).await;
    let exporter = spawn_exporter(config(&sim.url)).await;
    assert_eq!(probe(&exporter, "tenant=beta&target=15").await.0, 200);
    let series =
        "mailhost_target_success{tenant=\"beta\",collector=\"delivery_account\",target=\"15\"}";
    assert!(value(&exporter.scrape().await, series).is_some());
    // idle_intervals 2 of a 1s interval: gone a few seconds later, and no longer fetched.
    wait_for("account 15 dropped", || async {
        value(&exporter.scrape().await, series)
            .is_none()
            .then_some(())
    })
    .await;
    let after = hits(&sim.sim, 15);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(hits(&sim.sim, 15), after);
}

#[tokio::test]
async fn sd_lists_every_known_account_ready_for_an_http_sd_job() {
    let sim = spawn_sim_with(sim_config()).await;
    let exporter = spawn_exporter(config(&sim.url)).await;
    assert_eq!(probe(&exporter, "tenant=beta&target=12").await.0, 200);
    let response = exporter.get("/sd").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let groups: Vec<serde_json::Value> = response.json().await.unwrap();
    let address = exporter.addr.to_string();
    let expected = serde_json::json!([
        {"targets": [address], "labels": {"__metrics_path__": "/probe", "__param_tenant": "alpha", "__param_target": "1", "instance": "alpha/1", "__meta_mailhost_tenant": "alpha", "__meta_mailhost_source": "configured"}},
        {"targets": [address], "labels": {"__metrics_path__": "/probe", "__param_tenant": "beta", "__param_target": "12", "instance": "beta/12", "__meta_mailhost_tenant": "beta", "__meta_mailhost_source": "probe"}},
    ]);
    assert_eq!(serde_json::Value::Array(groups), expected);
}

#[tokio::test]
async fn a_first_probe_during_a_long_run_is_fetched_beside_it_within_the_scrape_timeout() {
    let sim = spawn_sim_with(sim_config()).await;
    // alpha's one static account answers after 20 s: its run lasts that long.
    sim.sim.add_fault(
        mailhost_sim::Route::DeliveryAccountGet,
        mailhost_sim::FaultSpec {
            latency: Some(Duration::from_secs(20)),
            only_ids: Some(vec!["1".to_owned()]),
            ..mailhost_sim::FaultSpec::default()
        },
    );
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 25s\ncollectors:\n  delivery_account:\n    interval: 60s\n    deadline: 30s\ntenants:\n  - name: alpha\n    token_env: ALPHA\n    collectors:\n      delivery_account:\n        accounts: [1]\n",
        sim.url
    );
    let config = Config::parse_with_env(&yaml, &|_| Some("alpha-token".to_owned())).unwrap();
    let exporter = spawn_exporter(config).await;
    // The run over account 1 is under way; account 2 is probed with a 5 s scrape timeout.
    wait_for("the long run under way", || async {
        (hits(&sim.sim, 1) > 0).then_some(())
    })
    .await;
    let response = reqwest::Client::new()
        .get(exporter.url("/probe?tenant=alpha&target=2"))
        .header("X-Prometheus-Scrape-Timeout-Seconds", "5")
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("mailhost_delivery_remaining_messages{tenant=\"alpha\",account_id=\"2\"}")
    );
}
