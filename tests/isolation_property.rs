//! The isolation property over the whole fault matrix: one Delivery account broken in one way
//! (404, 403, 500, 503 with and without `Retry-After`, a cut body, an answer later than the
//! timeout, no answer at all, a slow body, 429 with and without `Retry-After`)
//! beside twelve healthy ones on the same token and the same endpoint. For every fault, over a
//! dozen intervals after it starts, every healthy account keeps its values and is refreshed every
//! interval, judged by the exporter's own last-success series, while the broken one fails with
//! its reason. A 429 answered for one account is that account's answer: it must neither slow
//! nor pause its neighbours.

use std::time::{Duration, Instant, SystemTime};

use mailhost_exporter::config::Config;
use mailhost_sim::{Account, AccountSeed, FaultSpec, Route};

use crate::helpers::{Exporter, Sim, TOKEN, spawn_exporter, spawn_sim, value};

/// The broken account.
const FAULTY: i32 = 3000;
/// Its neighbours: enough that three free connection slots need several rounds per run, so a
/// token that is held back shows in their refresh.
const HEALTHY: std::ops::RangeInclusive<i32> = 3001..=3012;

const INTERVAL: Duration = Duration::from_secs(2);
/// How stale a healthy account's last success may be at a sample. Runs start every interval
/// and are applied whole at their end, within the deadline, so an account refreshed by every
/// run is at most an interval and a deadline old (3.8 s); two intervals and a second leave a
/// slow machine its slack, and are passed as soon as the account misses a run or two.
const FRESH: Duration = Duration::from_secs(2 * INTERVAL.as_secs() + 1);
/// A dozen intervals after the fault starts.
const OBSERVATION: Duration = Duration::from_secs(12 * INTERVAL.as_secs());
/// The cadence of the observation's scrapes, bounded in count by [`OBSERVATION`].
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// One row of the matrix: its name, the fault on the broken account, the reason it must fail
/// with.
struct Case {
    name: &'static str,
    fault: FaultSpec,
    reason: &'static str,
}

fn cases() -> Vec<Case> {
    let f = FaultSpec::default;
    let status = |code| FaultSpec {
        error_rate: 1.0,
        error_status: Some(code),
        ..f()
    };
    let case = |name, fault, reason| Case {
        name,
        fault,
        reason,
    };
    vec![
        case("404", status(404), "not_found"),
        case("403", status(403), "forbidden"),
        case("500", status(500), "server_error"),
        case("503", status(503), "server_error"),
        case(
            "a body cut mid-way",
            FaultSpec {
                reset_mid_body: true,
                ..f()
            },
            "connect",
        ),
        case(
            "no answer within the timeout",
            FaultSpec {
                latency: Some(Duration::from_secs(4)),
                ..f()
            },
            "timeout",
        ),
        case(
            "a body slower than the timeout",
            FaultSpec {
                slow_body: Some(Duration::from_secs(4)),
                ..f()
            },
            "timeout",
        ),
        case(
            "429 with Retry-After: 1",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: 1,
                ..f()
            },
            "rate_limited",
        ),
        case(
            "429 without Retry-After",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_omit: true,
                ..f()
            },
            "rate_limited",
        ),
        case(
            "503 with Retry-After: 1",
            FaultSpec {
                error_retry_after_secs: Some(1),
                ..status(503)
            },
            "rate_limited",
        ),
        case(
            "no answer at all",
            FaultSpec {
                no_answer_rate: 1.0,
                ..f()
            },
            "timeout",
        ),
    ]
}

fn config(url: &str) -> Config {
    let ids: Vec<String> = std::iter::once(FAULTY)
        .chain(HEALTHY)
        .map(|i| i.to_string())
        .collect();
    let yaml = format!(
        "api:
  base_url: {url}
  # Below the deadline, so the faults of no answer and of a slow body fail as timeouts.
  timeout: 1s
  # Few slots for thirteen accounts: a pacer that holds the token back, or a broken account
  # that holds a slot, really delays the healthy ones.
  concurrency: 4
  # A transient fault is tried again within the run: the broken account holds its slot as long
  # as it can.
  max_retries: 1
  retry_backoff: 50ms
  retry_max_backoff: 100ms
  # The breaker off: the broken account is called in every run, so its fault bites in every
  # interval of the observation. An open circuit would stop calling it and leave the healthy
  # ones untouched for the wrong reason. (A 429 never counts towards a circuit anyway.)
  circuit_breaker_failures: 0
collectors:
  delivery_account:
    interval: {}s
    deadline: 1800ms
    # Longer than the freshness bound, so a healthy account refreshed within it never loses
    # its values by accident; short enough that one whose refreshes stop loses them within
    # the observation. (An account deferred by the token's pace keeps them longer while the
    # fleet does not fit the pace: there the freshness bound is what catches it.)
    max_age: 6s
    accounts: [{}]
",
        INTERVAL.as_secs(),
        ids.join(", ")
    );
    Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()
}

