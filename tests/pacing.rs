//! Pacing against a provider that rate-limits each token (the simulator's token bucket): a
//! limited tenant is served at the provider's pace and loses no account to 429 beside a free one;
//! a Retry-After pauses the whole token; a first probe under a limit is answered in time without a
//! storm; a fleet the limit cannot refresh every interval is served oldest first and keeps its
//! values; a 429 never opens a circuit, and a reload keeps what the pacer learned; a first run
//! that the limit stretches over many seconds shows each account within seconds of its fetch.

use std::time::{Duration, Instant};

use mailhost_exporter::config::Config;
use mailhost_sim::{
    AccountSeed, FaultSpec, ManagementToken, RateLimit, Route, SimConfig, Simulator, TokenRateLimit,
};

use crate::helpers::{
    Exporter, PATIENCE, must, spawn_exporter, spawn_sim_with, value, wait_for, wait_within,
};

/// A simulator with one token per tenant, each seeing `ids` of its own; `limits` rate-limits
/// some of them.
fn sim_config(tokens: &[(&str, Vec<i32>)], limits: &[(&str, RateLimit)]) -> SimConfig {
    SimConfig {
        management_tokens: tokens
            .iter()
            .map(|(t, ids)| ManagementToken {
                token: (*t).to_owned(),
                accounts: Some(ids.clone()),
            })
            .collect(),
        accounts: tokens
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .map(AccountSeed::with_id)
            .collect(),
        rate_limits: limits
            .iter()
            .map(|(t, limit)| TokenRateLimit {
                token: (*t).to_owned(),
                limit: limit.clone(),
            })
            .collect(),
        ..SimConfig::default()
    }
}

fn limit(rate: f64, burst: f64) -> RateLimit {
    RateLimit {
        burst: Some(burst),
        ..RateLimit::per_second(rate)
    }
}

/// A tenant block polling `ids` with the token `<name>-token` from the environment.
fn tenant(name: &str, ids: &[i32], extra: &str) -> String {
    let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    format!(
        "  - name: {name}\n    token_env: {}\n{extra}    collectors:\n      delivery_account:\n        accounts: [{}]\n",
        name.to_ascii_uppercase(),
        ids.join(", ")
    )
}

fn parse(yaml: &str) -> Config {
    Config::parse_with_env(yaml, &|var| {
        Some(format!("{}-token", var.to_ascii_lowercase()))
    })
    .unwrap()
}

fn remaining(tenant: &str, id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{tenant=\"{tenant}\",account_id=\"{id}\"}}")
}

fn collector(series: &str, tenant: &str) -> String {
    format!("{series}{{tenant=\"{tenant}\",collector=\"delivery_account\"}}")
}

fn pacer(series: &str, tenant: &str) -> String {
    format!("{series}{{tenant=\"{tenant}\"}}")
}

fn rate_limited(tenant: &str) -> String {
    format!(
        "mailhost_api_request_failures_total{{tenant=\"{tenant}\",endpoint=\"delivery_account\",reason=\"rate_limited\"}}"
    )
}

/// Requests the simulator's limiter saw for `token`: (let through, answered 429).
fn counts(sim: &Simulator, token: &str) -> (u64, u64) {
    let stats = sim.rate_limit_stats(token).unwrap();
    (stats.allowed, stats.limited)
}

/// Waits until the collector of `tenant` has finished `runs` more runs, judged by its last
/// success timestamp moving on; returns the body then.
async fn runs(exporter: &Exporter, tenant: &str, runs: usize) -> String {
    let stamp = collector("mailhost_collector_last_success_timestamp_seconds", tenant);
    let mut seen = value(&exporter.scrape().await, &stamp);
    let mut body = String::new();
    for _ in 0..runs {
        body = exporter
            .scrape_until(&format!("another run of {tenant}"), |b| {
                value(b, &stamp).is_some() && value(b, &stamp) != seen
            })
            .await;
        seen = value(&body, &stamp);
    }
    body
}

