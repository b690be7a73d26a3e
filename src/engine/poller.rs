//! The poller: each collector on its own interval (first run at start), never overlapping
//! itself, each run bounded by its deadline, its targets' results handed to the store as they
//! come (in parts, every [`HANDOFF_EVERY`], [`FIRST_HANDOFF_EVERY`] in a collector's first run)
//! and its end when it ends; and a timer that expires
//! values at `max_age` whether or not a run finishes.
//!
//! The exporter polls on its own schedule rather than on each Prometheus scrape: the provider
//! rate-limits the token, and two Prometheus servers of an HA pair would double the calls.
//!
//! A reload hands each running collector its new plan instead of restarting it: a collector
//! whose schedule and settings did not change keeps its ticker, so a burst of reloads costs no
//! upstream call; targets the reload added are fetched at once, targets it removed are dropped.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::collectors::Revealed;
use crate::config::TargetFailureLog;
use crate::engine::few::{FewMap, FewSet};
use crate::engine::poll_set::{PollSet, Registered};
use crate::engine::restart;
use crate::engine::signal;
use crate::engine::spec::{
    CollectorKey, CollectorName, CollectorSpec, Context, Fetch, Job, Target, TargetData,
};
use crate::engine::store::{Finished, Publisher, RunPart, Store};
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::pacer::{Demand, Pacer};
use crate::upstream::trail::Recorder;

/// Slack given to a collector past its deadline before its work is abandoned.
const DEADLINE_GRACE: Duration = Duration::from_millis(100);

/// The expiry timer looks at least this often (and sooner when a value is due to expire).
const EXPIRY_CHECK: Duration = Duration::from_secs(1);

/// One collector to run: its tenant's context, its spec, and its tenant's poll set, whose live
/// probed and discovered targets it polls besides the configured ones and which its runs feed.
/// Replaced whole on reload.
#[derive(Clone)]
pub struct Work {
    pub ctx: Context,
    pub spec: CollectorSpec,
    pub poll_set: Option<Arc<PollSet>>,
}

impl Work {
    /// The targets to poll now: the configured ones, then the live probed ones that are not.
    fn targets(&self, now: Instant) -> Vec<Target> {
        let mut targets = self.spec.targets.clone();
        if let Some(set) = &self.poll_set {
            let configured: HashSet<&Target> = self.spec.targets.iter().collect();
            let extra: Vec<Target> = set
                .targets(self.spec.name, now)
                .into_iter()
                .filter(|t| !configured.contains(t))
                .collect();
            targets.extend(extra);
        }
        targets
    }

    /// Feeds a run's results to the poll set: what each account's fetch said (a probed
    /// account is confirmed by a success; one the provider refused, 404 or 403, leaves and is
    /// remembered), the accounts of the dashboard's top lists and the domains of the daily
    /// statistics (discovered when the tenant asks for it); a view answered 404 leaves.
    fn learn(&self, results: &[Landed]) {
        let Some(set) = &self.poll_set else {
            return;
        };
        let now = Instant::now();
        let (mut ok, mut failed, mut refused) = (Vec::new(), Vec::new(), Vec::new());
        for (target, result) in results {
            if let Some(id) = target.account_id() {
                match result {
                    Ok(_) => ok.push(id),
                    Err(e)
                        if matches!(
                            e.reason,
                            FailureReason::NotFound | FailureReason::Forbidden
                        ) =>
                    {
                        refused.push((id, e.reason));
                    }
                    // Not tried: its first fetch has not ended.
                    Err(e) if e.deferred => {}
                    Err(_) => failed.push(id),
                }
            }
            match result {
                Err(e) if e.reason == FailureReason::NotFound && target.account_id().is_none() => {
                    set.forget(target, now)
                }
                Ok(Held::Here(data)) => self.discover(data, now),
                Ok(Held::Handed) | Err(_) => {}
            }
        }
        set.record(&ok, &failed, &refused, now);
    }

    /// Feeds the poll set the targets `data` reveals (a dashboard's top accounts, the daily
    /// statistics' domains), when the tenant discovers them.
    fn discover(&self, data: &TargetData, now: Instant) {
        let Some(set) = &self.poll_set else {
            return;
        };
        match data.reveals() {
            Revealed::Accounts(ids) => set.discover_accounts(ids, now),
            Revealed::Domains(names) => set.discover_domains(names, now),
            Revealed::Nothing => {}
        }
    }

    /// The spec with the targets polled now, as the snapshot is to keep them.
    fn polled(&self, now: Instant) -> CollectorSpec {
        CollectorSpec {
            targets: self.targets(now),
            ..self.spec.clone()
        }
    }
}

/// A collector's plan: shared, so that a run takes a pointer to it, not a copy.
pub type Plan = Arc<Work>;

/// A target's data as its run keeps it until its end: still here, or gone to the publisher with
/// a part of the run (see [`Parts`]; the targets it revealed were discovered then). What the run
/// learns at its end (outcomes, failures, the backlog) needs no more: a record is never held
/// twice while a first run of a large fleet is under way. Boxed: a run keeps a result for each
/// of its targets until its end, and a record inline would make each place of that list the size
/// of the largest record (344 bytes rather than 72; 27 MB for a run of 100,000 accounts).
enum Held {
    Here(Box<TargetData>),
    Handed,
}

/// One target's result as a run keeps it.
type Landed = (Target, Result<Held, UpstreamError>);

/// The results a run hands over at its end: those no part took, with their data.
fn unhanded(results: Vec<Landed>) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
    results
        .into_iter()
        .filter_map(|(target, result)| match result {
            Ok(Held::Here(data)) => Some((target, Ok(*data))),
            Ok(Held::Handed) => None,
            Err(e) => Some((target, Err(e))),
        })
        .collect()
}

struct Running {
    plan: signal::Sender<Plan>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// Runs under way at once, across every collector of every tenant. A run takes its room (its
/// future, its target tasks, its calls' places in the pacer and the transport, about 6 KiB for a
/// tenant of one account) when it starts, not when a call can go: ten thousand tenants starting
/// together held ten thousand runs while their calls waited for a connection
/// ([`crate::upstream::transport::MAX_CALLS`] at most in flight), and again at each tick, since
/// their ticks stay together. A collector's run waits here for a place instead, in its
/// collector's task, where waiting costs nothing more. 512 places: a quarter of the calls the
/// transport lets go at once, so the runs still fill what the provider is asked at a time (a run
/// of many targets holds one place and has its calls in flight as before); a tenant whose
/// provider never answers holds one place for at most its run's deadline. Urgent runs (the first
/// fetches of targets a probe, discovery or a reload added, which a probe may be waiting for)
/// never wait here.
pub const RUNS_AT_ONCE: usize = 512;

/// The running collectors and the expiry timer.
pub struct Poller {
    store: Arc<Store>,
    /// Places for runs ([`RUNS_AT_ONCE`]), shared by every collector.
    places: Arc<Semaphore>,
    /// Where finished runs go: applied together, published with one rendering.
    publisher: Publisher,
    shutdown: CancellationToken,
    running: HashMap<CollectorKey, Running>,
    expiry: JoinHandle<()>,
    publishing: JoinHandle<()>,
}

impl Poller {
    /// Starts every collector of `work` (each with its tenant's context) and the expiry timer;
    /// all stop when `shutdown` is cancelled. Each collector's plan is the very `work` given:
    /// the caller keeps it for reloads, and ten thousand tenants hold one copy each, not two.
    pub fn start(work: Vec<Plan>, store: Arc<Store>, shutdown: CancellationToken) -> Poller {
        Poller::with_places(work, store, shutdown, RUNS_AT_ONCE)
    }

