//! The poller's tests: runs against the simulator on loopback, under tokio's paused clock where time matters.

use super::log::Failures;
use super::*;

use crate::engine::snapshot::CollectorState;

/// The work of one Delivery account collector over `ids` against the provider at `url`
/// (interval 60 s, deadline 30 s), with a client as the exporter builds one.
fn work_of(url: &str, ids: &[i32]) -> Work {
    work_with(url, ids, "")
}

/// [`work_of`] with more lines under `api:` (`api`, each line indented and ending in a newline).
fn work_with(url: &str, ids: &[i32], api: &str) -> Work {
    let ids: Vec<String> = ids.iter().map(i32::to_string).collect();
    let config = crate::config::Config::parse(
        &format!(
            "api:\n  base_url: {url}\n  timeout: 20s\n{api}collectors:\n  delivery_account:\n    interval: 60s\n    deadline: 30s\n    accounts: [{}]\n",
            ids.join(", ")
        ),
        Some("poller-token".to_owned()),
    )
    .unwrap();
    let tenant = &config.tenants[0];
    let api = Arc::new(tenant.api.clone());
    let nothing = Arc::new(crate::upstream::observe::Nothing);
    let pacer = Pacer::new(
        tenant.name.clone(),
        api.concurrency,
        api.rate_limit,
        api.endpoint_rate_limits.clone(),
        api.breaker,
        nothing.clone(),
    );
    let client = crate::upstream::Client::new(
        &api,
        tenant.name.clone(),
        nothing,
        pacer,
        crate::upstream::transport::Transport::new(None).unwrap(),
    )
    .unwrap();
    let spec = CollectorSpec::from_config(&config).remove(0);
    Work {
        ctx: Context {
            client,
            clock: crate::engine::spec::Clock::system(),
        },
        spec,
        poll_set: None,
    }
}

#[tokio::test]
async fn an_idle_collector_task_stays_small() {
    // Ten thousand tenants keep as many collector tasks between runs: 1,800 bytes each
    // (this build) while the task kept its arguments, a plan beside its loop and a timer.
    let work = work_of("http://127.0.0.1:9", &[1]);
    let store = Store::new(std::slice::from_ref(&work.spec));
    let shutdown = CancellationToken::new();
    let (publisher, publishing) = Publisher::start(store.clone(), shutdown.clone());
    let (_plan, plan) = signal::channel(Arc::new(work));
    let start = || {
        Box::new(Start {
            plan: plan.clone(),
            publisher: publisher.clone(),
            stop: shutdown.clone(),
            fetched: FewMap::default(),
            places: Arc::new(Semaphore::new(1)),
        })
    };
    let task = run_collector(start());
    let size = std::mem::size_of_val(&task);
    assert!(size <= 896, "{size} bytes");
    drop(task);
    // The task is the loop with what starts it again after a panic: 1,064 bytes (this
    // build), the loop's 872 and 192.
    let task = supervise(start(), store);
    let size = std::mem::size_of_val(&task);
    assert!(size <= 1088, "{size} bytes");
    drop(task);
    shutdown.cancel();
    publishing.await.unwrap();
}

#[test]
fn a_run_starts_a_task_while_few_wait_for_a_first_turn_and_its_window_has_room() {
    let room = run::Room::new(64);
    assert_eq!((room.window, room.waiting), (1024, 128));
    assert!(room.for_one_more(500, 127));
    assert!(
        !room.for_one_more(500, 128),
        "twice the concurrency wait for a first turn: the next task waits"
    );
    assert!(
        room.for_one_more(1023, 0),
        "tasks that had their turn (in flight, waiting to retry) leave room up to the window"
    );
    assert!(!room.for_one_more(1024, 0));
    assert!(
        room.for_one_more(0, 0),
        "none under way: a run never waits for nothing"
    );
    let large = run::Room::new(512);
    assert_eq!((large.window, large.waiting), (2048, 1024));
    let least = run::Room::new(0);
    assert_eq!((least.window, least.waiting), (1024, 2));
}