#[tokio::test]
async fn a_rate_limited_tenant_is_paced_and_loses_no_account_while_a_free_one_keeps_its_refresh() {
    let limited: Vec<i32> = (1..=40).collect();
    let free: Vec<i32> = (101..=140).collect();
    let sim = spawn_sim_with(sim_config(
        &[
            ("limited-token", limited.clone()),
            ("free-token", free.clone()),
        ],
        // 20 a second with a Retry-After of one second: 40 accounts need 2 s of the 4 s interval.
        &[("limited-token", limit(20.0, 20.0))],
    ))
    .await;
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 2s\n  max_retries: 0\ncollectors:\n  delivery_account:\n    interval: 4s\n    deadline: 3500ms\n    max_age: 30s\ntenants:\n{}{}",
        sim.url,
        tenant("limited", &limited, ""),
        tenant("free", &free, ""),
    );
    let exporter = spawn_exporter(parse(&yaml)).await;
    // Learning takes the first run or two; then every account has its values.
    let body = exporter
        .scrape_until("every limited account polled", |b| {
            limited
                .iter()
                .all(|&id| value(b, &remaining("limited", id)).is_some())
        })
        .await;
    assert!(
        value(&body, &pacer("mailhost_api_pacer_rate", "limited")).is_some(),
        "the limited tenant's pacer learned a rate"
    );
    runs(&exporter, "limited", 1).await;
    // A steady stretch of three runs: few 429s, no account lost.
    let before = counts(&sim.sim, "limited-token");
    let body = runs(&exporter, "limited", 3).await;
    let after = counts(&sim.sim, "limited-token");
    let (allowed, throttled) = (after.0 - before.0, after.1 - before.1);
    assert!(
        allowed >= 3 * 40,
        "{allowed} calls let through in three runs"
    );
    assert!(
        throttled * 10 <= allowed + throttled,
        "{throttled} of {} calls answered 429 in three steady runs",
        allowed + throttled
    );
    for &id in &limited {
        assert!(value(&body, &remaining("limited", id)).is_some(), "{id}");
    }
    assert_eq!(
        must(&body, &collector("mailhost_collector_success", "limited")),
        1.0
    );
    assert_eq!(
        must(
            &body,
            &collector("mailhost_collector_deferred_targets", "limited")
        ),
        0.0,
        "40 accounts at 20 a second fit a 4 s interval"
    );
    // The free tenant is never paced, and its runs stay as short as an unlimited provider lets
    // them be, far below the limited tenant's paced ones.
    assert!(value(&body, &pacer("mailhost_api_pacer_rate", "free")).is_none());
    assert_eq!(
        must(
            &body,
            &pacer("mailhost_api_pacer_wait_seconds_total", "free")
        ),
        0.0
    );
    let free_took = must(
        &body,
        &collector("mailhost_collector_duration_seconds", "free"),
    );
    let limited_took = must(
        &body,
        &collector("mailhost_collector_duration_seconds", "limited"),
    );
    // The bucket refills between runs: 20 calls go at once, the other 20 at 20 a second.
    assert!(
        limited_took >= 0.95,
        "40 calls at 20 a second with a burst of 20 take at least 1 s, not {limited_took}"
    );
    assert!(
        free_took * 3.0 < limited_took,
        "the free tenant's run took {free_took}s beside the limited one's {limited_took}s"
    );
    for &id in &free {
        assert!(value(&body, &remaining("free", id)).is_some(), "{id}");
    }
    assert!(counts(&sim.sim, "limited-token").1 > 0);
    assert!(sim.sim.rate_limit_stats("free-token").is_none());
}