    /// [`Poller::start`] with `places` runs under way at once.
    fn with_places(
        work: Vec<Plan>,
        store: Arc<Store>,
        shutdown: CancellationToken,
        places: usize,
    ) -> Poller {
        let expiry = tokio::spawn(expire(store.clone(), shutdown.clone()));
        let (publisher, publishing) = Publisher::start(store.clone(), shutdown.clone());
        let mut poller = Poller {
            store,
            places: Arc::new(Semaphore::new(places)),
            publisher,
            shutdown,
            running: HashMap::new(),
            expiry,
            publishing,
        };
        for w in work {
            poller.spawn(w);
        }
        poller
    }

    fn spawn(&mut self, work: Plan) {
        let name = work.spec.key();
        let stop = self.shutdown.child_token();
        // Targets restored from the storage directory: the first run leaves those fetched less
        // than an interval ago to the next tick and takes the others oldest first.
        let fetched = seen_at(self.store.restored(&name));
        let (plan, rx) = signal::channel(work);
        let task = tokio::spawn(supervise(
            Box::new(Start {
                plan: rx,
                publisher: self.publisher.clone(),
                stop: stop.clone(),
                fetched,
                places: self.places.clone(),
            }),
            self.store.clone(),
        ));
        self.running.insert(name, Running { plan, stop, task });
    }

    /// Takes a reloaded config. A collector whose schedule and settings are unchanged keeps
    /// running on its schedule with the new plan (new client, new target list); one that changed
    /// is restarted; one no longer configured is stopped. What a run in flight of a restarted or
    /// stopped collector has not handed over is dropped, and its end never comes; the parts it
    /// handed over hold whole results of single targets, and the store drops them too when
    /// their collector is no longer configured.
    pub async fn reconfigure(&mut self, work: Vec<Plan>) {
        let wanted: HashSet<CollectorKey> = work.iter().map(|w| w.spec.key()).collect();
        let gone: Vec<CollectorKey> = self
            .running
            .keys()
            .filter(|n| !wanted.contains(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = self.running.remove(&name) {
                r.stop.cancel();
                let _ = r.task.await;
            }
        }
        {
            let store = self.store.clone();
            // Probed targets stay in the snapshot with their values across a reload.
            let now = Instant::now();
            let specs: Vec<CollectorSpec> = work.iter().map(|w| w.polled(now)).collect();
            off_the_workers(move || store.reconfigure(&specs)).await;
        }
        for w in work {
            let key = w.spec.key();
            let same_schedule = self.running.get(&key).is_some_and(|r| {
                let current = &r.plan.borrow().spec;
                current.schedule == w.spec.schedule
                    && current.collector.same_settings(&w.spec.collector)
            });
            if same_schedule {
                let r = &self.running[&key];
                r.plan.send(w);
                continue;
            }
            if let Some(r) = self.running.remove(&key) {
                r.stop.cancel();
                let _ = r.task.await;
            }
            self.spawn(w);
        }
    }

    /// Waits for every collector and the timer to stop (after `shutdown` is cancelled).
    pub async fn stopped(self) {
        for (_, r) in self.running {
            let _ = r.task.await;
        }
        let _ = self.expiry.await;
        drop(self.publisher);
        let _ = self.publishing.await;
    }
}

/// Runs `work` (applying a run, expiring, reconfiguring: each renders and gzips, which for a
/// large fleet takes seconds of CPU) on the blocking pool, so that the runtime's workers keep
/// answering scrapes meanwhile. `None` if `work` panicked.
async fn off_the_workers<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Some(value),
        Err(e) => {
            tracing::error!(error = %e, "publishing the snapshot failed");
            None
        }
    }
}

