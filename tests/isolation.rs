//! Isolation and reloads: broken accounts next to healthy ones, each failing alone behind its
//! own circuit breaker; bursts of reloads that cost no upstream call; a reload that adds an
//! account fetches only that one; runs that keep finishing while reloads arrive; absurd
//! `Retry-After` values.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use mailhost_exporter::config::Config;
use mailhost_exporter::{App, WebOptions};
use mailhost_sim::{Account, AccountSeed, FaultSpec, Route};

use crate::helpers::{Exporter, Sim, TOKEN, must, spawn_sim, value};

const HEALTHY: std::ops::Range<i32> = 2001..2016;
const SILENT: [i32; 3] = [2016, 2017, 2018];
const FAILING: i32 = 2019;
const CUT_SHORT: i32 = 2020;

fn success(id: i32) -> String {
    format!("mailhost_target_success{{collector=\"delivery_account\",target=\"{id}\"}}")
}

fn remaining(id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{account_id=\"{id}\"}}")
}

fn path(id: i32) -> String {
    format!("/api/delivery/accounts/{id}")
}

/// The demo simulator with accounts 2001 to 2020 added.
async fn fleet() -> Sim {
    let sim = spawn_sim().await;
    for id in 2001..=2020 {
        sim.sim
            .insert_account(&AccountSeed::from(Account {
                id,
                username: format!("acct{id}"),
                ..Account::default()
            }))
            .unwrap();
    }
    sim
}

fn only(ids: &[i32], spec: FaultSpec) -> FaultSpec {
    FaultSpec {
        only_ids: Some(ids.iter().map(|i| i.to_string()).collect()),
        ..spec
    }
}

