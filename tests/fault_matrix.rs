//! The fault matrix: every fault the simulator can inject, against every collector at once,
//! each case with a faulted ("victim") and an untouched ("good") target per collector. For each:
//! `/metrics` keeps answering, the failure carries the right reason, good targets are
//! untouched, the victim's last good values stay until `max_age` and then disappear, and no
//! value shown is ever wrong. A 429 is not a fault of one target but the token's state (it
//! pauses or paces every call of the token): its cases answer every call of the token, in
//! `a_429_on_every_call_of_the_token_fails_or_defers_every_target_and_opens_no_circuit`.

use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_sim::{BodyFault, FaultSpec, Route, SimConfig};

use crate::helpers::{Exporter, TOKEN, spawn_exporter, spawn_sim, value, wait_for};

/// What a fault must lead to.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The victim targets fail with this reason and keep their values until `max_age`.
    Fails(&'static str),
    /// 404: the provider says the resource is gone; its values go at once.
    Gone,
    /// The answer is readable but its values are not: they are counted parse problems, and
    /// never shown.
    Problems,
}

const ROUTES: [Route; 5] = [
    Route::DeliveryAccountGet,
    Route::TracemailDashboard,
    Route::TracemailDaily,
    Route::MigrationStats,
    Route::EmailAccountGet,
];

const ENDPOINTS: [&str; 5] = [
    "delivery_account",
    "tracemail_dashboard",
    "tracemail_daily",
    "migration_stats",
    "email_account",
];

/// (collector, victim target, good target, a stable series of the victim, of the good one)
const TARGETS: [(&str, &str, &str, &str, &str); 5] = [
    (
        "delivery_account",
        "1001",
        "1002",
        "mailhost_delivery_remaining_messages{account_id=\"1001\"}",
        "mailhost_delivery_remaining_messages{account_id=\"1002\"}",
    ),
    (
        "tracemail_dashboard",
        "account:1001",
        "all",
        "mailhost_tracemail_current_day_messages{account=\"1001\",status=\"delivered\"}",
        "mailhost_tracemail_current_day_messages{status=\"delivered\"}",
    ),
    (
        "tracemail_daily",
        "1001",
        "1002",
        "mailhost_delivery_current_day_messages{account_id=\"1001\",status=\"delivered\"}",
        "mailhost_delivery_current_day_messages{account_id=\"1002\",status=\"delivered\"}",
    ),
    (
        "migration",
        "MG00000001",
        "MG00000002",
        "mailhost_migration_messages{migration=\"MG00000001\"}",
        "mailhost_migration_messages{migration=\"MG00000002\"}",
    ),
    (
        "mailbox",
        "EA00000001",
        "EA00000002",
        "mailhost_mailbox_quota_limit_bytes{mailbox=\"EA00000001\"}",
        "mailhost_mailbox_quota_limit_bytes{mailbox=\"EA00000002\"}",
    ),
];

fn cases() -> Vec<(&'static str, FaultSpec, Expect)> {
    let f = FaultSpec::default;
    let status = |code| FaultSpec {
        error_rate: 1.0,
        error_status: Some(code),
        ..f()
    };
    let body = |b| FaultSpec {
        body: Some(b),
        ..f()
    };
    vec![
        (
            "slow headers past the timeout",
            FaultSpec {
                latency: Some(Duration::from_secs(4)),
                ..f()
            },
            Expect::Fails("timeout"),
        ),
        (
            "slow body past the timeout",
            FaultSpec {
                slow_body: Some(Duration::from_secs(4)),
                ..f()
            },
            Expect::Fails("timeout"),
        ),
        (
            "connection reset mid-body",
            FaultSpec {
                reset_mid_body: true,
                ..f()
            },
            Expect::Fails("connect"),
        ),
        ("500", status(500), Expect::Fails("server_error")),
        ("502", status(502), Expect::Fails("server_error")),
        ("503", status(503), Expect::Fails("server_error")),
        ("401", status(401), Expect::Fails("unauthorized")),
        ("403", status(403), Expect::Fails("forbidden")),
        ("404", status(404), Expect::Gone),
        (
            "a body that is not JSON",
            body(BodyFault::NotJson),
            Expect::Fails("decode"),
        ),
        (
            "truncated JSON",
            body(BodyFault::TruncatedJson),
            Expect::Fails("decode"),
        ),
        (
            "JSON of the wrong shape",
            body(BodyFault::WrongShape),
            Expect::Fails("decode"),
        ),
        (
            "an empty resources array",
            body(BodyFault::EmptyResources),
            Expect::Fails("decode"),
        ),
        (
            "a body over the size limit",
            // Just over the exporter's 1 MiB limit: a bigger body only costs the simulator time.
            FaultSpec {
                oversized_bytes: Some(1536 * 1024),
                ..body(BodyFault::Oversized)
            },
            Expect::Fails("decode"),
        ),
        (
            "numbers out of range",
            body(BodyFault::OutOfRange),
            Expect::Problems,
        ),
        (
            "NaN and huge values",
            body(BodyFault::HugeValues),
            Expect::Problems,
        ),
    ]
}