/// Expires values at `max_age` on time, even when no run finishes (an upstream slower than the
/// deadline, a stuck collector): a value is never served older than `max_age` plus a second.
async fn expire(store: Arc<Store>, shutdown: CancellationToken) {
    loop {
        let next = {
            let store = store.clone();
            off_the_workers(move || store.expire()).await.flatten()
        };
        let wait = next
            .and_then(|at| {
                let d = at.duration_since(jiff::Timestamp::now());
                Duration::try_from(d).ok()
            })
            .map_or(EXPIRY_CHECK, |d| d.min(EXPIRY_CHECK))
            // Just past the instant, so the value is then older than max_age.
            .saturating_add(Duration::from_millis(1));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The order targets are tried in, from what their last attempts said.
#[derive(Default)]
struct Turns {
    /// Targets that failed their last attempt for a reason of their own (not the token's rate
    /// limit): queued behind the others, so a slow broken account never holds a connection slot
    /// a healthy one is waiting for.
    failing: HashSet<Target>,
    /// When each target was last fetched successfully: the oldest go first, so that a fleet the
    /// provider's rate limit does not let through in one run is refreshed in turn.
    fetched: FewMap<Target, Instant>,
}

impl Turns {
    /// `targets` in the order to try them: healthy before failing, each group oldest data
    /// first (never fetched first of all), then in the order given.
    fn order(&self, targets: &mut [Target]) {
        targets.sort_by_key(|t| (self.failing.contains(t), self.fetched.get(t).copied()));
    }

    /// Learns from a run's results; returns the longest any target the token's limit kept
    /// from this run has gone since its last success (`None` if none waits): how long the
    /// fleet actually takes to come round, whatever the pace says it should.
    fn learn<T>(
        &mut self,
        results: &[(Target, Result<T, UpstreamError>)],
        now: Instant,
    ) -> Option<Duration> {
        let mut waited: Option<Duration> = None;
        for (target, result) in results {
            match result {
                Ok(_) => {
                    self.failing.remove(target);
                    self.fetched.insert(target.clone(), now);
                }
                // Not tried, or refused by the token's limit: the target itself is fine. One
                // refused on its own is failing as any other.
                Err(e) if e.deferred || (e.reason == FailureReason::RateLimited && !e.own) => {
                    self.failing.remove(target);
                    if let Some(at) = self.fetched.get(target) {
                        let w = now.saturating_duration_since(*at);
                        waited = Some(waited.map_or(w, |m| m.max(w)));
                    }
                }
                Err(_) => {
                    self.failing.insert(target.clone());
                }
            }
        }
        waited
    }

    fn retain(&mut self, known: &FewSet<Target>) {
        self.failing.retain(|t| known.contains(t));
        self.fetched.retain(|t, _| known.contains(t));
    }
}

/// What the collector asks of its tenant's pacer, withdrawn when the collector stops or moves
/// to another pacer (a reload that changed the token).
struct DemandOf {
    pacer: Option<Pacer>,
    name: CollectorName,
}

impl DemandOf {
    fn set(&mut self, work: &Work, targets: usize) {
        let pacer = work.ctx.client.pacer();
        if let Some(old) = &self.pacer
            && !old.same(pacer)
        {
            old.set_demand(self.name.as_str(), None);
        }
        let calls = (targets as u64).saturating_mul(work.spec.calls_per_target());
        pacer.set_demand(
            self.name.as_str(),
            Some(Demand {
                calls,
                interval: work.spec.schedule.interval,
                endpoints: self.name.endpoints(),
            }),
        );
        self.pacer = Some(pacer.clone());
    }
}

impl Drop for DemandOf {
    fn drop(&mut self) {
        if let Some(p) = &self.pacer {
            p.set_demand(self.name.as_str(), None);
        }
    }
}

/// The shortest wait between two catch-up runs that got nothing done, so that a token the
/// provider keeps pausing never makes the collector spin.
const MIN_CATCH_UP_GAP: Duration = Duration::from_secs(1);

/// `fetched` (wall-clock times) as instants of this process's clock; one in the future (a
/// clock set back) counts as now.
fn seen_at(fetched: Vec<(Target, Timestamp)>) -> FewMap<Target, Instant> {
    let (now, wall) = (Instant::now(), Timestamp::now());
    fetched
        .into_iter()
        .map(|(t, at)| {
            let age = wall.duration_since(at).try_into().unwrap_or(Duration::ZERO);
            (t, now.checked_sub(age).unwrap_or(now))
        })
        .collect()
}

/// What a collector's task starts from. Boxed into the task: a future keeps its arguments for
/// as long as it lives, and these are moved into the loop at once.
struct Start {
    plan: signal::Receiver<Plan>,
    publisher: Publisher,
    stop: CancellationToken,
    /// Targets restored from the storage directory, and when they were fetched.
    fetched: FewMap<Target, Instant>,
    places: Arc<Semaphore>,
}

impl Start {
    /// Waits for the first run's place, then makes the loop: its first tick, the plan it reads
    /// and its room all come when it can go (see [`RUNS_AT_ONCE`]). `None`: stopped first.
    async fn begin(self: Box<Self>) -> Option<(Loop, Option<OwnedSemaphorePermit>)> {
        let Start {
            plan,
            publisher,
            stop,
            fetched,
            places,
        } = *self;
        let first = tokio::select! {
            _ = stop.cancelled() => return None,
            place = places.clone().acquire_owned() => place.ok(),
        };
        let mut collector = Loop::new(plan, publisher, stop, places);
        collector.turns.fetched = fetched;
        Some((collector, first))
    }
}

/// A collector's task: its loop, started again after a back-off when it panics (see
/// [`restart`]), from what the store holds of its targets; its panics counted in the store.
/// What it keeps beside the loop is what a fresh loop is made of: 192 bytes a collector (this
/// build; see `an_idle_collector_task_stays_small`).
fn supervise(start: Box<Start>, store: Arc<Store>) -> impl Future<Output = ()> + Send {
    let seed = Seed {
        plan: start.plan.clone(),
        publisher: start.publisher.clone(),
        stop: start.stop.clone(),
        places: start.places.clone(),
        store,
    };
    let mut first = Some(start);
    async move {
        restart::restarting(
            &seed.stop,
            || seed.plan.borrow().spec.schedule.interval,
            || run_collector(first.take().unwrap_or_else(|| seed.fresh())),
            |wait| seed.panicked(wait),
        )
        .await;
    }
}

/// What a collector's loop is made of again after a panic.
struct Seed {
    plan: signal::Receiver<Plan>,
    publisher: Publisher,
    stop: CancellationToken,
    places: Arc<Semaphore>,
    store: Arc<Store>,
}

impl Seed {
    /// A fresh loop's start: the plan as it is now, seen (not a reload to answer with a run of
    /// every target at once), and when each target was last fetched, as the store holds it.
    fn fresh(&self) -> Box<Start> {
        let mut plan = self.plan.clone();
        let key = plan.borrow_and_update().spec.key();
        Box::new(Start {
            plan,
            publisher: self.publisher.clone(),
            stop: self.stop.clone(),
            fetched: seen_at(self.store.last_fetched(&key)),
            places: self.places.clone(),
        })
    }

    /// The loop panicked (the panic hook has logged where): says so, and counts it.
    async fn panicked(&self, wait: Duration) {
        let key = self.plan.borrow().spec.key();
        tracing::error!(
            tenant = key.1.as_str(),
            collector = key.0.as_str(),
            restart_in = %humantime::format_duration(wait),
            "the collector's loop panicked; it is started again after a back-off, its targets keep their values until max_age meanwhile"
        );
        let store = self.store.clone();
        off_the_workers(move || store.restarted(&key)).await;
    }
}

/// A collector's loop. Ten thousand tenants keep ten thousand of them between runs, so what one
/// holds then is kept small: its loop and what it waits for ([`Loop::next_run`]); a run under
/// way is boxed, and the plan travels as a pointer (see `the_idle_collector_task_stays_small`).
async fn run_collector(start: Box<Start>) {
    let Some((mut collector, first)) = start.begin().await else {
        return;
    };
    let mut first = Some(first);
    while let Some((p, targets, urgent)) = collector.next_run().await {
        let place = match first.take() {
            Some(place) => place,
            None if urgent => None,
            None => tokio::select! {
                _ = collector.stop.cancelled() => return,
                place = collector.places.clone().acquire_owned() => place.ok(),
            },
        };
        // Boxed: a collector between runs, ten thousand of them with as many tenants, keeps
        // only its loop (about 2 KiB less each), not the room of a run under way.
        if Box::pin(collector.run(p, targets, urgent)).await.is_none() {
            return;
        }
        // The run ended: its place goes to the next collector waiting.
        drop(place);
    }
}

/// One collector's loop and what it keeps from one run to the next.
struct Loop {
    plan: signal::Receiver<Plan>,
    publisher: Publisher,
    stop: CancellationToken,
    /// Places for runs ([`RUNS_AT_ONCE`]).
    places: Arc<Semaphore>,
    ticker: tokio::time::Interval,
    turns: Turns,
    /// The targets polled now: a reload or a probe fetches at once only those not among them.
    known: FewSet<Target>,
    probed: Option<Registered>,
    demand: DemandOf,
    /// Targets the last run did not fetch because of the token's rate limit (deferred, or left
    /// without a turn after a 429): fetched by a catch-up run as soon as the pacer can take
    /// them, not at the next tick, so that a fleet larger than the rate allows per interval
    /// uses all of it.
    backlog: Vec<Target>,
    /// When a catch-up run may take the backlog (at once without one). Boxed, and made only
    /// when there is a backlog: a timer inline would be carried by every idle collector.
    catch_up_at: Option<Pin<Box<tokio::time::Sleep>>>,
    warnings: Warnings,
    first_run: bool,
}

impl Loop {
    fn new(
        plan: signal::Receiver<Plan>,
        publisher: Publisher,
        stop: CancellationToken,
        places: Arc<Semaphore>,
    ) -> Loop {
        let interval = plan.borrow().spec.schedule.interval;
        let mut ticker = tokio::time::interval(interval);
        // A run that overran (it cannot: the deadline is shorter) would not cause a burst.
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let probed = plan.borrow().poll_set.as_ref().map(|p| p.subscribe());
        let demand = DemandOf {
            pacer: None,
            name: plan.borrow().spec.name,
        };
        Loop {
            plan,
            publisher,
            stop,
            places,
            ticker,
            turns: Turns::default(),
            known: FewSet::default(),
            probed,
            demand,
            backlog: Vec::new(),
            catch_up_at: None,
            warnings: Warnings::default(),
            first_run: true,
        }
    }

    /// Waits for what starts the next run, and says which targets it fetches and whether they
    /// go first: every target at the tick, the targets a reload or a probe added at once, the
    /// backlog when the pacer can take it. `None`: the collector stops.
    async fn next_run(&mut self) -> Option<(Plan, Vec<Target>, bool)> {
        loop {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return None,
                _ = self.ticker.tick() => {
                    let p = self.plan.borrow_and_update().clone();
                    let targets = p.targets(Instant::now());
                    self.known = targets.iter().cloned().collect();
                    self.turns.retain(&self.known);
                    self.demand.set(&p, targets.len());
                    self.backlog.clear();
                    return Some((p, targets, false));
                }
                changed = self.plan.changed() => {
                    changed.ok()?;
                    // A reload: only the targets it added are fetched now; the rest keep their
                    // turn.
                    let p = self.plan.borrow_and_update().clone();
                    self.probed = p.poll_set.as_ref().map(|p| p.subscribe());
                    let targets = p.targets(Instant::now());
                    self.demand.set(&p, targets.len());
                    let added: Vec<Target> = targets
                        .iter()
                        .filter(|t| !self.known.contains(t))
                        .cloned()
                        .collect();
                    self.known = targets.into_iter().collect();
                    self.turns.retain(&self.known);
                    let known = &self.known;
                    self.backlog.retain(|t| known.contains(t));
                    if !added.is_empty() {
                        return Some((p, added, true));
                    }
                }
                () = registered(&mut self.probed) => {
                    // A probe registered an account, or discovery found a target: fetch it now,
                    // so that a probe waiting for it is answered within its scrape timeout.
                    let p = self.plan.borrow().clone();
                    let targets = p.targets(Instant::now());
                    self.demand.set(&p, targets.len());
                    let added = newly_polled(&mut self.known, targets);
                    if !added.is_empty() {
                        return Some((p, added, true));
                    }
                }
                () = catch_up(&mut self.catch_up_at), if !self.backlog.is_empty() => {
                    let p = self.plan.borrow().clone();
                    return Some((p, std::mem::take(&mut self.backlog), false));
                }
            }
        }
    }

    /// One run of `targets`: fetched in turn, handed to the publisher in parts as they come,
    /// learned from, and its end handed to the publisher. `None`: the collector stops (what a
    /// run cut short has not handed over is dropped, and its end never comes).
    async fn run(&mut self, p: Plan, mut targets: Vec<Target>, urgent: bool) -> Option<()> {
        if self.first_run {
            // A restart costs no call that restored values do not need: a target an earlier
            // process fetched less than an interval ago waits for the next tick, as it would
            // have without the restart.
            let fresh = Instant::now().checked_sub(p.spec.schedule.interval);
            targets.retain(|t| {
                let fetched = self.turns.fetched.get(t);
                fresh.is_none_or(|fresh| fetched.is_none_or(|at| *at <= fresh))
            });
        }
        self.turns.order(&mut targets);
        // The first run's values are what readiness waits for: published as first fetches are.
        let first = std::mem::replace(&mut self.first_run, false);
        let publish_soon = urgent || first;
        let started = Instant::now();
        let under_way = self.publisher.begin();
        let mut parts = Parts::new(self.publisher.clone(), self.plan.clone(), first);
        let results = self.fetch(&p, targets, urgent, &mut parts).await?;
        log_run(&p.spec, &results, started);
        let waited = self.turns.learn(&results, Instant::now());
        p.learn(&results);
        if p.spec.failure_log == TargetFailureLog::Summary {
            self.warnings
                .say(&p.spec, summarize_failures(&results), Instant::now());
        }
        let pacer = p.ctx.client.pacer();
        self.schedule_catch_up(pacer, &results);
        // The latest plan decides which targets are still configured (or probed).
        let mut latest = self.plan.borrow().polled(Instant::now());
        latest.keep_for = keep_for(&latest, pacer.refresh_intervals(), waited);
        #[cfg(test)]
        tests::hand_over_hook(&latest);
        self.publisher
            .hand_over(
                Finished {
                    spec: latest,
                    results: parts.rest(results),
                    duration: started.elapsed(),
                    urgent: publish_soon,
                },
                under_way,
            )
            .await;
        Some(())
    }

    /// Fetches `targets`, handing what lands to the publisher in `parts` as it goes, and beside
    /// them any target a probe adds while they are fetched. `None` when the collector stops
    /// first.
    async fn fetch(
        &mut self,
        p: &Plan,
        targets: Vec<Target>,
        urgent: bool,
        parts: &mut Parts,
    ) -> Option<Vec<Landed>> {
        let ctx = if urgent {
            Context {
                client: p.ctx.client.urgent(),
                ..p.ctx.clone()
            }
        } else {
            p.ctx.clone()
        };
        let run = run_targets(&ctx, &p.spec, targets, &self.turns.fetched, Some(parts));
        tokio::pin!(run);
        loop {
            tokio::select! {
                // What a run cut short by shutdown has not handed over is dropped, and its end
                // never comes: the run's own series never speak of a run half done.
                _ = self.stop.cancelled() => return None,
                r = &mut run => return Some(r),
                () = registered(&mut self.probed) => {
                    // Added while a long run is under way (a first probe waiting within its
                    // scrape timeout): fetched now, beside the run, not after it.
                    let targets = self.plan.borrow().targets(Instant::now());
                    let added = newly_polled(&mut self.known, targets);
                    if !added.is_empty() {
                        side_run(
                            p,
                            added,
                            self.plan.clone(),
                            self.publisher.clone(),
                            self.stop.clone(),
                        );
                    }
                }
            }
        }
    }

    /// Puts the targets the token's rate limit kept from this run (deferred, or left without a
    /// turn after a 429) and those an endpoint's outage kept from being called in the backlog,
    /// and says when a catch-up run may take them (when a pause ends, or at the outage's next
    /// probe).
    fn schedule_catch_up(&mut self, pacer: &Pacer, results: &[Landed]) {
        let deferred: Vec<Target> = results
            .iter()
            .filter(|(_, r)| r.as_ref().is_err_and(|e| e.deferred))
            .map(|(t, _)| t.clone())
            .collect();
        // A catch-up that got nothing done waits a little before the next, whatever the pacer
        // says: the provider may keep extending its pause.
        let progressed = deferred.len() < results.len();
        // An endpoint in an outage is asked again at its next probe: a catch-up run then has
        // its calls waiting for it, so that values come back as soon as the provider does.
        let resumes = match (pacer.resumes_at(), pacer.next_probe_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut catch_up_at = resumes.map(|at| {
            if progressed {
                at
            } else {
                at.max(tokio::time::Instant::now() + MIN_CATCH_UP_GAP)
            }
        });
        if !progressed {
            catch_up_at.get_or_insert(tokio::time::Instant::now() + MIN_CATCH_UP_GAP);
        }
        // Both wait for the token, not for a fault of their own.
        self.backlog.extend(deferred);
        self.backlog.extend(
            results
                .iter()
                .filter(|(_, r)| {
                    r.as_ref().is_err_and(|e| {
                        (!e.deferred && !e.own && e.reason == FailureReason::RateLimited)
                            || e.reason == FailureReason::Outage
                    })
                })
                .map(|(t, _)| t.clone()),
        );
        // Only a backlog is caught up with: without one, no timer is kept.
        self.catch_up_at = catch_up_at
            .filter(|_| !self.backlog.is_empty())
            .map(|at| Box::pin(tokio::time::sleep_until(at)));
    }
}

/// The targets of `targets` not among those polled, now counted as polled.
fn newly_polled(known: &mut FewSet<Target>, targets: Vec<Target>) -> Vec<Target> {
    let added: Vec<Target> = targets.into_iter().filter(|t| !known.contains(t)).collect();
    known.extend(added.iter().cloned());
    added
}

/// The debug lines of a finished run: its figures, and each target that failed (at warn level
/// with `--log.target-failures=target`).
fn log_run<T>(
    spec: &CollectorSpec,
    results: &[(Target, Result<T, UpstreamError>)],
    started: Instant,
) {
    let failed = results
        .iter()
        .filter(|(_, r)| r.as_ref().is_err_and(|e| !e.deferred))
        .count();
    let deferred = results
        .iter()
        .filter(|(_, r)| r.as_ref().is_err_and(|e| e.deferred))
        .count();
    tracing::debug!(
        tenant = spec.tenant.as_str(),
        collector = spec.name.as_str(),
        targets = results.len(),
        failed,
        deferred,
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "collector run finished"
    );
    let loud = spec.failure_log == TargetFailureLog::Target;
    for (target, result) in results {
        if let Err(e) = result
            && !e.deferred
        {
            if loud {
                tracing::warn!(tenant = spec.tenant.as_str(),
                    collector = spec.name.as_str(), target = %target, reason = e.reason.as_str(), detail = %e.detail, "target failed");
            } else {
                tracing::debug!(tenant = spec.tenant.as_str(),
                    collector = spec.name.as_str(), target = %target, reason = e.reason.as_str(), detail = %e.detail, "target failed");
            }
        }
    }
}

/// Waits until a catch-up run may start (at once without an instant).
async fn catch_up(at: &mut Option<Pin<Box<tokio::time::Sleep>>>) {
    if let Some(at) = at {
        at.as_mut().await;
    }
}

/// How long values are kept while targets wait for their turn, however short `max_age` is; at
/// most [`crate::config::limits::MAX_AGE`]. While the tenant's fleet does not fit its rate limit
/// each target is refreshed every `intervals` intervals, oldest first, so its values must
/// outlive that (plus one interval for a run's own length). And the fleet may come round slower
/// than the pace promises (a pace that swings around the limit, runs cut by their deadline, a
/// starved CPU): a target the token kept from this run, `waited` since its last success, goes
/// first in the next runs, so its values outlive two more intervals.
fn keep_for(
    spec: &CollectorSpec,
    intervals: Option<u64>,
    waited: Option<Duration>,
) -> Option<Duration> {
    let interval = spec.schedule.interval;
    let promised = intervals.map(|k| {
        let k = u32::try_from(k).unwrap_or(u32::MAX).saturating_add(1);
        interval.saturating_mul(k)
    });
    let measured = waited.map(|w| w.saturating_add(interval.saturating_mul(2)));
    let longer = promised
        .into_iter()
        .chain(measured)
        .max()?
        .min(crate::config::limits::MAX_AGE);
    (longer > spec.schedule.max_age).then_some(longer)
}

/// Fetches `targets` of `work` on their own and applies them, unless `stop` comes first: the
/// targets a probe or discovery added while the collector's run is under way.
fn side_run(
    work: &Work,
    targets: Vec<Target>,
    plan: signal::Receiver<Plan>,
    publisher: Publisher,
    stop: CancellationToken,
) {
    let work = work.clone();
    let under_way = publisher.begin();
    tokio::spawn(async move {
        let started = Instant::now();
        // First fetches, which a probe may be waiting for: before the run's queue.
        let ctx = Context {
            client: work.ctx.client.urgent(),
            ..work.ctx.clone()
        };
        let none = FewMap::default();
        let results = tokio::select! {
            _ = stop.cancelled() => return,
            r = run_targets(&ctx, &work.spec, targets, &none, None) => r,
        };
        work.learn(&results);
        let latest = plan.borrow().polled(Instant::now());
        publisher
            .hand_over(
                Finished {
                    spec: latest,
                    results: unhanded(results),
                    duration: started.elapsed(),
                    urgent: true,
                },
                under_way,
            )
            .await;
    });
}

/// Waits until a target is added to the poll set (never, for a collector without one).
async fn registered(probed: &mut Option<Registered>) {
    match probed {
        Some(rx) => rx.added().await,
        None => std::future::pending::<()>().await,
    }
}

/// Target tasks a run keeps in flight at least; see [`run_targets`].
const MIN_TASK_WINDOW: usize = 1024;

/// How often a run under way hands what it has fetched to the publisher (see [`Parts`]), once
/// its targets have values: a refresh's values are a second late at most. A large fleet is not
/// rendered more often for it: the publisher rests ten renderings between publications (at most
/// 5 s), and a run hands its next part only once the last is published, so its parts grow
/// rather than multiply.
pub const HANDOFF_EVERY: Duration = Duration::from_secs(1);

/// The same in a collector's first run, whose targets have no values yet (a first start, or a
/// restart without storage). The goal for a first start (accounts shown 10 s after the
/// start within 1.2 times what the provider's pace allowed by then) leaves the pacer's cold
/// start and the handoff 1.7 s together; the cold start takes about 1.5 s of it, so a value
/// goes to the publisher within a quarter of a second of its fetch. A small fleet's rendering
/// takes milliseconds; a large one's still sets the publisher's rest, as above.
pub const FIRST_HANDOFF_EVERY: Duration = Duration::from_millis(250);

/// What a run under way has fetched and not yet handed to the publisher. The results that land
/// are handed over together, as one [`RunPart`], a period (`every`) after the first of them
/// landed, once the run's last part is published (one part of a run at the publisher at a
/// time) and when the publisher's queue has room (else a period later: a run never waits for
/// the publisher halfway). A part holds what landed since the last, nothing more; what is not
/// handed over by the run's end goes with its end.
struct Parts {
    publisher: Publisher,
    /// The collector's latest plan: which targets it polls when a part is handed over.
    plan: signal::Receiver<Plan>,
    /// The results landed since the last part, by their place in the run.
    fresh: Vec<usize>,
    /// Whether each result of the run went with a part.
    handed: Vec<bool>,
    /// When the fresh results are to be handed over.
    due: Option<tokio::time::Instant>,
    /// How long after the first of them: [`HANDOFF_EVERY`], or [`FIRST_HANDOFF_EVERY`].
    every: Duration,
    /// The last part handed over, until it is published.
    last: Option<oneshot::Receiver<()>>,
}

impl Parts {
    /// The parts of a run; `first`: of the collector's first run.
    fn new(publisher: Publisher, plan: signal::Receiver<Plan>, first: bool) -> Parts {
        let every = if first {
            FIRST_HANDOFF_EVERY
        } else {
            HANDOFF_EVERY
        };
        Parts {
            publisher,
            plan,
            fresh: Vec::new(),
            handed: Vec::new(),
            due: None,
            every,
            last: None,
        }
    }

    /// The result at `i` of a run of `count` targets landed.
    fn landed(&mut self, i: usize, count: usize) {
        if self.handed.len() != count {
            self.handed = vec![false; count];
        }
        if self.fresh.is_empty() {
            self.due = Some(tokio::time::Instant::now() + self.every);
        }
        self.fresh.push(i);
    }

    /// Waits until the fresh results are to be handed over: never while there are none.
    async fn due(&mut self) {
        let Some(due) = self.due else {
            return std::future::pending().await;
        };
        if let Some(last) = &mut self.last {
            // Published, or the publisher stopped: either way the last part is gone.
            let _ = last.await;
            self.last = None;
        }
        tokio::time::sleep_until(due).await;
    }

    /// Hands the fresh results of the run of `jobs` over as one part, in the run's order, if the
    /// publisher's queue has room for it; else tries again a period later.
    fn hand_over(&mut self, jobs: &[Job], results: &mut [Option<Result<Held, UpstreamError>>]) {
        self.fresh.sort_unstable();
        let (fresh, plan) = (&self.fresh, &self.plan);
        // Called only when the publisher has room for the part: the data moves to it, and the
        // run keeps the outcome (and, of a failure, a copy) to learn from at its end.
        let part = || {
            let latest = plan.borrow();
            let now = Instant::now();
            let results = fresh
                .iter()
                .filter_map(|&i| {
                    let result = match results[i].as_mut()? {
                        Ok(held) => match std::mem::replace(held, Held::Handed) {
                            Held::Here(data) => {
                                latest.discover(&data, now);
                                Ok(*data)
                            }
                            Held::Handed => return None,
                        },
                        Err(e) => Err(e.clone()),
                    };
                    Some((jobs[i].target.clone(), result))
                })
                .collect();
            RunPart {
                spec: latest.polled(now),
                results,
            }
        };
        match self.publisher.try_hand_part(part) {
            Some(published) => {
                for &i in &self.fresh {
                    self.handed[i] = true;
                }
                self.fresh.clear();
                self.due = None;
                self.last = Some(published);
            }
            None => self.due = Some(tokio::time::Instant::now() + self.every),
        }
    }

    /// The results of the run (all of them, in the run's order) that no part took, with their
    /// data: what goes with its end.
    fn rest(&self, results: Vec<Landed>) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
        if !self.handed.contains(&true) {
            return unhanded(results);
        }
        unhanded(
            results
                .into_iter()
                .zip(&self.handed)
                .filter(|(_, handed)| !**handed)
                .map(|(r, _)| r)
                .collect(),
        )
    }
}

/// Waits for one target task of a run of `jobs` and files its result; meanwhile hands what the
/// run fetched to the publisher when it is due, if the run does so.
async fn collect_one(
    set: &mut JoinSet<(usize, Result<TargetData, UpstreamError>)>,
    results: &mut [Option<Result<Held, UpstreamError>>],
    spec: &CollectorSpec,
    jobs: &[Job],
    parts: &mut Option<&mut Parts>,
) {
    let joined = loop {
        let Some(parts) = parts.as_deref_mut() else {
            break set.join_next().await;
        };
        tokio::select! {
            joined = set.join_next() => break joined,
            () = parts.due() => parts.hand_over(jobs, results),
        }
    };
    match joined {
        Some(Ok((i, r))) => {
            results[i] = Some(r.map(|data| Held::Here(Box::new(data))));
            if let Some(parts) = parts {
                parts.landed(i, results.len());
            }
        }
        Some(Err(e)) => {
            tracing::error!(collector = spec.name.as_str(), error = %e, "collector task panicked")
        }
        None => {}
    }
}

/// The warn lines of a collector: one per failure reason per interval, however many runs it
/// makes (first fetches of probed accounts, catch-ups, reloads), so that strangers probing
/// made-up ids cannot fill the log; the failures of the runs not logged are counted into the
/// next line of their reason.
#[derive(Default)]
struct Warnings {
    /// Per reason: when its last line was written, and failures since that were not.
    last: HashMap<FailureReason, (Instant, usize)>,
}

impl Warnings {
    fn say(&mut self, spec: &CollectorSpec, failures: Vec<Failures>, now: Instant) {
        for failure in failures {
            let entry = self.last.entry(failure.reason);
            let held_back = match entry {
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let (at, held) = e.get_mut();
                    if now.saturating_duration_since(*at) < spec.schedule.interval {
                        *held += failure.count;
                        continue;
                    }
                    let held_back = *held;
                    *e.get_mut() = (now, 0);
                    held_back
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert((now, 0));
                    0
                }
            };
            tracing::warn!(
                tenant = spec.tenant.as_str(),
                collector = spec.name.as_str(),
                reason = failure.reason.as_str(),
                failed = failure.count,
                targets = %failure.examples,
                detail = %failure.detail,
                also_failed_since_the_last_line = held_back,
                "targets failed"
            );
        }
    }
}