/// The demo simulator with the broken account and its healthy neighbours added.
async fn fleet() -> Sim {
    let sim = spawn_sim().await;
    for id in std::iter::once(FAULTY).chain(HEALTHY) {
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

fn remaining(id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{account_id=\"{id}\"}}")
}

fn success(id: i32) -> String {
    format!("mailhost_target_success{{collector=\"delivery_account\",target=\"{id}\"}}")
}

fn last_success(id: i32) -> String {
    format!(
        "mailhost_target_last_success_timestamp_seconds{{collector=\"delivery_account\",target=\"{id}\"}}"
    )
}

fn failure_info(id: i32, reason: &str) -> String {
    format!(
        "mailhost_target_failure_info{{collector=\"delivery_account\",target=\"{id}\",reason=\"{reason}\"}}"
    )
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// What is wrong with one healthy account in a scrape.
enum Breach {
    LostValues,
    NeverSucceeded,
    /// Its last success is this many seconds old, over [`FRESH`].
    Stale(f64),
}

/// What is wrong with the healthy accounts in one scrape taken at `now` (Unix seconds).
fn breaches(body: &str, now: f64) -> Vec<(i32, Breach)> {
    let mut found = Vec::new();
    for id in HEALTHY {
        if value(body, &remaining(id)).is_none() {
            found.push((id, Breach::LostValues));
        }
        match value(body, &last_success(id)) {
            None => found.push((id, Breach::NeverSucceeded)),
            Some(at) if now - at > FRESH.as_secs_f64() => found.push((id, Breach::Stale(now - at))),
            Some(_) => {}
        }
    }
    found
}

fn describe(breaches: &[(i32, Breach)]) -> String {
    let each: Vec<String> = breaches
        .iter()
        .map(|(id, b)| match b {
            Breach::LostValues => format!("{id} lost its values"),
            Breach::NeverSucceeded => format!("{id} has no last success"),
            Breach::Stale(age) => format!("{id} last refreshed {age:.1}s ago"),
        })
        .collect();
    each.join(", ")
}

async fn scrape(exporter: &Exporter, case: &str) -> String {
    let r = exporter.get("/metrics").await;
    assert_eq!(r.status(), 200, "{case}: /metrics stopped answering");
    r.text().await.unwrap()
}

/// Runs one case; `Err` says when the property first broke, how often and how badly. The
/// observation runs to its end either way, so a breach is measured, not only found.
async fn run_case(case: Case) -> Result<(), String> {
    let name = case.name;
    let sim = fleet().await;
    let exporter = spawn_exporter(config(&sim.url)).await;
    exporter
        .scrape_until(&format!("{name}: every account polled once"), |b| {
            std::iter::once(FAULTY)
                .chain(HEALTHY)
                .all(|id| value(b, &success(id)) == Some(1.0) && value(b, &remaining(id)).is_some())
        })
        .await;

    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            only_ids: Some(vec![FAULTY.to_string()]),
            ..case.fault
        },
    );
    let started = Instant::now();
    let mut bitten = false;
    let mut samples = 0;
    let mut first: Option<String> = None;
    let mut breached_samples = 0;
    let mut stalest: Option<(i32, f64)> = None;
    let mut lost = std::collections::BTreeSet::new();
    while started.elapsed() < OBSERVATION {
        let body = scrape(&exporter, name).await;
        let now = unix_now();
        samples += 1;
        let found = breaches(&body, now);
        if !found.is_empty() {
            breached_samples += 1;
            first.get_or_insert_with(|| {
                format!(
                    "first {:.1}s after the fault started (sample {samples}): {}",
                    started.elapsed().as_secs_f64(),
                    describe(&found)
                )
            });
            for (id, b) in &found {
                match b {
                    Breach::Stale(age) if stalest.is_none_or(|(_, a)| *age > a) => {
                        stalest = Some((*id, *age));
                    }
                    Breach::LostValues => {
                        lost.insert(*id);
                    }
                    _ => {}
                }
            }
        }
        bitten |= value(&body, &success(FAULTY)) == Some(0.0)
            && value(&body, &failure_info(FAULTY, case.reason)) == Some(1.0);
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    if let Some(first) = first {
        let stalest = stalest.map_or(String::new(), |(id, age)| {
            format!("; the stalest, {id}, last refreshed {age:.1}s before a sample")
        });
        let lost = if lost.is_empty() {
            String::new()
        } else {
            format!("; {} of them lost their values", lost.len())
        };
        return Err(format!(
            "healthy accounts breached the property at {breached_samples} of {samples} samples \
             (bound {}s), {first}{stalest}{lost}; the broken account {} seen failing with {}",
            FRESH.as_secs(),
            if bitten { "was" } else { "was never" },
            case.reason,
        ));
    }
    // The fault bit: otherwise the healthy accounts proved nothing.
    if !bitten {
        return Err(format!(
            "the broken account was never seen failing with {} in {samples} samples",
            case.reason
        ));
    }
    Ok(())
}

/// The message of a case's panic (a wait that gave up, a scrape that failed).
fn panic_message(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let p = e.into_panic();
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panicked".to_owned())
}

// Several threads: the simulators run in this process and must answer the healthy accounts
// promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broken_account_never_stalls_its_healthy_neighbours_whatever_the_fault() {
    let cases = cases();
    assert_eq!(cases.len(), 11, "one case per fault of the matrix");
    // A few cases at a time: each runs a simulator and an exporter, and a slow shared machine
    // must still answer the healthy accounts well within their short deadlines.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
    let mut set = tokio::task::JoinSet::new();
    for case in cases {
        let slots = slots.clone();
        set.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            let name = case.name;
            // Every case runs to its end, so one run of the test names every fault that breaks
            // the property, not only the first.
            let outcome = tokio::spawn(run_case(case))
                .await
                .unwrap_or_else(|e| Err(panic_message(e)));
            (name, outcome)
        });
    }
    let mut broken = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (name, outcome) = joined.unwrap();
        if let Err(why) = outcome {
            broken.push(format!("{name}: {why}"));
        }
    }
    broken.sort();
    assert!(
        broken.is_empty(),
        "a broken account stalled its healthy neighbours:\n{}",
        broken.join("\n")
    );
}