#[tokio::test]
async fn a_run_keeps_twice_the_concurrency_waiting_for_a_first_turn_not_its_whole_window() {
    // A provider that takes every call and never answers: two calls in flight (concurrency 2)
    // and, of the other 498 targets, four wait for a turn; the others are not started, so
    // their fetches are not built (498 waited before, the whole window: ten tenants of 10,000
    // accounts held 39 MB of fetches against 3.9 MB for one token of 100,000).
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            open.push(conn);
        }
    });
    let ids: Vec<i32> = (1..=500).collect();
    let work = work_with(&url, &ids, "  concurrency: 2\n");
    let pacer = work.ctx.client.pacer().clone();
    let run = tokio::spawn(async move { run_once(&work.ctx, &work.spec).await });
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while pacer.queued() < 4 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{} calls queued", pacer.queued());
    // Long enough for the run to start any task it would.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(pacer.queued(), 4);
    run.abort();
    held.abort();
}

/// Serves `sim` on a free loopback port until `shutdown` is cancelled; returns its URL.
async fn serve(sim: &mailhost_sim::Simulator, shutdown: &CancellationToken) -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(sim.clone().serve(listener, shutdown.clone()));
    url
}

/// A simulator whose token `poller-token` sees the accounts `ids`.
fn sim_of(ids: &[i32]) -> mailhost_sim::Simulator {
    use mailhost_sim::{AccountSeed, ManagementToken, SimConfig, Simulator};
    Simulator::new(SimConfig {
        management_tokens: vec![ManagementToken {
            token: "poller-token".to_owned(),
            accounts: Some(ids.to_vec()),
        }],
        accounts: ids.iter().copied().map(AccountSeed::with_id).collect(),
        ..SimConfig::default()
    })
}

/// Makes `sim` answer the Delivery account `only` (every one without it) after `latency`.
fn answer_after(sim: &mailhost_sim::Simulator, latency: Duration, only: Option<&str>) {
    let fault = mailhost_sim::FaultSpec {
        latency: Some(latency),
        only_ids: only.map(|id| vec![id.to_owned()]),
        ..mailhost_sim::FaultSpec::default()
    };
    sim.set_fault(mailhost_sim::Route::DeliveryAccountGet, fault);
}

/// The work of each tenant's Delivery account collector over its accounts against `url`, with
/// `each` applied to it, and a store that knows them all.
fn tenants_of(
    url: &str,
    tenants: &[(&str, &[i32])],
    each: impl Fn(&mut Work),
) -> (Vec<Plan>, Arc<Store>) {
    let work: Vec<Work> = tenants
        .iter()
        .map(|(tenant, ids)| {
            let mut w = work_of(url, ids);
            w.spec.tenant = crate::tenant::TenantName::parse(tenant).unwrap();
            each(&mut w);
            w
        })
        .collect();
    let specs: Vec<CollectorSpec> = work.iter().map(|w| w.spec.clone()).collect();
    (work.into_iter().map(Arc::new).collect(), Store::new(&specs))
}

/// A poller of one Delivery account collector over `ids` against `sim`; stops when
/// `shutdown` is cancelled.
async fn poller_of(
    sim: &mailhost_sim::Simulator,
    ids: &[i32],
    shutdown: &CancellationToken,
) -> (Poller, Arc<Store>) {
    let url = serve(sim, shutdown).await;
    let work = work_of(&url, ids);
    let store = Store::new(std::slice::from_ref(&work.spec));
    (
        Poller::start(vec![Arc::new(work)], store.clone(), shutdown.clone()),
        store,
    )
}

#[tokio::test(start_paused = true)]
async fn a_run_with_a_deadline_past_the_end_of_time_saturates_and_never_panics() {
    let mut work = work_of("http://127.0.0.1:9", &[1]);
    work.spec.schedule.deadline = Duration::MAX;
    // An hour before the end of the clock's range: neither the deadline nor a day fits.
    let to_the_end =
        crate::upstream::to_an_hour_before_the_end_of_time(tokio::time::Instant::now());
    tokio::time::advance(to_the_end).await;
    let results = run_once(&work.ctx, &work.spec).await;
    assert_eq!(results.len(), 1);
}