/// Targets named in a run's warning for one reason, at most; debug level names every one.
const MAX_NAMED_TARGETS: usize = 5;

/// One warning line of a run: the targets that failed for one reason.
#[derive(Debug, PartialEq)]
struct Failures {
    reason: FailureReason,
    count: usize,
    /// The first few targets, and how many more.
    examples: String,
    /// The first target's detail: the others of a reason usually say the same.
    detail: String,
}

/// A run's failures, one entry per reason in the order the reasons first occurred: a run over
/// a hundred thousand accounts that all time out logs one line, not a hundred thousand.
fn summarize_failures<T>(results: &[(Target, Result<T, UpstreamError>)]) -> Vec<Failures> {
    let mut out: Vec<(Failures, Vec<String>)> = Vec::new();
    for (target, result) in results {
        // A deferred target did not fail: the pacer tells once when the fleet does not fit.
        let Err(e) = result else { continue };
        if e.deferred {
            continue;
        }
        let i = match out.iter().position(|(f, _)| f.reason == e.reason) {
            Some(i) => i,
            None => {
                out.push((
                    Failures {
                        reason: e.reason,
                        count: 0,
                        examples: String::new(),
                        detail: e.detail.clone(),
                    },
                    Vec::new(),
                ));
                out.len() - 1
            }
        };
        let (failures, named) = &mut out[i];
        failures.count += 1;
        if named.len() < MAX_NAMED_TARGETS {
            named.push(target.to_string());
        }
    }
    out.into_iter()
        .map(|(mut f, named)| {
            let more = f.count - named.len();
            f.examples = named.join(", ");
            if more > 0 {
                f.examples.push_str(&format!(" and {more} more"));
            }
            f
        })
        .collect()
}

