//! `/probe` and `/sd`: each account its own Prometheus target. A probe registers the account
//! in the poll set and never fetches itself; a probed account leaves after idle intervals; bad
//! input is a 400, the allow-list and cap a 403 that is counted; `/sd` lists every known account
//! ready for an `http_sd_configs` job.

use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_sim::{AccountSeed, ManagementToken, SimConfig};

use crate::helpers::{Exporter, PATIENCE, spawn_exporter, spawn_sim_with, value, wait_for};

fn sim_config() -> SimConfig {
    let token = |t: &str, ids: std::ops::RangeInclusive<i32>| ManagementToken {
        token: t.to_owned(),
        accounts: Some(ids.collect()),
    };
    SimConfig {
        management_tokens: vec![token("alpha-token", 1..=5), token("beta-token", 11..=15)],
        accounts: (1..=5).chain(11..=15).map(AccountSeed::with_id).collect(),
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
    // Two runs of beta's collector later, 15 is still not fetched: account 12, probed now, is
    // the witness that the runs happened.
    assert_eq!(probe(&exporter, "tenant=beta&target=12").await.0, 200);
    let witness = hits(&sim.sim, 12);
    wait_for("two more runs of beta's collector", || async {
        (hits(&sim.sim, 12) >= witness + 2).then_some(())
    })
    .await;
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

/// A tenant whose token sees accounts 1 to 5; the provider knows no other id. Account 1 is
/// configured in `delivery_account` only.
fn stranger_config(base_url: &str) -> Config {
    let yaml = format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 2s\n    max_age: 30s\n  tracemail_daily:\n    interval: 2s\n    max_age: 30s\nprobe:\n  new_per_interval: 10\n  first_fetches: 4\ntenants:\n  - name: alpha\n    token_env: ALPHA\n    collectors:\n      delivery_account:\n        accounts: [1]\n"
    );
    Config::parse_with_env(&yaml, &|_| Some("alpha-token".to_owned())).unwrap()
}

/// A probe with the longest scrape timeout the exporter takes (120 s), answered well before it:
/// within the helpers' patience, a quarter of it. A probe that waited for a fetch that never
/// comes would only be answered when that timeout ran out, and fails here.
async fn probe_before_its_timeout(exporter: &Exporter, query: &str) -> (u16, String) {
    let asked = async {
        let response = reqwest::Client::new()
            .get(exporter.url(&format!("/probe?{query}")))
            .header("X-Prometheus-Scrape-Timeout-Seconds", "120")
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    };
    tokio::time::timeout(PATIENCE, asked)
        .await
        .unwrap_or_else(|_| {
            panic!("/probe?{query} waited for its scrape timeout instead of answering")
        })
}

#[tokio::test]
async fn made_up_ids_cost_a_bounded_number_of_calls_and_a_refused_first_fetch_is_answered_at_once()
{
    let sim = spawn_sim_with(sim_config()).await;
    let exporter = spawn_exporter(stranger_config(&sim.url)).await;
    // An id the tenant's token may not see (the simulator answers 403 for any id outside a
    // token's scope, known or not): answered as soon as its first fetch ends, not after the
    // 120 s the scrape timeout would allow.
    let (status, body) = probe_before_its_timeout(&exporter, "tenant=alpha&target=900").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("HTTP 403"), "{body}");
    // Asked again: answered from the refusal, with no call.
    let calls = hits(&sim.sim, 900);
    assert_eq!(probe(&exporter, "tenant=alpha&target=900").await.0, 403);
    assert_eq!(hits(&sim.sim, 900), calls);
    // A stranger probing 300 made-up ids: at most 10 new accounts per 2 s interval reach the
    // provider, whatever it answers; the others are refused at once and counted.
    let started = std::time::Instant::now();
    let mut statuses = std::collections::BTreeMap::new();
    for id in 1000..1300 {
        let (status, _) =
            probe_before_its_timeout(&exporter, &format!("tenant=alpha&target={id}")).await;
        *statuses.entry(status).or_insert(0) += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let made_up_calls: u64 = (1000..1300).map(|id| hits(&sim.sim, id)).sum();
    let most = ((elapsed / 2.0).ceil() as u64 + 1) * 10;
    assert!(
        made_up_calls <= most,
        "{made_up_calls} calls for made-up ids in {elapsed:.1}s; at most {most}"
    );
    assert!(
        statuses.get(&429).is_some_and(|n| *n > 0),
        "the budget refused some: {statuses:?}"
    );
    let body = exporter.scrape().await;
    for reason in ["new_accounts", "provider_refused"] {
        let series =
            format!("mailhost_probe_refused_total{{tenant=\"alpha\",reason=\"{reason}\"}}");
        assert!(value(&body, &series).is_some_and(|n| n > 0.0), "{series}");
    }
    // None of them is listed by /sd: a typo never becomes a target a scraper keeps alive.
    let groups: Vec<serde_json::Value> = exporter.get("/sd").await.json().await.unwrap();
    let listed: Vec<String> = groups
        .iter()
        .map(|g| g["labels"]["__param_target"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ["1"], "{listed:?}");
}

#[tokio::test]
async fn a_probe_of_an_account_configured_in_one_collector_never_waits_for_the_other() {
    let sim = spawn_sim_with(sim_config()).await;
    let exporter = spawn_exporter(stranger_config(&sim.url)).await;
    exporter
        .scrape_until("account 1 polled", |b| {
            value(
                b,
                "mailhost_delivery_remaining_messages{tenant=\"alpha\",account_id=\"1\"}",
            )
            .is_some()
        })
        .await;
    // tracemail_daily never fetches account 1: every probe is answered at once, from
    // delivery_account alone.
    for _ in 0..3 {
        let (status, body) = probe_before_its_timeout(&exporter, "tenant=alpha&target=1").await;
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(
                "mailhost_delivery_remaining_messages{tenant=\"alpha\",account_id=\"1\"}"
            )
        );
        assert!(!body.contains("collector=\"tracemail_daily\""), "{body}");
    }
    // A probed account is polled by both, and answered once both have fetched it.
    let (status, body) = probe_before_its_timeout(&exporter, "tenant=alpha&target=2").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("collector=\"tracemail_daily\""), "{body}");
}