/// Tenants whose collector's loop panics at its next hand-over, once: the test of a loop
/// started again arms one tenant of its own (the tests of this crate run side by side).
static PANIC_AT_HAND_OVER: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Called by [`Loop::run`] before it hands a run's end over: panics there, as a bug in the
/// loop's hand-over would, when the run's tenant is armed.
pub(super) fn hand_over_hook(spec: &CollectorSpec) {
    let mut armed = PANIC_AT_HAND_OVER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(i) = armed.iter().position(|t| t == spec.tenant.as_str()) {
        armed.remove(i);
        drop(armed);
        panic!("injected panic at the hand-over of {}", spec.tenant);
    }
}

#[tokio::test]
async fn a_collector_whose_loop_panics_is_started_again_and_the_others_go_on() {
    let sim = sim_of(&[1, 2, 3, 4]);
    let shutdown = CancellationToken::new();
    let url = serve(&sim, &shutdown).await;
    // Two tenants polled every second; the loop of the first panics at its first hand-over.
    let (panics, steady) = ("restart-panics", "restart-steady");
    let (work, store) = tenants_of(&url, &[(panics, &[1, 2]), (steady, &[3, 4])], |w| {
        w.spec.schedule.interval = Duration::from_secs(1);
        w.spec.schedule.deadline = Duration::from_millis(800);
    });
    PANIC_AT_HAND_OVER.lock().unwrap().push(panics.to_owned());
    let poller = Poller::start(work, store.clone(), shutdown.clone());
    let mut publications = store.subscribe();
    let state = |tenant: &str| -> CollectorState {
        let mut states = published_states(&store).into_iter();
        states.find(|c| c.tenant.as_str() == tenant).unwrap()
    };
    let calls = |id: i32| sim.hits(&format!("/api/delivery/accounts/{id}"));
    // Both collectors make runs after the panic: the panicked one started again (its first
    // run's values went with the panic, and come back), the other one as if nothing happened.
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let (p, s) = (state(panics), state(steady));
            let fetched = |c: &CollectorState| c.targets.iter().all(|t| t.data.is_some());
            if p.restarts == 1
                && calls(1) >= 3
                && calls(3) >= 3
                && p.last_run.is_some_and(|r| r.success)
                && s.last_run.is_some_and(|r| r.success)
                && p.targets.len() == 2
                && fetched(&p)
                && fetched(&s)
            {
                return;
            }
            publications.changed().await.unwrap();
        }
    })
    .await
    .expect("the panicked collector came back and the other one kept running");
    let (p, s) = (state(panics), state(steady));
    assert_eq!((p.restarts, s.restarts), (1, 0));
    let restarted = p.last_restart.unwrap();
    assert!(
        p.last_run.unwrap().finished > restarted,
        "a run after the restart"
    );
    assert!(
        s.last_run.unwrap().finished > restarted,
        "the other one went on"
    );
    assert!(store.prepared().snapshot.ready());
    let body = store.classic_text();
    for (tenant, n) in [(panics, 1), (steady, 0)] {
        let line = format!(
            "mailhost_collector_restarts_total{{tenant=\"{tenant}\",collector=\"delivery_account\"}} {n}\n"
        );
        assert!(body.contains(&line), "{line} not in\n{body}");
    }
    // Shutdown still stops every collector promptly.
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), poller.stopped())
        .await
        .expect("the poller stopped");
}

/// The published state of each collector.
fn published_states(store: &Store) -> Vec<CollectorState> {
    let collectors = store.prepared().snapshot.collectors.clone();
    collectors.values().map(|c| (**c).clone()).collect()
}

/// The published state of the one collector.
fn published(store: &Store) -> CollectorState {
    published_states(store).remove(0)
}