/// One run of every configured target; see [`run_targets`].
pub async fn run_once(
    ctx: &Context,
    spec: &CollectorSpec,
) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
    unhanded(run_targets(ctx, spec, spec.targets.clone(), &FewMap::default(), None).await)
}

/// One run: targets concurrently, started in the order given and at most
/// [`MIN_TASK_WINDOW`] (or four times the client's concurrency, if more) at a time (the client
/// bounds requests in flight), each cut at the collector's deadline. Every target gets a result,
/// `timeout` for one that did not finish in time; with `parts`, what lands is also handed to the
/// publisher as the run goes.
async fn run_targets(
    ctx: &Context,
    spec: &CollectorSpec,
    targets: Vec<Target>,
    fetched: &FewMap<Target, Instant>,
    mut parts: Option<&mut Parts>,
) -> Vec<Landed> {
    let deadline = spec.schedule.deadline;
    let now = tokio::time::Instant::now();
    // The config bounds the deadline; saturate anyway rather than panic.
    let until = crate::upstream::instant_after(now, deadline);
    let ctx = Context {
        client: ctx.client.until(until).holding(spec.schedule.max_age),
        clock: ctx.clock.clone(),
    };
    let jobs = spec.jobs_for(&targets);
    let window = task_window(&ctx);
    let mut set = JoinSet::new();
    let mut results: Vec<Option<Result<Held, UpstreamError>>> =
        std::iter::repeat_with(|| None).take(jobs.len()).collect();
    for (i, job) in jobs.iter().enumerate() {
        if set.len() >= window {
            collect_one(&mut set, &mut results, spec, &jobs, &mut parts).await;
        }
        // The token's calls wait oldest data first, across the tenant's collectors.
        let rank = fetched
            .get(&job.target)
            .map(|at| tokio::time::Instant::from_std(*at));
        // Each poll's steps, kept with its error when it fails: what `/probe?debug=true` prints.
        let trail = Recorder::start(ctx.clock.now());
        let fetch = job.run(Context {
            client: ctx.client.ranked(rank).traced(trail.clone()),
            ..ctx.clone()
        });
        set.spawn(fetch_by_deadline(i, fetch, until, deadline, trail));
    }
    while !set.is_empty() {
        collect_one(&mut set, &mut results, spec, &jobs, &mut parts).await;
    }
    every_target_answered(jobs, results)
}