fn config(url: &str) -> Config {
    let targets = SimConfig::demo(TOKEN).demo_targets();
    let mailboxes: Vec<String> = targets
        .mailboxes
        .iter()
        .filter(|(_, m)| m == "EA00000001" || m == "EA00000002")
        .map(|(d, m)| format!("{{domain: {d}, mailbox: {m}}}"))
        .collect();
    let every = "interval: 2s, deadline: 1800ms, max_age: 10s";
    let yaml = format!(
        "api:
  base_url: {url}
  timeout: 1s
  # More slots than calls in a run, so slow victims cannot starve good targets of a slot
  # within these short test deadlines.
  concurrency: 16
  max_response_bytes: 1048576
  max_retries: 1
  retry_backoff: 50ms
  retry_max_backoff: 100ms
  circuit_breaker_failures: 0
collectors:
  delivery_account: {{{every}, accounts: [1001, 1002]}}
  tracemail_dashboard: {{{every}, timezone: Europe/Rome, views: [{{account: 1001}}]}}
  tracemail_daily: {{{every}, timezone: Europe/Rome, accounts: [1001, 1002]}}
  migration: {{{every}, migrations: [MG00000001, MG00000002]}}
  mailbox: {{{every}, mailboxes: [{}]}}
",
        mailboxes.join(", ")
    );
    Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()
}

fn success(collector: &str, target: &str) -> String {
    format!("mailhost_target_success{{collector=\"{collector}\",target=\"{target}\"}}")
}

/// A scrape that must answer 200 and show no impossible value in any business series.
async fn checked_scrape(exporter: &Exporter, case: &str) -> String {
    let r = exporter.get("/metrics").await;
    assert_eq!(r.status(), 200, "{case}: /metrics stopped answering");
    let body = r.text().await.unwrap();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let business = [
            "mailhost_delivery_",
            "mailhost_tracemail_",
            "mailhost_migration_",
            "mailhost_mailbox_",
        ]
        .iter()
        .any(|p| line.starts_with(p));
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap_or(f64::NAN);
        if business {
            assert!(
                v.is_finite() && v.abs() <= 9.1e15,
                "{case}: impossible value shown: {line}"
            );
            // A status code, or an undocumented migration figure, may be negative; counts not.
            let signed = line.starts_with("mailhost_delivery_account_status")
                || line.starts_with("mailhost_migration_aggregate");
            assert!(signed || v >= 0.0, "{case}: negative count shown: {line}");
        }
    }
    body
}

async fn until(
    exporter: &Exporter,
    case: &str,
    what: &str,
    ready: impl Fn(&str) -> bool,
) -> String {
    wait_for(&format!("{case}: {what}"), || async {
        let body = checked_scrape(exporter, case).await;
        ready(&body).then_some(body)
    })
    .await
}