#[tokio::test]
async fn a_retry_after_pauses_the_whole_token_and_no_call_goes_out_during_the_pause() {
    let ids = vec![1, 2, 3, 4];
    let sim = spawn_sim_with(sim_config(
        &[("paused-token", ids.clone())],
        // One call, then 429 with Retry-After: 3 until a token is back (every 5 s).
        &[(
            "paused-token",
            RateLimit {
                retry_after_secs: Some(3),
                ..limit(0.2, 1.0)
            },
        )],
    ))
    .await;
    // One call at a time, so no call was already on its way when a 429 came back.
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 2s\n  concurrency: 1\ncollectors:\n  delivery_account:\n    interval: 30s\n    deadline: 25s\n    max_age: 90s\ntenants:\n{}",
        sim.url,
        tenant("paused", &ids, ""),
    );
    let exporter = spawn_exporter(parse(&yaml)).await;
    let body = exporter
        .scrape_until("every account polled despite the pauses", |b| {
            ids.iter()
                .all(|&id| value(b, &remaining("paused", id)).is_some())
        })
        .await;
    let stats = sim.sim.rate_limit_stats("paused-token").unwrap();
    assert!(stats.limited >= 1, "the test needs a 429: {stats:?}");
    for pair in stats.recent.windows(2) {
        let ((at, allowed), (next, _)) = (pair[0], pair[1]);
        if !allowed {
            let gap = next.duration_since(at);
            assert!(
                gap >= Duration::from_millis(2900),
                "a call went out {gap:?} after a 429 asking for 3 s"
            );
        }
    }
    // The 429s failed no account: each was tried again after its pause.
    assert_eq!(
        must(&body, &collector("mailhost_collector_success", "paused")),
        1.0
    );
    assert!(
        must(
            &body,
            &pacer("mailhost_api_pacer_wait_seconds_total", "paused")
        ) >= 2.9
    );
    assert!(must(&body, &rate_limited("paused")) >= 1.0);
}

#[tokio::test]
async fn a_first_probe_under_a_rate_limit_is_answered_within_its_scrape_timeout_and_never_storms() {
    let configured: Vec<i32> = (1..=50).collect();
    let mut all = configured.clone();
    all.push(999);
    let sim = spawn_sim_with(sim_config(
        &[("busy-token", all)],
        &[("busy-token", limit(10.0, 10.0))],
    ))
    .await;
    // 50 accounts at 10 a second: each run paces for about 5 s of its 10 s interval.
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 10s\n    deadline: 8s\n    max_age: 60s\ntenants:\n{}",
        sim.url,
        tenant("busy", &configured, ""),
    );
    let exporter = spawn_exporter(parse(&yaml)).await;
    // Learned, and in the middle of a paced run.
    exporter
        .scrape_until("the pacer learned the limit", |b| {
            value(b, &pacer("mailhost_api_pacer_rate", "busy")).is_some()
        })
        .await;
    let started = Instant::now();
    // Answered when its wait (the scrape timeout less a margin) ends at the latest: a probe
    // queued behind the run, or waiting on, would not be answered within the patience.
    let (status, text) = tokio::time::timeout(PATIENCE, async {
        let response = reqwest::Client::new()
            .get(exporter.url("/probe?tenant=busy&target=999"))
            .header("X-Prometheus-Scrape-Timeout-Seconds", "5")
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    })
    .await
    .expect("a probe under a rate limit is answered when its scrape timeout ends");
    match status {
        200 => assert!(
            text.contains(
                "mailhost_delivery_remaining_messages{tenant=\"busy\",account_id=\"999\"}"
            ),
            "{text}"
        ),
        503 => assert!(text.contains("rate limit"), "an unclear 503: {text}"),
        other => panic!("{other}: {text}"),
    }
    // Probed again and again, as two Prometheus servers would: still one call per interval.
    for _ in 0..20 {
        let r = reqwest::Client::new()
            .get(exporter.url("/probe?tenant=busy&target=999"))
            .header("X-Prometheus-Scrape-Timeout-Seconds", "5")
            .send()
            .await
            .unwrap();
        assert!(matches!(r.status().as_u16(), 200 | 503));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let calls = sim.sim.hits("/api/delivery/accounts/999");
    let most = (started.elapsed().as_secs_f64() / 10.0).ceil() as u64 + 2;
    assert!(
        calls <= most,
        "{calls} calls for the probed account, at most {most}"
    );
}