/// Tasks in flight at once: never one per target (a run over a hundred thousand accounts would
/// hold a hundred thousand pending requests in memory), but far more than the requests the
/// client lets through, because a task keeps its place while it waits to retry: with a small
/// window, a few accounts that never answer would hold every place and starve the healthy ones
/// behind them.
fn task_window(ctx: &Context) -> usize {
    ctx.client
        .concurrency()
        .saturating_mul(4)
        .max(MIN_TASK_WINDOW)
}

/// The task of the `i`th target: its fetch, cut a grace after `until`, with the steps of its
/// poll kept in its error when it fails.
async fn fetch_by_deadline(
    i: usize,
    fetch: Fetch,
    until: tokio::time::Instant,
    deadline: Duration,
    trail: Recorder,
) -> (usize, Result<TargetData, UpstreamError>) {
    // The client stops its calls at the deadline; this only guards against a collector that
    // would keep working after it.
    let result =
        match tokio::time::timeout_at(until.checked_add(DEADLINE_GRACE).unwrap_or(until), fetch)
            .await
        {
            Ok(r) => r,
            Err(_) => Err(UpstreamError::new(
                FailureReason::Timeout,
                format!(
                    "collector deadline of {} reached",
                    humantime::format_duration(deadline)
                ),
            )),
        };
    let result = result.map_err(|e| UpstreamError {
        trail: Some(Arc::new(trail.finish())),
        ..e
    });
    (i, result)
}

