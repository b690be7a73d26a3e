//! Why a target fails: for every failure reason the client knows, driven by the simulator's
//! faults, the victim carries exactly one `mailhost_target_failure_info` series with that reason
//! and a last-failure time, its good neighbour none; `/probe?...&debug=true` gives the route
//! template, the attempts and their statuses, and the circuit, without the token; the landing
//! page links the failing target to it; and the series goes once the target succeeds again.

use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_sim::{BodyFault, FaultSpec, Route};

use crate::helpers::{Exporter, TOKEN, spawn_exporter, spawn_sim, value};

/// A case: its name, the fault on the victims, the reason expected, what the debug trail must
/// say (each on one line; `…` stands for anything between two pieces), and the
/// circuit-breaker failures the config sets.
struct Case {
    name: &'static str,
    fault: FaultSpec,
    reason: &'static str,
    trail: &'static [&'static str],
    breaker: u32,
}

fn cases() -> Vec<Case> {
    let f = FaultSpec::default;
    let status = |code| FaultSpec {
        error_rate: 1.0,
        error_status: Some(code),
        ..f()
    };
    let case = |name, fault, reason, trail| Case {
        name,
        fault,
        reason,
        trail,
        breaker: 0,
    };
    vec![
        case(
            "slow headers",
            FaultSpec {
                latency: Some(Duration::from_secs(4)),
                ..f()
            },
            "timeout",
            &["no answer after", "failed timeout"],
        ),
        case(
            "reset mid-body",
            FaultSpec {
                reset_mid_body: true,
                ..f()
            },
            "connect",
            &["failed connect"],
        ),
        case(
            "401",
            status(401),
            "unauthorized",
            &["HTTP 401", "failed unauthorized"],
        ),
        case("403", status(403), "forbidden", &["HTTP 403"]),
        case("404", status(404), "not_found", &["HTTP 404"]),
        case(
            "503",
            status(503),
            "server_error",
            // Retried once with a back-off.
            // A busy machine may add a wait for its turn between attempt and status.
            &["attempt 1…: HTTP 503", "back-off", "attempt 2…: HTTP 503"],
        ),
        case("400", status(400), "client_error", &["HTTP 400"]),
        case(
            "not JSON",
            FaultSpec {
                body: Some(BodyFault::NotJson),
                ..f()
            },
            "decode",
            &["HTTP 200", "answer unreadable"],
        ),
        case(
            "429 past the deadline",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: 3,
                ..f()
            },
            "rate_limited",
            &["HTTP 429", "Retry-After 3.000s"],
        ),
        Case {
            name: "500 until the circuit opens",
            fault: status(500),
            reason: "circuit_open",
            trail: &["not called, the target's circuit is open"],
            breaker: 1,
        },
    ]
}

const VICTIM_ACCOUNT: &str = "1001";
const GOOD_ACCOUNT: &str = "1002";
const VICTIM_MIGRATION: &str = "MG00000001";

fn config(url: &str, breaker: u32) -> Config {
    let every = "interval: 2s, deadline: 1800ms, max_age: 30s";
    let yaml = format!(
        "api:
  base_url: {url}
  timeout: 1s
  concurrency: 8
  max_retries: 1
  retry_backoff: 50ms
  retry_max_backoff: 100ms
  circuit_breaker_failures: {breaker}
  circuit_breaker_cooldown: 1h
collectors:
  delivery_account: {{{every}, accounts: [{VICTIM_ACCOUNT}, {GOOD_ACCOUNT}]}}
  migration: {{{every}, migrations: [{VICTIM_MIGRATION}, MG00000002]}}
"
    );
    Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()
}

fn info(collector: &str, target: &str, reason: &str) -> String {
    format!(
        "mailhost_target_failure_info{{collector=\"{collector}\",target=\"{target}\",reason=\"{reason}\"}}"
    )
}

/// The failure-info lines of one target, whatever their reason.
fn info_lines<'a>(body: &'a str, collector: &str, target: &str) -> Vec<&'a str> {
    let head =
        format!("mailhost_target_failure_info{{collector=\"{collector}\",target=\"{target}\",");
    body.lines().filter(|l| l.starts_with(&head)).collect()
}

/// Whether `line` holds the pieces of `want` split at `…`, in that order.
fn in_order(line: &str, want: &str) -> bool {
    let mut rest = line;
    want.split('…').all(|piece| match rest.find(piece) {
        Some(at) => {
            rest = &rest[at + piece.len()..];
            true
        }
        None => false,
    })
}