#[tokio::test]
async fn strangers_waiting_on_first_fetches_never_crowd_out_metrics() {
    let sim = spawn_sim_with(sim_config()).await;
    // Every account of the stranger's waves answers after 5 s: each probe waits on its fetch.
    sim.sim.add_fault(
        mailhost_sim::Route::DeliveryAccountGet,
        mailhost_sim::FaultSpec {
            latency: Some(Duration::from_secs(5)),
            only_ids: Some(vec!["2".into(), "3".into(), "4".into(), "5".into()]),
            ..mailhost_sim::FaultSpec::default()
        },
    );
    let exporter = spawn_exporter(stranger_config(&sim.url)).await;
    exporter
        .scrape_until("the first run", |b| b.contains("account_id=\"1\""))
        .await;
    // Three waves of 20 probes each (the default --web.max-requests is 40), unauthenticated,
    // of accounts whose first fetch takes 5 s, while /metrics is scraped.
    let client = reqwest::Client::new();
    let mut waves = Vec::new();
    for wave in 0..3 {
        for i in 0..20 {
            let url = exporter.url(&format!(
                "/probe?tenant=alpha&target={}",
                2 + (wave * 20 + i) % 4
            ));
            let client = client.clone();
            waves.push(tokio::spawn(async move {
                client
                    .get(url)
                    .header("X-Prometheus-Scrape-Timeout-Seconds", "10")
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
            }));
        }
    }
    // The waves are in: the stranger's accounts are being fetched.
    wait_for("the waves' fetches under way", || async {
        (2..=5)
            .all(|id| sim.sim.hits(&format!("/api/delivery/accounts/{id}")) > 0)
            .then_some(())
    })
    .await;
    for _ in 0..20 {
        let r = exporter.get("/metrics").await;
        assert_eq!(r.status(), 200, "a scrape of /metrics was crowded out");
        assert_eq!(exporter.get("/-/healthy").await.status(), 200);
        assert_eq!(exporter.get("/-/ready").await.status(), 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut statuses = std::collections::BTreeMap::new();
    for w in waves {
        *statuses.entry(w.await.unwrap()).or_insert(0) += 1;
    }
    // Some waited and got their account; the rest were told at once to come back.
    assert!(statuses.get(&200).is_some_and(|n| *n > 0), "{statuses:?}");
    assert!(
        statuses.keys().all(|s| [200, 503].contains(s)),
        "{statuses:?}"
    );
}