#[tokio::test]
async fn a_fleet_larger_than_the_limit_allows_is_refreshed_oldest_first_and_keeps_its_values() {
    let ids: Vec<i32> = (1..=60).collect();
    let sim = spawn_sim_with(sim_config(
        &[("small-token", ids.clone())],
        &[("small-token", limit(10.0, 10.0))],
    ))
    .await;
    // 60 accounts every 2 s need 30 a second; the provider allows 10: each account is refreshed
    // every three intervals or so, while max_age (4 s) is two.
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 2s\n    deadline: 1600ms\n    max_age: 4s\ntenants:\n{}",
        sim.url,
        tenant("small", &ids, ""),
    );
    let exporter = spawn_exporter(parse(&yaml)).await;
    let body = exporter
        .scrape_until("every account polled once", |b| {
            ids.iter()
                .all(|&id| value(b, &remaining("small", id)).is_some())
        })
        .await;
    let demand = must(&body, &pacer("mailhost_api_pacer_demand", "small"));
    assert!((demand - 30.0).abs() < 1e-9, "{demand}");
    // Watched until every account has been refreshed once more: a fleet served in any other
    // order than oldest first leaves some accounts without a turn, and the wait fails. Meanwhile
    // every account keeps its values, the pace stays below the demand, and runs defer the
    // accounts they have no turn for.
    let success = |id: i32| {
        format!(
            "mailhost_target_last_success_timestamp_seconds{{tenant=\"small\",collector=\"delivery_account\",target=\"{id}\"}}"
        )
    };
    let first: Vec<f64> = ids.iter().map(|&id| must(&body, &success(id))).collect();
    let refreshes = std::sync::Mutex::new((vec![0u32; ids.len()], first, false));
    exporter
        .scrape_until("every account refreshed once more, in turn", |body| {
            let mut seen = refreshes.lock().unwrap();
            let (counts, last, deferred_seen) = &mut *seen;
            for (i, &id) in ids.iter().enumerate() {
                assert!(
                    value(body, &remaining("small", id)).is_some(),
                    "account {id} lost its values while waiting for its turn:\n{body}"
                );
                let at = must(body, &success(id));
                if at > last[i] {
                    counts[i] += 1;
                    last[i] = at;
                }
            }
            *deferred_seen |= value(
                body,
                &collector("mailhost_collector_deferred_targets", "small"),
            )
            .is_some_and(|n| n > 0.0);
            let rate = value(body, &pacer("mailhost_api_pacer_rate", "small"));
            assert!(rate.is_some_and(|r| r < demand), "{rate:?}");
            *deferred_seen && counts.iter().all(|&n| n >= 1)
        })
        .await;
}