#[tokio::test(start_paused = true)]
async fn a_few_broken_accounts_never_fail_the_healthy_ones_and_cost_one_call_per_cool_down() {
    let sim = fleet().await;
    let route = Route::DeliveryAccountGet;
    // Three accounts that never answer, one that answers 500, one whose body is cut short.
    sim.sim.add_fault(
        route,
        only(
            &SILENT,
            FaultSpec {
                latency: Some(Duration::from_secs(3600)),
                ..FaultSpec::default()
            },
        ),
    );
    sim.sim.add_fault(
        route,
        only(
            &[FAILING],
            FaultSpec {
                error_rate: 1.0,
                error_status: Some(500),
                ..FaultSpec::default()
            },
        ),
    );
    sim.sim.add_fault(
        route,
        only(
            &[CUT_SHORT],
            FaultSpec {
                reset_mid_body: true,
                ..FaultSpec::default()
            },
        ),
    );
    let ids: Vec<String> = (2001..=2020).map(|i| i.to_string()).collect();
    let cooldown = Duration::from_secs(4);
    let yaml = format!(
        // Generous timeouts: a healthy answer from the loopback simulator must not miss them on a
        // slow, shared machine, and the accounts that never answer fail by them all the same.
        "api:\n  base_url: {}\n  timeout: 1200ms\n  max_retries: 0\n  circuit_breaker_failures: 2\n  circuit_breaker_cooldown: 4s\ncollectors:\n  delivery_account:\n    interval: 2s\n    deadline: 1800ms\n    max_age: 30s\n    accounts: [{}]\n",
        sim.url,
        ids.join(", ")
    );
    let exporter =
        crate::helpers::spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await;
    let open = "mailhost_api_open_circuits{endpoint=\"delivery_account\"}";
    exporter
        .scrape_until("the five broken accounts' circuits to open", |b| {
            value(b, open) == Some(5.0)
        })
        .await;

    // From here on, over several intervals, every healthy account succeeds on every scrape,
    // and each broken one is called at most once per cool-down.
    let before: BTreeMap<i32, u64> = (2001..=2020).map(|i| (i, sim.sim.hits(&path(i)))).collect();
    let started = Instant::now();
    let mut scrapes = 0;
    while started.elapsed() < Duration::from_secs(12) {
        let body = exporter.scrape().await;
        for id in HEALTHY {
            assert_eq!(must(&body, &success(id)), 1.0, "healthy {id} in\n{body}");
            assert!(value(&body, &remaining(id)).is_some(), "values of {id}");
        }
        for id in SILENT.iter().copied().chain([FAILING, CUT_SHORT]) {
            assert_eq!(must(&body, &success(id)), 0.0, "broken {id}");
        }
        scrapes += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let window = started.elapsed();
    assert!(scrapes >= 5, "{scrapes} scrapes");
    let probes = (window.as_secs_f64() / cooldown.as_secs_f64()).ceil() as u64 + 1;
    for id in SILENT.iter().copied().chain([FAILING, CUT_SHORT]) {
        let calls = sim.sim.hits(&path(id)) - before[&id];
        assert!(
            calls <= probes,
            "broken account {id} was called {calls} times in {window:?} (cool-down {cooldown:?})"
        );
    }
    for id in HEALTHY {
        let calls = sim.sim.hits(&path(id)) - before[&id];
        assert!(
            calls >= 3,
            "healthy account {id} was called only {calls} times"
        );
    }
    let body = exporter.scrape().await;
    assert!(
        must(
            &body,
            "mailhost_api_request_failures_total{endpoint=\"delivery_account\",reason=\"circuit_open\"}"
        ) > 0.0,
        "calls refused by a circuit carry their own reason"
    );
}

/// An exporter built from a config file, with the lifecycle API, in this process.
struct Deployed {
    exporter: Exporter,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn yaml(url: &str, accounts: &str, interval: &str, extra: &str) -> String {
    format!(
        "api:\n  base_url: {url}\n  timeout: 2s\n{extra}collectors:\n  delivery_account:\n    interval: {interval}\n    accounts: [{accounts}]\n"
    )
}

async fn deploy(text: &str) -> Deployed {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(&config, text).unwrap();
    let parsed = Config::load(&config, Some(TOKEN.to_owned())).unwrap();
    let web = WebOptions {
        listen_addresses: vec!["127.0.0.1:0".to_owned()],
        enable_lifecycle: true,
        ..WebOptions::default()
    };
    let app = App::build(parsed, web)
        .await
        .unwrap()
        .with_config_file(config.clone());
    Deployed {
        exporter: Exporter::start(app),
        config,
        _dir: dir,
    }
}

async fn reload(exporter: &Exporter) -> (u16, String) {
    let r = exporter.reload().await;
    (r.status().as_u16(), r.text().await.unwrap())
}

/// A config whose token comes from a file, so reloads in this process need no environment.
fn with_token_file(dir: &std::path::Path) -> String {
    let token = dir.join("token");
    std::fs::write(&token, TOKEN).unwrap();
    format!("  token_file: {}\n", token.display())
}

#[tokio::test]
async fn a_burst_of_reloads_costs_no_upstream_call_and_an_added_account_is_fetched_at_once() {
    let sim = spawn_sim().await;
    let tokens = tempfile::tempdir().unwrap();
    let token = with_token_file(tokens.path());
    let d = deploy(&yaml(&sim.url, "1001, 1002", "60s", &token)).await;
    for id in [1001, 1002] {
        d.exporter
            .scrape_until("first values", |b| value(b, &remaining(id)).is_some())
            .await;
    }
    let before = [1001, 1002].map(|id| sim.sim.hits(&path(id)));
    assert_eq!(before, [1, 1]);

    let mut burst = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let url = d.exporter.url("/-/reload");
        burst.spawn(async move {
            let r = reqwest::Client::new().post(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        });
    }
    while let Some(answer) = burst.join_next().await {
        let (status, text) = answer.unwrap();
        assert_eq!((status, text.as_str()), (200, "Reloaded\n"));
    }
    // A reload that adds an account fetches that one at once and leaves the others alone.
    // It is also the witness for the 50 before it: a collector they had restarted (there must
    // be none) would have called 1001 and 1002 at its start, before this reload was read.
    std::fs::write(&d.config, yaml(&sim.url, "1001, 1002, 1003", "60s", &token)).unwrap();
    assert_eq!(reload(&d.exporter).await.0, 200);
    d.exporter
        .scrape_until("the added account", |b| {
            value(b, &remaining(1003)).is_some()
        })
        .await;
    let after = [1001, 1002].map(|id| sim.sim.hits(&path(id)));
    assert_eq!(
        after, before,
        "50 reloads of an unchanged config, then one that adds an account, call nothing else"
    );
    let body = d.exporter.scrape().await;
    for id in [1001, 1002] {
        assert!(
            value(&body, &remaining(id)).is_some(),
            "{id} kept its values"
        );
    }
    assert_eq!(
        [1001, 1002, 1003].map(|id| sim.sim.hits(&path(id))),
        [1, 1, 1]
    );

    // A removed account vanishes with its series at once.
    std::fs::write(&d.config, yaml(&sim.url, "1001, 1003", "60s", &token)).unwrap();
    assert_eq!(reload(&d.exporter).await.0, 200);
    let body = d.exporter.scrape().await;
    assert!(value(&body, &remaining(1002)).is_none());
    assert!(value(&body, &success(1002)).is_none());
    assert!(value(&body, &remaining(1001)).is_some());
}

#[tokio::test(start_paused = true)]
async fn runs_keep_finishing_while_reloads_arrive_every_few_hundred_milliseconds() {
    let sim = spawn_sim().await;
    // Every answer takes longer than the gap between two reloads.
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            latency: Some(Duration::from_millis(800)),
            ..FaultSpec::default()
        },
    );
    let tokens = tempfile::tempdir().unwrap();
    let token = with_token_file(tokens.path());
    let d = deploy(&yaml(&sim.url, "1001", "2s", &token)).await;
    let started = Instant::now();
    for _ in 0..20 {
        let (status, _) = reload(&d.exporter).await;
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let elapsed = started.elapsed();
    let body = d
        .exporter
        .scrape_until("a finished run", |b| value(b, &success(1001)).is_some())
        .await;
    assert_eq!(must(&body, &success(1001)), 1.0);
    assert!(value(&body, &remaining(1001)).is_some());
    let calls = sim.sim.hits(&path(1001));
    let most = (elapsed.as_secs_f64() / 2.0).ceil() as u64 + 2;
    assert!(
        calls <= most,
        "{calls} calls in {elapsed:?} with a 2s interval and 20 reloads: reloads restarted the schedule"
    );
}

#[tokio::test]
async fn absurd_retry_after_values_fail_at_once_as_rate_limited() {
    let sim = spawn_sim().await;
    for (secs, date) in [
        (u64::MAX, false),
        (u64::MAX / 2, true),
        (10_000_000_000, true),
    ] {
        sim.sim.set_fault(
            Route::DeliveryAccountGet,
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: secs,
                retry_after_http_date: date,
                ..FaultSpec::default()
            },
        );
        let exporter =
            crate::helpers::spawn_exporter(crate::helpers::config(&sim.url, TOKEN, &[1001], ""))
                .await;
        let failures = "mailhost_api_request_failures_total{endpoint=\"delivery_account\",reason=\"rate_limited\"}";
        let body = exporter
            .scrape_until("a rate-limited failure", |b| {
                value(b, failures).is_some_and(|n| n > 0.0)
            })
            .await;
        assert_eq!(
            must(&body, &success(1001)),
            0.0,
            "Retry-After {secs} (date: {date})"
        );
        drop(exporter);
    }
}