#[tokio::test]
async fn a_run_under_way_publishes_what_it_has_fetched_and_its_end_when_it_ends() {
    let ids: Vec<i32> = (1..=20).collect();
    let sim = sim_of(&ids);
    // Account 20 answers after 6 s: the run is under way until then.
    let slow = Duration::from_secs(6);
    answer_after(&sim, slow, Some("20"));
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let (poller, store) = poller_of(&sim, &ids, &shutdown).await;
    let mut publications = store.subscribe();
    let fetched = |c: &CollectorState| c.targets.iter().filter(|t| t.data.is_some()).count();
    // The 19 fast accounts are published while the run waits for the slow one.
    tokio::time::timeout(slow, async {
        loop {
            let c = published(&store);
            assert!(
                c.last_run.is_none(),
                "the run ended before any of its values was published"
            );
            if fetched(&c) == 19 {
                return;
            }
            publications.changed().await.unwrap();
        }
    })
    .await
    .expect("the accounts fetched were not published while their run was under way");
    let c = published(&store);
    assert!(c.last_run.is_none() && fetched(&c) == 19);
    assert!(c.target(&Target::DeliveryAccount(20)).is_none());
    let body = store.classic_text();
    assert!(
        body.contains("mailhost_delivery_remaining_messages{account_id=\"1\"}"),
        "{body}"
    );
    assert!(!body.contains("mailhost_delivery_remaining_messages{account_id=\"20\"}"));
    assert!(
        !body.contains("mailhost_collector_duration_seconds{"),
        "{body}"
    );
    assert!(!store.prepared().snapshot.ready());
    // The run's end brings the slow account and the run's own series, as before.
    tokio::time::timeout(Duration::from_secs(30), async {
        while published(&store).last_run.is_none() {
            publications.changed().await.unwrap();
        }
    })
    .await
    .expect("the run's end was published");
    let c = published(&store);
    let run = c.last_run.unwrap();
    assert!(run.success, "every target answered");
    assert!(run.duration >= slow && started.elapsed() >= slow);
    assert_eq!(fetched(&c), 20);
    assert_eq!(c.targets.len(), 20, "each target once");
    assert!(store.prepared().snapshot.ready());
    shutdown.cancel();
    poller.stopped().await;
}

#[tokio::test]
async fn a_first_run_waits_for_a_place_while_another_holds_it() {
    let sim = sim_of(&[1, 2]);
    // Each account answers after 2 s: each tenant's first run is under way that long.
    answer_after(&sim, Duration::from_secs(2), None);
    let shutdown = CancellationToken::new();
    let url = serve(&sim, &shutdown).await;
    // Two tenants of one account each, and one place for first runs.
    let (work, store) = tenants_of(&url, &[("a", &[1]), ("b", &[2])], |_| {});
    let started = Instant::now();
    let poller = Poller::with_places(work, store.clone(), shutdown.clone(), 1);
    let mut publications = store.subscribe();
    let runs = |store: &Store| -> Vec<CollectorState> {
        let mut runs = published_states(store);
        runs.retain(|c| c.last_run.is_some());
        runs.sort_by_key(|c| c.last_run.map(|r| r.finished));
        runs
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        while runs(&store).len() < 2 {
            publications.changed().await.unwrap();
        }
    })
    .await
    .expect("both first runs ended");
    let elapsed = started.elapsed();
    let runs = runs(&store);
    // One after the other: together they took no longer than the time both took to end.
    // Under way at once, they would have (about 2 s each, both within about 2 s).
    let durations: Vec<Duration> = runs.iter().map(|c| c.last_run.unwrap().duration).collect();
    assert!(
        durations[0] + durations[1] <= elapsed,
        "first runs of {durations:?} ended within {elapsed:?}: both were under way at once"
    );
    assert!(runs.iter().all(|c| c.last_run.unwrap().success));
    shutdown.cancel();
    poller.stopped().await;
}

#[test]
fn a_collector_logs_one_line_per_reason_per_interval_however_many_runs_it_makes() {
    let spec = crate::engine::spec::fixtures::accounts(&[1], Duration::from_secs(10));
    let failures = |n| {
        vec![Failures {
            reason: FailureReason::NotFound,
            count: n,
            examples: "1".to_owned(),
            detail: "HTTP 404".to_owned(),
        }]
    };
    let mut w = Warnings::default();
    let t0 = Instant::now();
    w.say(&spec, failures(1), t0);
    for i in 1..100 {
        w.say(&spec, failures(2), t0 + Duration::from_millis(50 * i));
    }
    assert_eq!(
        w.last[&FailureReason::NotFound],
        (t0, 198),
        "held back, counted"
    );
    w.say(&spec, failures(1), t0 + Duration::from_secs(10));
    assert_eq!(
        w.last[&FailureReason::NotFound],
        (t0 + Duration::from_secs(10), 0),
        "one line an interval later, with what was held back"
    );
}