/// Each job's target with its result. A target whose task died still gets a result, so it is
/// reported failed, not forgotten.
fn every_target_answered(
    jobs: Vec<Job>,
    results: Vec<Option<Result<Held, UpstreamError>>>,
) -> Vec<Landed> {
    jobs.into_iter()
        .zip(results)
        .map(|(job, r)| {
            (
                job.target,
                r.unwrap_or_else(|| {
                    Err(UpstreamError::new(
                        FailureReason::Decode,
                        "internal error while reading the answer",
                    ))
                }),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::snapshot::CollectorState;
    use crate::metrics::Format;

    /// The work of one Delivery account collector over `ids` against the provider at `url`
    /// (interval 60 s, deadline 30 s), with a client as the exporter builds one.
    fn work_of(url: &str, ids: &[i32]) -> Work {
        let ids: Vec<String> = ids.iter().map(i32::to_string).collect();
        let config = crate::config_file::Config::parse(
            &format!(
                "api:\n  base_url: {url}\n  timeout: 20s\ncollectors:\n  delivery_account:\n    interval: 60s\n    deadline: 30s\n    accounts: [{}]\n",
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
            nothing.clone(),
        );
        let client = crate::upstream::Client::new(
            &api,
            tenant.name.clone(),
            nothing,
            Arc::new(crate::upstream::breaker::Breakers::new(api.breaker)),
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

    /// Serves `sim` on a free loopback port until `shutdown` is cancelled; returns its URL.
    async fn serve(sim: &mailhost_sim::Simulator, shutdown: &CancellationToken) -> String {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(sim.clone().serve(listener, shutdown.clone()));
        url
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
    async fn a_run_hands_over_what_landed_a_second_later_one_part_at_a_time_and_its_end_the_rest() {
        use crate::collectors::delivery_account::fixtures::remaining;
        // Nothing is called: the results are made here.
        let work = work_of("http://127.0.0.1:9", &[1, 2, 3]);
        let store = Store::new(std::slice::from_ref(&work.spec));
        let shutdown = CancellationToken::new();
        let (publisher, task) = Publisher::start(store.clone(), shutdown.clone());
        let (_plan, plan) = signal::channel(Arc::new(work.clone()));
        let mut parts = Parts::new(publisher.clone(), plan.clone(), false);
        let jobs = work.spec.jobs_for(&work.spec.targets);
        let mut results: Vec<Option<Result<Held, UpstreamError>>> = vec![None, None, None];
        let shown = |store: &Store, id: i32| {
            store
                .prepared()
                .snapshot
                .collectors
                .values()
                .any(|c| c.target(&Target::DeliveryAccount(id)).is_some())
        };

        let here = |results: &[Option<Result<Held, UpstreamError>>]| -> Vec<bool> {
            results
                .iter()
                .map(|r| matches!(r, Some(Ok(Held::Here(_)))))
                .collect()
        };
        results[0] = Some(Ok(Held::Here(Box::new(remaining(5.0)))));
        parts.landed(0, 3);
        let landed = tokio::time::Instant::now();
        parts.due().await;
        assert_eq!(landed.elapsed(), HANDOFF_EVERY);
        parts.hand_over(&jobs, &mut results);
        assert!(parts.fresh.is_empty() && parts.last.is_some());
        assert_eq!(parts.handed, [true, false, false]);
        assert!(
            matches!(results[0], Some(Ok(Held::Handed))),
            "the data went with the part: the run keeps no copy"
        );
        // The next part waits for the last to be published, and for its own second.
        results[1] = Some(Ok(Held::Here(Box::new(remaining(6.0)))));
        parts.landed(1, 3);
        let landed = tokio::time::Instant::now();
        parts.due().await;
        assert!(landed.elapsed() >= HANDOFF_EVERY);
        assert!(parts.last.is_none() && shown(&store, 1) && !shown(&store, 2));
        assert!(
            store
                .prepared()
                .snapshot
                .collectors
                .values()
                .all(|c| c.last_run.is_none()),
            "a part is not a run's end"
        );
        // A publisher that takes nothing (stopped, as with a full queue): the results stay with
        // the run, tried again a period later, and go with its end.
        shutdown.cancel();
        task.await.unwrap();
        parts.hand_over(&jobs, &mut results);
        assert_eq!(parts.fresh, [1]);
        assert_eq!(
            here(&results),
            [false, true, false],
            "a part not taken leaves its data with the run"
        );
        assert_eq!(parts.handed, [true, false, false]);
        assert_eq!(parts.due, Some(tokio::time::Instant::now() + HANDOFF_EVERY));
        results[2] = Some(Ok(Held::Here(Box::new(remaining(7.0)))));
        let all = every_target_answered(jobs, results);
        let rest: Vec<Target> = parts.rest(all).into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            rest,
            [Target::DeliveryAccount(2), Target::DeliveryAccount(3)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_first_run_hands_over_what_landed_a_quarter_second_later_a_later_run_a_second() {
        use crate::collectors::delivery_account::fixtures::remaining;
        let work = work_of("http://127.0.0.1:9", &[1, 2]);
        let store = Store::new(std::slice::from_ref(&work.spec));
        let shutdown = CancellationToken::new();
        let (publisher, task) = Publisher::start(store.clone(), shutdown.clone());
        let (_plan, plan) = signal::channel(Arc::new(work.clone()));
        let jobs = work.spec.jobs_for(&work.spec.targets);
        for (first, every) in [(true, FIRST_HANDOFF_EVERY), (false, HANDOFF_EVERY)] {
            let mut parts = Parts::new(publisher.clone(), plan.clone(), first);
            let mut results: Vec<Option<Result<Held, UpstreamError>>> = vec![None, None];
            results[0] = Some(Ok(Held::Here(Box::new(remaining(5.0)))));
            parts.landed(0, 2);
            let landed = tokio::time::Instant::now();
            parts.due().await;
            assert_eq!(landed.elapsed(), every, "first run: {first}");
            parts.hand_over(&jobs, &mut results);
            assert_eq!(parts.handed, [true, false]);
        }
        assert!(FIRST_HANDOFF_EVERY < HANDOFF_EVERY);
        shutdown.cancel();
        task.await.unwrap();
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
        use mailhost_sim::{AccountSeed, ManagementToken, SimConfig, Simulator};
        let sim = Simulator::new(SimConfig {
            management_tokens: vec![ManagementToken {
                token: "poller-token".to_owned(),
                accounts: Some(vec![1, 2, 3, 4]),
            }],
            accounts: (1..=4).map(AccountSeed::with_id).collect(),
            ..SimConfig::default()
        });
        let shutdown = CancellationToken::new();
        let url = serve(&sim, &shutdown).await;
        // Two tenants polled every second; the loop of the first panics at its first hand-over.
        let (panics, steady) = ("restart-panics", "restart-steady");
        let work: Vec<Work> = [(panics, [1, 2]), (steady, [3, 4])]
            .into_iter()
            .map(|(tenant, ids)| {
                let mut w = work_of(&url, &ids);
                w.spec.tenant = crate::tenant::TenantName::parse(tenant).unwrap();
                w.spec.schedule.interval = Duration::from_secs(1);
                w.spec.schedule.deadline = Duration::from_millis(800);
                w
            })
            .collect();
        PANIC_AT_HAND_OVER.lock().unwrap().push(panics.to_owned());
        let specs: Vec<CollectorSpec> = work.iter().map(|w| w.spec.clone()).collect();
        let store = Store::new(&specs);
        let work = work.into_iter().map(Arc::new).collect();
        let poller = Poller::start(work, store.clone(), shutdown.clone());
        let mut publications = store.subscribe();
        let state = |tenant: &str| -> CollectorState {
            let prepared = store.prepared();
            let state = prepared
                .snapshot
                .collectors
                .values()
                .find(|c| c.tenant.as_str() == tenant)
                .unwrap();
            (**state).clone()
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
        let body = String::from_utf8(store.prepared().body(Format::Classic).to_vec()).unwrap();
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

    /// The published state of the one collector.
    fn published(store: &Store) -> CollectorState {
        let prepared = store.prepared();
        let state = prepared.snapshot.collectors.values().next().unwrap();
        (**state).clone()
    }

    #[tokio::test]
    async fn a_run_under_way_publishes_what_it_has_fetched_and_its_end_when_it_ends() {
        use mailhost_sim::{AccountSeed, FaultSpec, ManagementToken, Route, SimConfig, Simulator};
        let ids: Vec<i32> = (1..=20).collect();
        let sim = Simulator::new(SimConfig {
            management_tokens: vec![ManagementToken {
                token: "poller-token".to_owned(),
                accounts: Some(ids.clone()),
            }],
            accounts: ids.iter().copied().map(AccountSeed::with_id).collect(),
            ..SimConfig::default()
        });
        // Account 20 answers after 6 s: the run is under way until then.
        let slow = Duration::from_secs(6);
        sim.set_fault(
            Route::DeliveryAccountGet,
            FaultSpec {
                latency: Some(slow),
                only_ids: Some(vec!["20".to_owned()]),
                ..FaultSpec::default()
            },
        );
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
        let body = String::from_utf8(store.prepared().body(Format::Classic).to_vec()).unwrap();
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
        use mailhost_sim::{AccountSeed, FaultSpec, ManagementToken, Route, SimConfig, Simulator};
        let sim = Simulator::new(SimConfig {
            management_tokens: vec![ManagementToken {
                token: "poller-token".to_owned(),
                accounts: Some(vec![1, 2]),
            }],
            accounts: [1, 2].into_iter().map(AccountSeed::with_id).collect(),
            ..SimConfig::default()
        });
        // Each account answers after 2 s: each tenant's first run is under way that long.
        sim.set_fault(
            Route::DeliveryAccountGet,
            FaultSpec {
                latency: Some(Duration::from_secs(2)),
                ..FaultSpec::default()
            },
        );
        let shutdown = CancellationToken::new();
        let url = serve(&sim, &shutdown).await;
        // Two tenants of one account each, and one place for first runs.
        let work: Vec<Work> = [("a", 1), ("b", 2)]
            .into_iter()
            .map(|(tenant, id)| {
                let mut w = work_of(&url, &[id]);
                w.spec.tenant = crate::tenant::TenantName::parse(tenant).unwrap();
                w
            })
            .collect();
        let specs: Vec<CollectorSpec> = work.iter().map(|w| w.spec.clone()).collect();
        let store = Store::new(&specs);
        let started = Instant::now();
        let work = work.into_iter().map(Arc::new).collect();
        let poller = Poller::with_places(work, store.clone(), shutdown.clone(), 1);
        let mut publications = store.subscribe();
        let runs = |store: &Store| -> Vec<CollectorState> {
            let prepared = store.prepared();
            let mut runs: Vec<CollectorState> = prepared
                .snapshot
                .collectors
                .values()
                .filter(|c| c.last_run.is_some())
                .map(|c| (**c).clone())
                .collect();
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
    fn a_target_the_token_keeps_waiting_keeps_its_values_as_long_as_the_fleet_takes_to_come_round()
    {
        let spec = crate::engine::spec::fixtures::accounts(&[1, 2, 3], Duration::from_secs(2));
        let s = Duration::from_secs;
        // max_age is 6 s: the pace's promise of 3 intervals (+1) is 8 s.
        assert_eq!(keep_for(&spec, Some(3), None), Some(s(8)));
        assert_eq!(keep_for(&spec, None, None), None, "the fleet fits");
        assert_eq!(
            keep_for(&spec, Some(1), None),
            None,
            "4 s is within max_age"
        );
        // The fleet came round slower than promised: a waiting target 9 s old keeps its values
        // two more intervals, whatever the fit said at that instant.
        assert_eq!(keep_for(&spec, Some(3), Some(s(9))), Some(s(13)));
        assert_eq!(keep_for(&spec, None, Some(s(9))), Some(s(13)));
        assert_eq!(
            keep_for(&spec, None, Some(s(1))),
            None,
            "5 s is within max_age"
        );
        assert_eq!(
            keep_for(&spec, Some(u64::MAX), Some(Duration::MAX)),
            Some(crate::config::limits::MAX_AGE)
        );

        let t0 = Instant::now();
        let mut turns = Turns::default();
        let ok = |id| {
            (
                Target::DeliveryAccount(id),
                Ok(crate::collectors::delivery_account::fixtures::remaining(
                    1.0,
                )),
            )
        };
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
}