async fn run_case(case: &'static str, fault: FaultSpec, expect: Expect) {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url)).await;
    let all_ok = |b: &str| {
        TARGETS.iter().all(|(c, v, g, vs, gs)| {
            value(b, &success(c, v)) == Some(1.0)
                && value(b, &success(c, g)) == Some(1.0)
                && value(b, vs).is_some()
                && value(b, gs).is_some()
        })
    };
    let before = until(&exporter, case, "every target healthy", all_ok).await;
    let metric = |b: &str, name: &str, endpoint: &str, reason: &str| {
        value(
            b,
            &format!("{name}{{endpoint=\"{endpoint}\",reason=\"{reason}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let problems = |b: &str, endpoint: &str| {
        value(
            b,
            &format!("mailhost_parse_problems_total{{endpoint=\"{endpoint}\"}}"),
        )
        .unwrap_or(0.0)
    };

    let spec = FaultSpec {
        only_ids: Some(vec![
            "1001".into(),
            "MG00000001".into(),
            "EA00000001".into(),
        ]),
        ..fault
    };
    for route in ROUTES {
        sim.sim.set_fault(route, spec.clone());
    }

    let during = match expect {
        Expect::Fails(reason) => {
            // Each victim is checked on the first scrape that shows it failed: its last good
            // value must still be there, unchanged.
            let seen = std::sync::Mutex::new([false; TARGETS.len()]);
            until(
                &exporter,
                case,
                "every victim failed with its reason",
                |b| {
                    let mut seen = seen.lock().unwrap();
                    for (i, (c, v, _, victim, _)) in TARGETS.iter().enumerate() {
                        if !seen[i] && value(b, &success(c, v)) == Some(0.0) {
                            assert_eq!(
                                value(b, victim),
                                value(&before, victim),
                                "{case}: the last good value of {victim} is kept"
                            );
                            seen[i] = true;
                        }
                    }
                    seen.iter().all(|s| *s)
                        && ENDPOINTS.iter().all(|e| {
                            metric(b, "mailhost_api_request_failures_total", e, reason)
                                > metric(&before, "mailhost_api_request_failures_total", e, reason)
                        })
                },
            )
            .await
        }
        Expect::Gone => {
            let body = until(&exporter, case, "every victim gone with not_found", |b| {
                TARGETS.iter().all(|(c, v, _, vs, _)| {
                    value(b, &success(c, v)) == Some(0.0) && value(b, vs).is_none()
                })
            })
            .await;
            for e in ENDPOINTS {
                assert!(
                    metric(&body, "mailhost_api_request_failures_total", e, "not_found") > 0.0,
                    "{case}: {e}"
                );
            }
            body
        }
        Expect::Problems => {
            until(
                &exporter,
                case,
                "parse problems counted on every endpoint",
                |b| {
                    ENDPOINTS
                        .iter()
                        .all(|e| problems(b, e) > problems(&before, e))
                },
            )
            .await
        }
    };
    // Good targets are untouched.
    for (c, _, good, _, good_series) in TARGETS {
        assert_eq!(
            value(&during, &success(c, good)),
            Some(1.0),
            "{case}: good target {c} {good}"
        );
        assert!(
            value(&during, good_series).is_some(),
            "{case}: {good_series}"
        );
    }
    assert!(
        value(&during, "mailhost_up") == Some(0.0) || matches!(expect, Expect::Problems),
        "{case}: mailhost_up"
    );

    // After max_age, the failing victims' values are gone; their health series stay.
    if let Expect::Fails(_) = expect {
        let body = until(&exporter, case, "the victims' values to expire", |b| {
            TARGETS
                .iter()
                .all(|(_, _, _, vs, _)| value(b, vs).is_none())
        })
        .await;
        for (c, v, ..) in TARGETS {
            assert_eq!(
                value(&body, &success(c, v)),
                Some(0.0),
                "{case}: health of {c} {v} stays"
            );
        }
    }

    // Once the fault is gone, everything comes back.
    sim.sim.clear_faults();
    until(&exporter, case, "recovery", all_ok).await;
}

// Several threads: the simulators run in this process and must answer good targets promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_against_every_collector_fails_only_its_victims_with_the_right_reason() {
    let cases = cases();
    assert!(cases.len() >= 15);
    // A few cases at a time: each runs a simulator and an exporter, and a slow shared machine
    // must still answer the good targets well within their short test deadlines.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
    let mut set = tokio::task::JoinSet::new();
    for (case, fault, expect) in cases {
        let slots = slots.clone();
        set.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            run_case(case, fault, expect).await;
        });
    }
    while let Some(result) = set.join_next().await {
        if let Err(e) = result {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

#[tokio::test]
async fn a_refused_connection_fails_every_target_with_connect_and_metrics_keep_answering() {
    // Nothing listens on the port of a listener that was bound and dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let exporter = spawn_exporter(config(&format!("http://127.0.0.1:{port}"))).await;
    let body = until(
        &exporter,
        "connection refused",
        "connect failures everywhere",
        |b| {
            TARGETS.iter().all(|(c, v, g, ..)| {
                value(b, &success(c, v)) == Some(0.0) && value(b, &success(c, g)) == Some(0.0)
            })
        },
    )
    .await;
    for e in ENDPOINTS {
        let failures = value(
            &body,
            &format!("mailhost_api_request_failures_total{{endpoint=\"{e}\",reason=\"connect\"}}"),
        );
        assert!(failures.is_some_and(|v| v > 0.0), "{e}");
    }
    assert_eq!(value(&body, "mailhost_up"), Some(0.0));
    assert_eq!(exporter.get("/-/healthy").await.status(), 200);
}

#[tokio::test]
async fn retry_after_is_waited_for_within_the_deadline_in_both_forms() {
    for http_date in [false, true] {
        let sim = spawn_sim().await;
        sim.sim.set_fault(
            Route::DeliveryAccountGet,
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: 2,
                retry_after_http_date: http_date,
                ..FaultSpec::default()
            },
        );
        let yaml = format!(
            "api:\n  base_url: {}\n  timeout: 1s\n  max_retries: 1\n  circuit_breaker_failures: 0\ncollectors:\n  delivery_account:\n    interval: 5s\n    deadline: 4s\n    accounts: [1001]\n",
            sim.url
        );
        let exporter = spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await;
        let retried =
            "mailhost_api_retries_total{endpoint=\"delivery_account\",reason=\"rate_limited\"}";
        let body = until(&exporter, "Retry-After", "a retry after the wait", |b| {
            value(b, retried).is_some_and(|v| v >= 1.0)
                && value(
                    b,
                    "mailhost_collector_duration_seconds{collector=\"delivery_account\"}",
                )
                .is_some()
        })
        .await;
        // The run waited for the Retry-After of 2 s before its second attempt (an HTTP date
        // has whole-second precision, so at least one second of it).
        let took = value(
            &body,
            "mailhost_collector_duration_seconds{collector=\"delivery_account\"}",
        )
        .unwrap();
        assert!(
            took >= 0.9,
            "http_date={http_date}: the run took {took}s, it did not wait"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_every_call_of_the_token_fails_or_defers_every_target_and_opens_no_circuit() {
    let cases = [
        // Retry-After past the 1.8 s deadline: every call that met a 429 fails at once.
        (
            "429 with Retry-After in seconds past the deadline",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: 3,
                ..FaultSpec::default()
            },
        ),
        (
            "429 with Retry-After as an HTTP date past the deadline",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: 3,
                retry_after_http_date: true,
                ..FaultSpec::default()
            },
        ),
        // No Retry-After: each call tries again at its next turn until the deadline.
        (
            "429 without Retry-After",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_omit: true,
                ..FaultSpec::default()
            },
        ),
    ];
    let mut set = tokio::task::JoinSet::new();
    for (case, fault) in cases {
        set.spawn(async move {
            let sim = spawn_sim().await;
            let mut config = config(&sim.url);
            for t in &mut config.tenants {
                t.api.breaker.failures = 1;
            }
            let exporter = spawn_exporter(config).await;
            let every = |b: &str, want: f64| {
                TARGETS.iter().all(|(c, v, g, ..)| {
                    value(b, &success(c, v)) == Some(want) && value(b, &success(c, g)) == Some(want)
                })
            };
            let before = until(&exporter, case, "every target healthy", |b| every(b, 1.0)).await;
            for route in ROUTES {
                sim.sim.set_fault(route, fault.clone());
            }
            // Every target either failed rate_limited (a 429, then no turn before its deadline) or
            // was deferred (the pause or the pace gave it no turn at all): none succeeds.
            let settled = |b: &str| {
                TARGETS.iter().all(|(c, v, g, ..)| {
                    let failed = [v, g]
                        .into_iter()
                        .filter(|t| value(b, &success(c, t)) == Some(0.0))
                        .count() as f64;
                    let deferred = value(
                        b,
                        &format!("mailhost_collector_deferred_targets{{collector=\"{c}\"}}"),
                    )
                    .unwrap_or(0.0);
                    // Each collector has its two targets: with the token paced or paused, one
                    // that never got a turn is deferred, and keeps its values and last outcome.
                    failed + deferred >= 2.0
                })
            };
            let throttled = |b: &str| {
                ENDPOINTS
                    .iter()
                    .filter_map(|e| {
                        value(
                            b,
                            &format!(
                                "mailhost_api_request_failures_total{{endpoint=\"{e}\",reason=\"rate_limited\"}}"
                            ),
                        )
                    })
                    .sum::<f64>()
            };
            let during = until(&exporter, case, "every target failed or deferred", |b| {
                settled(b) && throttled(b) > throttled(&before)
            })
            .await;
            for e in ENDPOINTS {
                assert_eq!(
                    value(&during, &format!("mailhost_api_open_circuits{{endpoint=\"{e}\"}}")),
                    Some(0.0),
                    "{case}: a 429 opened a circuit of {e}"
                );
            }
            assert!(
                value(&during, "mailhost_api_pacer_rate").is_some()
                    || value(&during, "mailhost_api_pacer_paused") == Some(1.0),
                "{case}: the pacer took the 429s for the token's"
            );
            // Once the provider stops answering 429, every target comes back.
            sim.sim.clear_faults();
            until(&exporter, case, "recovery", |b| every(b, 1.0)).await;
        });
    }
    while let Some(result) = set.join_next().await {
        if let Err(e) = result {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

#[tokio::test]
async fn client_errors_are_never_retried() {
    let sim = spawn_sim().await;
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(404),
            ..FaultSpec::default()
        },
    );
    let exporter = spawn_exporter(crate::helpers::config(
        &sim.url,
        TOKEN,
        &[1001],
        "  max_retries: 3\n",
    ))
    .await;
    let body = until(&exporter, "404", "three runs", |b| {
        value(
            b,
            "mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"404\"}",
        )
        .is_some_and(|v| v >= 3.0)
    })
    .await;
    for reason in ["timeout", "connect", "server_error", "rate_limited"] {
        assert_eq!(
            value(
                &body,
                &format!(
                    "mailhost_api_retries_total{{endpoint=\"delivery_account\",reason=\"{reason}\"}}"
                )
            ),
            Some(0.0)
        );
    }
}

#[tokio::test]
async fn an_open_circuit_turns_a_broken_account_into_one_call_per_cool_down() {
    let sim = spawn_sim().await;
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            ..FaultSpec::default()
        },
    );
    let extra = "  max_retries: 0\n  circuit_breaker_failures: 2\n  circuit_breaker_cooldown: 4s\n";
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 2s\n{extra}collectors:\n  delivery_account:\n    interval: 1s\n    accounts: [1001]\n",
        sim.url
    );
    let exporter = spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await;
    let calls = "mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"500\"}";
    let open = until(&exporter, "breaker", "the circuit to open", |b| {
        value(
            b,
            "mailhost_api_open_circuits{endpoint=\"delivery_account\"}",
        ) == Some(1.0)
    })
    .await;
    let at_open = value(&open, calls).unwrap();
    // Three more runs happen within the cool-down, each refused by the circuit; none reaches
    // the API.
    let refused = "mailhost_api_request_failures_total{endpoint=\"delivery_account\",reason=\"circuit_open\"}";
    let refused_at_open = value(&open, refused).unwrap_or(0.0);
    let body = until(
        &exporter,
        "breaker",
        "three runs refused by the circuit",
        |b| value(b, refused).is_some_and(|v| v >= refused_at_open + 3.0),
    )
    .await;
    assert!(
        value(&body, calls).unwrap() <= at_open + 1.0,
        "calls went out while the circuit was open"
    );
    assert!(
        value(
            &body,
            "mailhost_collector_success{collector=\"delivery_account\"}"
        ) == Some(0.0)
    );
    // After the cool-down a probe goes out; when the API is back, the circuit closes.
    sim.sim.clear_faults();
    until(&exporter, "breaker", "the circuit to close", |b| {
        value(
            b,
            "mailhost_api_open_circuits{endpoint=\"delivery_account\"}",
        ) == Some(0.0)
            && value(b, &success("delivery_account", "1001")) == Some(1.0)
    })
    .await;
}