#[tokio::test]
async fn a_429_never_opens_a_circuit_and_a_reload_keeps_what_the_pacer_learned() {
    let ids: Vec<i32> = (1..=20).collect();
    let sim = spawn_sim_with(sim_config(
        &[("tight-token", ids.clone())],
        &[(
            "tight-token",
            RateLimit {
                retry_after: mailhost_sim::RetryAfterStyle::None,
                ..limit(5.0, 5.0)
            },
        )],
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    // The token from a file: a reload reads it again.
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "tight-token\n").unwrap();
    let yaml = |interval: &str| {
        format!(
            "api:\n  base_url: {}\n  timeout: 2s\n  circuit_breaker_failures: 1\ncollectors:\n  delivery_account:\n    interval: {interval}\n    max_age: 60s\ntenants:\n{}",
            sim.url,
            tenant("tight", &ids, "").replace(
                "token_env: TIGHT\n",
                &format!("token_file: {}\n", token_file.display())
            ),
        )
    };
    let config_file = dir.path().join("config.yml");
    std::fs::write(&config_file, yaml("6s")).unwrap();
    let web = mailhost_exporter::WebOptions {
        listen_addresses: vec!["127.0.0.1:0".to_owned()],
        enable_lifecycle: true,
        ..Default::default()
    };
    let app = mailhost_exporter::App::build(parse(&yaml("6s")), web)
        .await
        .unwrap()
        .with_config_file(config_file.clone());
    let exporter = Exporter::start(app);
    let body = exporter
        .scrape_until("429s answered and every account polled", |b| {
            value(b, &rate_limited("tight")).is_some_and(|n| n > 0.0)
                && ids
                    .iter()
                    .all(|&id| value(b, &remaining("tight", id)).is_some())
        })
        .await;
    let open = "mailhost_api_open_circuits{tenant=\"tight\",endpoint=\"delivery_account\"}";
    assert_eq!(must(&body, open), 0.0, "a 429 opened a circuit");
    assert_eq!(
        must(&body, &collector("mailhost_collector_success", "tight")),
        1.0
    );
    let learned = must(&body, &pacer("mailhost_api_pacer_rate", "tight"));
    // Same token, same address: the reload keeps the pacer, and with it the learned rate.
    std::fs::write(&config_file, yaml("8s")).unwrap();
    let reload = exporter.reload().await;
    assert_eq!(reload.status(), 200, "{:?}", reload.text().await);
    let body = exporter.scrape().await;
    assert_eq!(
        must(
            &body,
            "mailhost_collector_interval_seconds{tenant=\"tight\",collector=\"delivery_account\"}"
        ),
        8.0
    );
    let kept = value(&body, &pacer("mailhost_api_pacer_rate", "tight"));
    assert!(
        kept.is_some_and(|r| r > 0.0 && r < learned * 3.0),
        "the reload forgot the learned rate {learned}: {kept:?}"
    );
    assert_eq!(must(&body, open), 0.0);
}

#[tokio::test]
async fn a_limit_on_one_endpoint_and_an_account_refused_on_its_own_slow_only_themselves_and_show_where()
 {
    let ids: Vec<i32> = (1..=8).collect();
    let sim = spawn_sim_with(sim_config(&[("shaped-token", ids.clone())], &[])).await;
    // The daily statistics (two calls per account) at 8 a second; the account endpoint free.
    sim.sim
        .set_route_rate_limit(
            Some("shaped-token"),
            Route::TracemailDaily,
            Some(limit(8.0, 8.0)),
        )
        .unwrap();
    // Account 7 answers 429 to every account call, with Retry-After: 1.
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            rate_limit_rate: 1.0,
            retry_after_secs: 1,
            only_ids: Some(vec!["7".into()]),
            ..FaultSpec::default()
        },
    );
    let list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let list = list.join(", ");
    let every = "interval: 4s\n    deadline: 3500ms\n    max_age: 30s";
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    {every}\n  tracemail_daily:\n    {every}\n    timezone: Europe/Rome\ntenants:\n  - name: shaped\n    token_env: SHAPED\n    collectors:\n      delivery_account:\n        accounts: [{list}]\n      tracemail_daily:\n        accounts: [{list}]\n",
        sim.url,
    );
    let exporter = spawn_exporter(parse(&yaml)).await;
    let throttled =
        "mailhost_api_throttled_targets{tenant=\"shaped\",endpoint=\"delivery_account\"}";
    let stats_paced = |b: &str| {
        ["tracemail_daily", "tracemail_domains_rank"]
            .iter()
            .any(|e| {
                value(
                    b,
                    &format!(
                        "mailhost_api_pacer_endpoint_rate{{tenant=\"shaped\",endpoint=\"{e}\"}}"
                    ),
                )
                .is_some()
            })
    };
    exporter
        .scrape_until(
            "the broken account known as such, the statistics paced",
            |b| value(b, throttled) == Some(1.0) && stats_paced(b),
        )
        .await;
    // Two more runs of each: the account endpoint is neither paced nor paused, the token not
    // limited as a whole, and every healthy account keeps its values.
    let daily =
        |series: &str| format!("{series}{{tenant=\"shaped\",collector=\"tracemail_daily\"}}");
    let mut seen = value(
        &exporter.scrape().await,
        &daily("mailhost_collector_last_success_timestamp_seconds"),
    );
    for _ in 0..2 {
        let body = exporter
            .scrape_until("another run of both collectors", |b| {
                let now = value(
                    b,
                    &daily("mailhost_collector_last_success_timestamp_seconds"),
                );
                now.is_some() && now != seen
            })
            .await;
        seen = value(
            &body,
            &daily("mailhost_collector_last_success_timestamp_seconds"),
        );
    }
    let healthy = "mailhost_target_last_success_timestamp_seconds{tenant=\"shaped\",collector=\"delivery_account\",target=\"1\"}";
    let another_run = async |what: &str| {
        let seen = value(&exporter.scrape().await, healthy);
        exporter
            .scrape_until(what, |b| {
                value(b, healthy).is_some() && value(b, healthy) != seen
            })
            .await
    };
    let body = another_run("another run of delivery_account").await;
    assert!(
        value(
            &body,
            "mailhost_api_pacer_endpoint_rate{tenant=\"shaped\",endpoint=\"delivery_account\"}"
        )
        .is_none(),
        "the free endpoint was paced:\n{body}"
    );
    assert_eq!(
        must(
            &body,
            "mailhost_api_pacer_endpoint_paused{tenant=\"shaped\",endpoint=\"delivery_account\"}"
        ),
        0.0
    );
    assert!(value(&body, &pacer("mailhost_api_pacer_rate", "shaped")).is_none());
    for id in ids.iter().filter(|&&id| id != 7) {
        assert!(value(&body, &remaining("shaped", *id)).is_some(), "{id}");
    }
    assert_eq!(must(&body, throttled), 1.0);
    let free_took = must(
        &body,
        &collector("mailhost_collector_duration_seconds", "shaped"),
    );
    let stats_took = must(&body, &daily("mailhost_collector_duration_seconds"));
    assert!(
        free_took * 3.0 < stats_took,
        "the free collector's run took {free_took}s beside the paced one's {stats_took}s"
    );
    // The broken account costs about one call per back-off, not one per turn.
    let before = sim.sim.hits("/api/delivery/accounts/7");
    another_run("a run of delivery_account").await;
    another_run("a second run of delivery_account").await;
    let calls = sim.sim.hits("/api/delivery/accounts/7") - before;
    assert!(
        calls <= 4,
        "{calls} calls of the broken account in two runs"
    );
    // Where it shows: the landing page and the debug view.
    let page = exporter.get("/").await.text().await.unwrap();
    assert!(page.contains("Pace at the provider"), "{page}");
    assert!(
        page.contains(
            "<td>shaped</td><td>free</td><td>delivery_account</td><td>free</td><td>1</td>"
        ),
        "{page}"
    );
    let debug = exporter
        .get("/probe?tenant=shaped&target=7&debug=true")
        .await
        .text()
        .await
        .unwrap();
    for want in [
        "Pace of the token: not limited",
        "Endpoint delivery_account: not limited; 1 target(s) refused on their own",
        "Reason: rate_limited",
        "refused",
    ] {
        assert!(debug.contains(want), "debug lacks {want:?}:\n{debug}");
    }
}