#[test]
fn a_target_the_token_keeps_waiting_keeps_its_values_as_long_as_the_fleet_takes_to_come_round() {
    let spec = crate::engine::spec::fixtures::accounts(&[1, 2, 3], Duration::from_secs(2));
    let s = Duration::from_secs;
    let most = crate::settings::limits::MAX_AGE;
    for (intervals, waited, kept, why) in [
        // max_age is 6 s: the pace's promise of 3 intervals (+1) is 8 s.
        (Some(3), None, Some(s(8)), "the pace's promise"),
        (None, None, None, "the fleet fits"),
        (Some(1), None, None, "4 s is within max_age"),
        // The fleet came round slower than promised: a waiting target 9 s old keeps its
        // values two more intervals, whatever the fit said at that instant.
        (Some(3), Some(s(9)), Some(s(13)), "slower than promised"),
        (None, Some(s(9)), Some(s(13)), "whatever the fit said"),
        (None, Some(s(1)), None, "5 s is within max_age"),
        (Some(u64::MAX), Some(Duration::MAX), Some(most), "capped"),
    ] {
        assert_eq!(keep_for(&spec, intervals, waited), kept, "{why}");
    }

    let t0 = Instant::now();
    let mut turns = Turns::default();
    let ok = |id| crate::collectors::delivery_account::fixtures::answered(&[(id, 1.0)]).remove(0);
    let waiting = |id, e: UpstreamError| (Target::DeliveryAccount(id), Err(e));
    assert_eq!(turns.learn(&[ok(1), ok(2), ok(3)], t0), None);
    let deferred = UpstreamError {
        deferred: true,
        ..UpstreamError::new(FailureReason::RateLimited, "not called")
    };
    let shared_429 = UpstreamError::new(FailureReason::RateLimited, "HTTP 429");
    let own_429 = UpstreamError {
        own: true,
        ..UpstreamError::new(FailureReason::RateLimited, "HTTP 429")
    };
    assert_eq!(
        turns.learn(
            &[ok(1), waiting(2, deferred), waiting(3, shared_429)],
            t0 + s(7)
        ),
        Some(s(7)),
        "the token kept 2 and 3 waiting since t0"
    );
    assert_eq!(
        turns.learn(&[waiting(3, own_429), ok(2)], t0 + s(9)),
        None,
        "a target refused on its own is failing, not waiting"
    );
}

#[test]
fn a_run_logs_one_line_per_failure_reason_naming_a_few_targets() {
    let fail = |id: i32, reason: FailureReason, detail: &str| {
        (
            Target::DeliveryAccount(id),
            Err(UpstreamError::new(reason, detail.to_owned())),
        )
    };
    let mut results: Vec<(Target, Result<TargetData, UpstreamError>)> = (1..=1000)
        .map(|id| fail(id, FailureReason::Timeout, "no answer within 2s"))
        .collect();
    results.insert(3, fail(5000, FailureReason::NotFound, "HTTP 404"));
    // Deferred targets were not tried: no warning names them.
    results.push((
        Target::DeliveryAccount(6000),
        Err(UpstreamError {
            deferred: true,
            ..UpstreamError::new(FailureReason::RateLimited, "not called")
        }),
    ));
    let summary = summarize_failures(&results);
    assert_eq!(
        summary,
        [
            Failures {
                reason: FailureReason::Timeout,
                count: 1000,
                examples: "1, 2, 3, 4, 5 and 995 more".to_owned(),
                detail: "no answer within 2s".to_owned(),
            },
            Failures {
                reason: FailureReason::NotFound,
                count: 1,
                examples: "5000".to_owned(),
                detail: "HTTP 404".to_owned(),
            },
        ]
    );
    assert!(summarize_failures::<TargetData>(&[]).is_empty());
}