#[tokio::test]
async fn a_retry_with_no_turn_before_the_deadline_fails_with_what_its_last_attempt_met() {
    // One slot. 1001 answers 500; while its retry backs off, 1002, which never answers, takes
    // the slot until the deadline: 1001's retry has no turn. It failed with an HTTP 500, and
    // says so, not the deadline.
    let sim = spawn_sim().await;
    sim.sim.add_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(500),
            only_ids: Some(vec!["1001".to_owned()]),
            ..FaultSpec::default()
        },
    );
    sim.sim.add_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            latency: Some(Duration::from_secs(3600)),
            only_ids: Some(vec!["1002".to_owned()]),
            ..FaultSpec::default()
        },
    );
    let exporter = spawn_exporter(crate::helpers::config(
        &sim.url,
        TOKEN,
        &[1001, 1002],
        "  concurrency: 1\n  max_retries: 1\n  retry_backoff: 100ms\n",
    ))
    .await;
    let series = |reason: &str| {
        format!(
            "mailhost_target_failure_info{{collector=\"delivery_account\",target=\"1001\",reason=\"{reason}\"}}"
        )
    };
    let body = until(&exporter, "500", "1001 failed", |b| {
        b.lines().any(|l| {
            l.starts_with(
                "mailhost_target_failure_info{collector=\"delivery_account\",target=\"1001\"",
            )
        })
    })
    .await;
    assert_eq!(value(&body, &series("server_error")), Some(1.0), "{body}");
    assert!(value(&body, &series("timeout")).is_none(), "{body}");
}
