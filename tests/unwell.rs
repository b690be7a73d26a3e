//! An unwell provider is asked less, never more: an endpoint that fails everywhere goes into
//! an outage (paused, one probe after a cool-down, lifted by the first answer) while the
//! token's other endpoints go on; retries of failed calls are held to the endpoint's retry
//! budget; a 503 that says when to come back is obeyed as a 429's `Retry-After` is.

use std::time::Duration;

use tokio::time::Instant;

use mailhost_exporter::config::Config;
use mailhost_sim::{Account, AccountSeed, FaultSpec, Route};

use crate::helpers::{Exporter, Sim, TOKEN, spawn_exporter, spawn_sim, value};

/// The accounts of these tests, added to the demo world.
fn accounts(n: i32) -> std::ops::Range<i32> {
    4000..4000 + n
}

async fn fleet(n: i32) -> Sim {
    let sim = spawn_sim().await;
    for id in accounts(n) {
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

/// The exporter polling the first `n` accounts with each of `collectors` (its name and its
/// schedule, YAML under the collector), the `api` block's lines after `base_url`.
async fn exporter(sim: &Sim, n: i32, api: &str, collectors: &[(&str, &str)]) -> Exporter {
    let mut yaml = format!("api:\n  base_url: {}\n{api}collectors:\n", sim.url);
    for (name, schedule) in collectors {
        yaml.push_str(&format!(
            "  {name}:\n{schedule}    accounts: [{}]\n",
            ids(n)
        ));
    }
    spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await
}

/// The landing page, and the debug view of the first account's poll.
async fn pages(exporter: &Exporter) -> (String, String) {
    let landing = exporter.get("/").await.text().await.unwrap();
    let debug = exporter
        .get(&format!(
            "/probe?target={}&collector=delivery_account&debug=true",
            accounts(1).start
        ))
        .await
        .text()
        .await
        .unwrap();
    (landing, debug)
}

/// Every 2 s, values kept for ten minutes.
const EVERY_2S: &str = "    interval: 2s\n    deadline: 1500ms\n    max_age: 10m\n";
/// Every second, values kept for ten minutes.
const EVERY_1S: &str = "    interval: 1s\n    deadline: 900ms\n    max_age: 10m\n";
/// Four slots, two quick retries.
const RETRYING: &str = "  timeout: 1s\n  concurrency: 4\n  max_retries: 2\n  retry_backoff: 20ms\n  retry_max_backoff: 50ms\n";

fn ids(n: i32) -> String {
    accounts(n)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Requests the simulator received for the accounts' `GET /api/delivery/accounts/{id}`.
fn account_hits(sim: &Sim, n: i32) -> u64 {
    accounts(n)
        .map(|id| sim.sim.hits(&format!("/api/delivery/accounts/{id}")))
        .sum()
}

const OUTAGE: &str = "mailhost_api_endpoint_outage{endpoint=\"delivery_account\"}";

fn success(collector: &str, id: i32) -> String {
    format!("mailhost_target_success{{collector=\"{collector}\",target=\"{id}\"}}")
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_failing_everywhere_is_paused_probed_and_resumes_when_it_answers_again() {
    const N: i32 = 12;
    let sim = fleet(N).await;
    let exporter = exporter(
        &sim,
        N,
        RETRYING,
        &[
            ("delivery_account", EVERY_2S),
            ("tracemail_daily", EVERY_2S),
        ],
    )
    .await;
    exporter
        .scrape_until("every account polled by both collectors", |b| {
            accounts(N).all(|id| {
                value(b, &success("delivery_account", id)) == Some(1.0)
                    && value(b, &success("tracemail_daily", id)) == Some(1.0)
            })
        })
        .await;
    let before = exporter.scrape().await;
    assert_eq!(value(&before, OUTAGE), Some(0.0), "healthy: {before}");

    // Every account call answers 503 without Retry-After.
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(503),
            ..FaultSpec::default()
        },
    );
    let body = exporter
        .scrape_until("the account endpoint in an outage", |b| {
            value(b, OUTAGE) == Some(1.0)
        })
        .await;
    assert!(
        value(
            &body,
            "mailhost_api_endpoint_outage_since_timestamp_seconds{endpoint=\"delivery_account\"}"
        )
        .is_some(),
        "{body}"
    );
    assert!(
        value(
            &body,
            "mailhost_api_endpoint_next_probe_timestamp_seconds{endpoint=\"delivery_account\"}"
        )
        .is_some(),
        "{body}"
    );
    // Three intervals of the outage: the accounts would cost 12 calls an interval and 24 more
    // retries; paused, only the probes go (a cool-down of 1, 2, then 4 s).
    let hits = account_hits(&sim, N);
    let watched = Instant::now();
    let window = Duration::from_secs(6);
    let mut last = exporter.scrape().await;
    while watched.elapsed() < window {
        last = exporter.scrape().await;
        // The other endpoint of the token goes on: its accounts are refreshed every run.
        for id in accounts(N) {
            assert_eq!(
                value(&last, &success("tracemail_daily", id)),
                Some(1.0),
                "tracemail_daily {id} during the outage"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let during = account_hits(&sim, N) - hits;
    assert!(
        during <= 6,
        "{during} account calls in 6 s of outage (3 intervals of 12 accounts: 36, 108 with retries)"
    );
    assert_eq!(value(&last, OUTAGE), Some(1.0));
    assert!(
        accounts(N).any(|id| value(
            &last,
            &format!(
                "mailhost_target_failure_info{{collector=\"delivery_account\",target=\"{id}\",reason=\"outage\"}}"
            )
        ) == Some(1.0)),
        "targets not called fail with reason outage: {last}"
    );
    // The landing page and the debug view say so.
    let (landing, debug) = pages(&exporter).await;
    assert!(landing.contains("outage since"), "{landing}");
    assert!(debug.contains("In an outage since"), "{debug}");
    // Values stay until max_age.
    for id in accounts(N) {
        assert!(
            value(
                &last,
                &format!("mailhost_delivery_remaining_messages{{account_id=\"{id}\"}}")
            )
            .is_some(),
            "{id} kept its values"
        );
    }

    // The provider answers again: the next probe lifts the outage and every account is
    // refreshed.
    sim.sim
        .set_fault(Route::DeliveryAccountGet, FaultSpec::default());
    let lifted = Instant::now();
    exporter
        .scrape_until("the outage lifted and every account refreshed", |b| {
            value(b, OUTAGE) == Some(0.0)
                && accounts(N).all(|id| value(b, &success("delivery_account", id)) == Some(1.0))
        })
        .await;
    // The longest cool-down is half the shortest interval (1 s); a run and its deadline follow.
    assert!(
        lifted.elapsed() < Duration::from_secs(30),
        "lifted after {:?}",
        lifted.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_few_broken_accounts_beside_healthy_ones_never_make_an_outage() {
    const N: i32 = 40;
    let sim = fleet(N).await;
    // The first four accounts always answer 500: a broken shard, first in the queue.
    let broken: Vec<String> = accounts(4).map(|i| i.to_string()).collect();
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(500),
            only_ids: Some(broken),
            ..FaultSpec::default()
        },
    );
    let exporter = exporter(&sim, N, RETRYING, &[("delivery_account", EVERY_1S)]).await;
    let healthy = || accounts(N).skip(4);
    exporter
        .scrape_until("every healthy account polled", |b| {
            healthy().all(|id| value(b, &success("delivery_account", id)) == Some(1.0))
        })
        .await;
    // Five more runs: never an outage, the healthy accounts refreshed every time.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let b = exporter.scrape().await;
        assert_eq!(value(&b, OUTAGE), Some(0.0), "{b}");
        assert!(healthy().all(|id| value(&b, &success("delivery_account", id)) == Some(1.0)));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn retries_are_held_to_a_tenth_of_first_attempts_when_every_call_fails() {
    const N: i32 = 100;
    let sim = fleet(N).await;
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(500),
            ..FaultSpec::default()
        },
    );
    // One long run: a hundred first attempts, each asking for two retries.
    let exporter = exporter(
        &sim,
        N,
        "  timeout: 1s
  concurrency: 8
  max_retries: 2
  retry_backoff: 10ms
  retry_max_backoff: 20ms
  circuit_breaker_failures: 0
",
        &[(
            "delivery_account",
            "    interval: 10m
    deadline: 20s
",
        )],
    )
    .await;
    let body = exporter
        .scrape_until("the run over", |b| {
            accounts(N).all(|id| value(b, &success("delivery_account", id)) == Some(0.0))
        })
        .await;
    let retried = value(
        &body,
        "mailhost_api_retries_total{endpoint=\"delivery_account\",reason=\"server_error\"}",
    )
    .unwrap();
    let refused = value(
        &body,
        "mailhost_api_retries_refused_total{endpoint=\"delivery_account\"}",
    )
    .unwrap();
    // At most 10 % of 100 first attempts plus the floor of 5; without the budget, 200.
    assert!(retried <= 15.0, "{retried} retries");
    assert!(refused >= 1.0, "retries refused: {refused}");
    let hits = account_hits(&sim, N);
    assert!(hits <= 115, "{hits} calls for 100 accounts");
    // The landing page and the debug view count them too.
    let (landing, debug) = pages(&exporter).await;
    assert!(
        landing.contains("Retries refused by the budget"),
        "{landing}"
    );
    assert!(debug.contains("not retried: its retry budget"), "{debug}");
}

#[tokio::test(start_paused = true)]
async fn a_503_that_says_when_to_come_back_pauses_the_endpoint_for_that_long() {
    const N: i32 = 12;
    let sim = fleet(N).await;
    let exporter = exporter(
        &sim,
        N,
        "  timeout: 1s
  concurrency: 4
",
        &[("delivery_account", EVERY_1S)],
    )
    .await;
    exporter
        .scrape_until("every account polled", |b| {
            accounts(N).all(|id| value(b, &success("delivery_account", id)) == Some(1.0))
        })
        .await;
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(503),
            error_retry_after_secs: Some(5),
            ..FaultSpec::default()
        },
    );
    // The provider says when to come back: the endpoint is paused.
    exporter
        .scrape_until("the endpoint paused", |b| {
            value(
                b,
                "mailhost_api_pacer_endpoint_paused{endpoint=\"delivery_account\"}",
            ) == Some(1.0)
        })
        .await;
    let hits = account_hits(&sim, N);
    // Over four seconds of the pause (the window measured), next to nothing is asked: 12
    // calls a second without it.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during = account_hits(&sim, N) - hits;
    assert!(during <= 4, "{during} calls while paused");
    let body = exporter.scrape().await;
    assert!(
        accounts(N).any(|id| value(
            &body,
            &format!(
                "mailhost_target_failure_info{{collector=\"delivery_account\",target=\"{id}\",reason=\"rate_limited\"}}"
            )
        ) == Some(1.0)),
        "{body}"
    );
}
