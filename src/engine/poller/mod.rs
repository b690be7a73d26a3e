//! The poller: each collector on its own interval (first run at start), never overlapping
//! itself, each run bounded by its deadline, its targets' results handed to the store as they
//! land (the publisher gathers them: [`crate::engine::store::Publisher`]) and its end when it
//! ends; and a timer that expires values at `max_age` whether or not a run finishes.
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
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::collectors::Revealed;
use crate::engine::few::{FewMap, FewSet};
use crate::engine::poll_set::{PollSet, Registered};
use crate::engine::restart;
use crate::engine::signal;
use crate::engine::spec::{
    CollectorKey, CollectorName, CollectorSpec, Context, Target, TargetData,
};
use crate::engine::store::{Finished, Publisher, Store, Tray};
use crate::settings::TargetFailureLog;
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::pacer::{Demand, Pacer};

mod log;
mod run;
#[cfg(test)]
mod tests;

use log::{Warnings, log_run, summarize_failures};
pub use run::run_once;
use run::{Land, run_targets};

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
            let extra = set.targets(self.spec.name, now).into_iter();
            targets.extend(extra.filter(|t| !configured.contains(t)));
        }
        targets
    }

    /// Feeds a run's outcomes to the poll set: what each account's fetch said (a probed
    /// account is confirmed by a success; one the provider refused, 404 or 403, leaves and is
    /// remembered); a view answered 404 leaves. What the data revealed was discovered as it
    /// landed ([`landing`]).
    fn learn(&self, results: &[Outcome]) {
        let Some(set) = &self.poll_set else {
            return;
        };
        let now = Instant::now();
        let (mut ok, mut failed, mut refused) = (Vec::new(), Vec::new(), Vec::new());
        use FailureReason::{Forbidden, NotFound};
        for (target, result) in results {
            match (target.account_id(), result) {
                (Some(id), Ok(_)) => ok.push(id),
                (Some(id), Err(e)) if matches!(e.reason, NotFound | Forbidden) => {
                    refused.push((id, e.reason));
                }
                // Not tried: its first fetch has not ended.
                (Some(_), Err(e)) if e.deferred => {}
                (Some(id), Err(_)) => failed.push(id),
                (None, Err(e)) if e.reason == NotFound => set.forget(target, now),
                (None, _) => {}
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

/// One target's outcome as its run keeps it: its data went on as it landed.
type Outcome = (Target, Result<(), UpstreamError>);

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
            self.stop(&name).await;
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
            self.stop(&key).await;
            self.spawn(w);
        }
    }

    /// Stops the collector `key`, if it runs, and waits until it has.
    async fn stop(&mut self, key: &CollectorKey) {
        if let Some(r) = self.running.remove(key) {
            r.stop.cancel();
            let _ = r.task.await;
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
                        waited = waited.max(Some(now.saturating_duration_since(*at)));
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

    /// One run of `targets`: fetched in turn, each result handed to the publisher as it lands,
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
        let tray = tray_of(&self.publisher, &self.plan, !publish_soon);
        let results = {
            let plan = self.plan.clone();
            self.fetch(&p, targets, urgent, &mut landing(&plan, &tray))
                .await?
        };
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
        let end = end_of(latest, &tray, started, publish_soon);
        self.publisher.hand_over(end, under_way).await;
        Some(())
    }

    /// Fetches `targets`, handing each result to `land` as it lands, and beside them any target
    /// a probe adds while they are fetched. `None` when the collector stops first.
    async fn fetch(
        &mut self,
        p: &Plan,
        targets: Vec<Target>,
        urgent: bool,
        land: &mut Land<'_>,
    ) -> Option<Vec<Outcome>> {
        let ctx = if urgent {
            Context {
                client: p.ctx.client.urgent(),
                ..p.ctx.clone()
            }
        } else {
            p.ctx.clone()
        };
        let run = run_targets(&ctx, &p.spec, targets, &self.turns.fetched, land);
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
    fn schedule_catch_up(&mut self, pacer: &Pacer, results: &[Outcome]) {
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
        let resumes = pacer
            .resumes_at()
            .into_iter()
            .chain(pacer.next_probe_at())
            .min();
        let catch_up_at = if progressed {
            resumes
        } else {
            let gap = Instant::now() + MIN_CATCH_UP_GAP;
            Some(resumes.map_or(gap, |at| at.max(gap)))
        };
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

/// Waits until a catch-up run may start (at once without an instant).
async fn catch_up(at: &mut Option<Pin<Box<tokio::time::Sleep>>>) {
    if let Some(at) = at {
        at.as_mut().await;
    }
}

/// How long values are kept while targets wait for their turn, however short `max_age` is; at
/// most [`crate::settings::limits::MAX_AGE`]. While the tenant's fleet does not fit its rate limit
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
        .min(crate::settings::limits::MAX_AGE);
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
        let tray = tray_of(&publisher, &plan, false);
        let mut land = landing(&plan, &tray);
        let results = tokio::select! {
            _ = stop.cancelled() => return,
            r = run_targets(&ctx, &work.spec, targets, &none, &mut land) => r,
        };
        work.learn(&results);
        let latest = plan.borrow().polled(Instant::now());
        let end = end_of(latest, &tray, started, true);
        publisher.hand_over(end, under_way).await;
    });
}

/// The end of a run begun at `started`, of the collector as `spec` has it: the results its
/// `tray` still holds.
fn end_of(spec: CollectorSpec, tray: &Tray, started: Instant, urgent: bool) -> Finished {
    Finished {
        spec,
        results: tray.rest(),
        duration: started.elapsed(),
        urgent,
    }
}

/// The tray of a run of the collector whose latest plan `plan` is; `refresh`: of targets that
/// have values already.
fn tray_of(publisher: &Publisher, plan: &signal::Receiver<Plan>, refresh: bool) -> Tray {
    let plan = plan.clone();
    publisher.tray(move || plan.borrow().polled(Instant::now()), refresh)
}

/// What a run of the collector whose latest plan `plan` is does with each result as it lands:
/// the targets its data reveals are discovered at once, and it goes to `tray`.
fn landing<'a>(
    plan: &'a signal::Receiver<Plan>,
    tray: &'a Tray,
) -> impl FnMut(Target, Result<TargetData, UpstreamError>) + Send + 'a {
    move |target, result| {
        if let Ok(data) = &result {
            plan.borrow().discover(data, Instant::now());
        }
        tray.put(target, result);
    }
}

/// Waits until a target is added to the poll set (never, for a collector without one).
async fn registered(probed: &mut Option<Registered>) {
    match probed {
        Some(rx) => rx.added().await,
        None => std::future::pending::<()>().await,
    }
}