#[tokio::test]
async fn a_first_run_the_limit_stretches_shows_each_account_within_seconds_of_its_fetch() {
    let ids: Vec<i32> = (1..=100).collect();
    let sim = spawn_sim_with(sim_config(
        &[("slow-token", ids.clone())],
        &[("slow-token", limit(5.0, 5.0))],
    ))
    .await;
    // 100 accounts at 5 a second: the first run takes 20 s or more, well within its deadline.
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 60s\n    deadline: 50s\n    max_age: 180s\ntenants:\n{}",
        sim.url,
        tenant("slow", &ids, ""),
    );
    let exporter = spawn_exporter(parse(&yaml)).await;
    let shown = |b: &str| {
        ids.iter()
            .filter(|&&id| value(b, &remaining("slow", id)).is_some())
            .count()
    };
    let ended = collector("mailhost_collector_duration_seconds", "slow");
    // At three points of the run, every account the provider has let through by then is on
    // `/metrics` within a few seconds (a run's part every second, published at once), while
    // the run goes on.
    for through in [10, 30, 50] {
        let allowed = wait_for(&format!("{through} calls let through"), || async {
            let (allowed, _) = counts(&sim.sim, "slow-token");
            (allowed >= through).then_some(allowed)
        })
        .await;
        let body = wait_within(
            Duration::from_secs(5),
            &format!("the {allowed} accounts fetched on /metrics"),
            || async {
                let body = exporter.scrape().await;
                (shown(&body) >= allowed as usize).then_some(body)
            },
        )
        .await;
        assert!(
            value(&body, &ended).is_none() && shown(&body) < ids.len(),
            "the run had ended: the test shows nothing\n{body}"
        );
        assert_eq!(
            value(&body, "mailhost_up"),
            Some(0.0),
            "not up before the first run's end"
        );
    }
    // Its end is as before: every account, the run's success and no target deferred.
    let body = exporter
        .scrape_until("the first run's end", |b| value(b, &ended).is_some())
        .await;
    assert_eq!(shown(&body), ids.len());
    assert_eq!(
        must(&body, &collector("mailhost_collector_success", "slow")),
        1.0
    );
    assert_eq!(
        must(
            &body,
            &collector("mailhost_collector_deferred_targets", "slow")
        ),
        0.0
    );
}