async fn debug(exporter: &Exporter, query: &str) -> (u16, String) {
    let r = exporter.get(&format!("/probe?{query}&debug=true")).await;
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

async fn run_case(case: Case) {
    let name = case.name;
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, case.breaker)).await;
    exporter
        .scrape_until(&format!("{name}: every target healthy"), |b| {
            value(b, "mailhost_up") == Some(1.0)
        })
        .await;
    let spec = FaultSpec {
        only_ids: Some(vec![VICTIM_ACCOUNT.into(), VICTIM_MIGRATION.into()]),
        ..case.fault.clone()
    };
    // A 429 is the token's state: the whole token is answered 429.
    if case.reason == "rate_limited" {
        sim.sim.set_fault(
            Route::DeliveryAccountGet,
            FaultSpec {
                only_ids: None,
                ..spec.clone()
            },
        );
    } else {
        sim.sim.set_fault(Route::DeliveryAccountGet, spec.clone());
        sim.sim.set_fault(Route::MigrationStats, spec);
    }
    let failing = exporter
        .scrape_until(
            &format!("{name}: the victims fail with {}", case.reason),
            |b| {
                value(b, &info("delivery_account", VICTIM_ACCOUNT, case.reason)) == Some(1.0)
                    && (case.reason == "rate_limited"
                        || value(b, &info("migration", VICTIM_MIGRATION, case.reason)) == Some(1.0))
            },
        )
        .await;
    // One series per target, never one per reason seen.
    assert_eq!(
        info_lines(&failing, "delivery_account", VICTIM_ACCOUNT).len(),
        1,
        "{name}: {failing}"
    );
    if case.reason != "rate_limited" {
        assert!(
            info_lines(&failing, "delivery_account", GOOD_ACCOUNT).is_empty(),
            "{name}: the good account has no failure series"
        );
    }
    assert!(
        value(
            &failing,
            &format!(
                "mailhost_target_last_failure_timestamp_seconds{{collector=\"delivery_account\",target=\"{VICTIM_ACCOUNT}\"}}"
            )
        )
        .is_some_and(|t| t > 1.7e9),
        "{name}: the time of the last failure"
    );

    // The debug trail of the account, by id alone.
    let (status, text) = debug(&exporter, &format!("target={VICTIM_ACCOUNT}")).await;
    assert_eq!(status, 200, "{name}: {text}");
    for want in [
        "Collector delivery_account, target 1001",
        "State: failing",
        &format!("Reason: {}", case.reason),
        "GET /api/delivery/accounts/{id}",
        "circuit",
        "mailhost_target_success{collector=\"delivery_account\",target=\"1001\"} 0",
    ] {
        assert!(text.contains(want), "{name}: debug lacks {want:?}:\n{text}");
    }
    for want in case.trail {
        assert!(
            text.lines().any(|line| in_order(line, want)),
            "{name}: trail lacks {want:?}:\n{text}"
        );
    }
    assert!(
        !text.contains(TOKEN),
        "{name}: the token is in the debug answer"
    );
    assert!(
        !text.contains(&sim.url),
        "{name}: the provider's URL is in the debug answer"
    );
    assert!(
        !text.contains("/api/delivery/accounts/1001"),
        "{name}: a URL with the id, not the route template:\n{text}"
    );

    // A target of another kind, named with its collector.
    if case.reason != "rate_limited" {
        let (status, text) = debug(
            &exporter,
            &format!("target={VICTIM_MIGRATION}&collector=migration"),
        )
        .await;
        assert_eq!(status, 200, "{name}: {text}");
        assert!(
            text.contains("GET /api/migrations/{migration_code}/stats"),
            "{name}:\n{text}"
        );
    }

    // The landing page links the failing target to its debug view.
    let page = exporter.get("/").await.text().await.unwrap();
    assert!(
        page.contains(&format!(
            "/probe?target={VICTIM_ACCOUNT}&amp;collector=delivery_account&amp;debug=true"
        )),
        "{name}: no debug link on the landing page"
    );
    assert!(
        !page.contains(TOKEN),
        "{name}: the token is on the landing page"
    );

    // Healed: the series goes.
    sim.sim.clear_faults();
    if case.breaker == 0 {
        exporter
            .scrape_until(&format!("{name}: the failure series goes"), |b| {
                info_lines(b, "delivery_account", VICTIM_ACCOUNT).is_empty()
                    && value(
                        b,
                        &format!(
                            "mailhost_target_success{{collector=\"delivery_account\",target=\"{VICTIM_ACCOUNT}\"}}"
                        ),
                    ) == Some(1.0)
            })
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_reason_shows_in_one_series_and_a_debug_trail_without_the_token() {
    let cases = cases();
    assert_eq!(cases.len(), 10, "one case per failure reason");
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
    let mut set = tokio::task::JoinSet::new();
    for case in cases {
        let slots = slots.clone();
        set.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            run_case(case).await;
        });
    }
    while let Some(result) = set.join_next().await {
        if let Err(e) = result {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

#[tokio::test]
async fn a_debug_request_registers_nothing_and_refuses_what_it_cannot_read() {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, 0)).await;
    exporter
        .scrape_until("healthy", |b| value(b, "mailhost_up") == Some(1.0))
        .await;
    let hits = sim.sim.hits("/api/delivery/accounts/4242");
    let (status, text) = debug(&exporter, "target=4242").await;
    assert_eq!(status, 404, "{text}");
    assert!(
        text.contains("No collector of this tenant polls this target"),
        "{text}"
    );
    // Not registered: the next two runs (account 1002's fetches are their witness) never ask
    // for it.
    let witness = sim
        .sim
        .hits(&format!("/api/delivery/accounts/{GOOD_ACCOUNT}"));
    crate::helpers::wait_for("two more runs of the account collector", || async {
        (sim.sim
            .hits(&format!("/api/delivery/accounts/{GOOD_ACCOUNT}"))
            >= witness + 2)
            .then_some(())
    })
    .await;
    assert_eq!(sim.sim.hits("/api/delivery/accounts/4242"), hits);
    // A healthy target: its state, no reason.
    let (status, text) = debug(&exporter, "target=1002").await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("State: ok") && !text.contains("Reason:"),
        "{text}"
    );
    for (query, problem) in [
        ("target=MG00000001", "add collector=NAME"),
        ("target=1&collector=nope", "is not one of"),
        ("target=1&debug=yes", "debug"),
        ("", "target is missing"),
    ] {
        let r = exporter.get(&format!("/probe?{query}&debug=true")).await;
        assert_eq!(r.status(), 400, "{query}");
        let text = r.text().await.unwrap();
        assert!(text.contains(problem), "{query}: {text}");
    }
}
