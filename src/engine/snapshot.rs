//! The snapshot: what every collector last learned, as plain values. Each target's result is
//! applied to it whole, as a run hands it over; a run's own series at its end. Rendering reads
//! it, and [`crate::engine::store`] publishes what is rendered.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jiff::Timestamp;

use crate::engine::spec::{CollectorKey, CollectorName, CollectorSpec, Target, TargetData};
use crate::engine::unpoisoned;
use crate::settings::Schedule;
use crate::tenant::TenantName;
use crate::upstream::error::{FailureReason, UpstreamError};

/// What is known of one target.
#[derive(Clone, Debug)]
pub struct TargetState {
    pub target: Target,
    /// The last good data and when it was fetched; dropped once older than `max_age`. Shared:
    /// a change to a collector's state copies its targets (the published snapshot still holds
    /// the old one), and a copy of a hundred thousand targets then costs a pointer each, not
    /// their records.
    pub data: Option<(Arc<TargetData>, Timestamp)>,
    /// Outcome of the latest attempt: `None` before the first one.
    pub last_ok: Option<bool>,
    /// When the latest attempt finished.
    pub last_attempt: Option<Timestamp>,
    pub last_success: Option<Timestamp>,
    /// When an attempt last failed (or the target was last marked failed for want of a run).
    pub last_failure: Option<Timestamp>,
    pub last_error: Option<UpstreamError>,
    /// The latest run did not reach it (the tenant's rate limit gave it no turn before the
    /// deadline); the next run takes it first.
    pub deferred: bool,
    /// Kept by an earlier process (`--storage.path`) and not attempted by this one yet.
    pub restored: bool,
}

impl TargetState {
    /// A target known by name only: nothing attempted yet.
    fn unknown(target: Target) -> Arc<TargetState> {
        Arc::new(TargetState {
            target,
            data: None,
            last_ok: None,
            last_attempt: None,
            last_success: None,
            last_failure: None,
            last_error: None,
            deferred: false,
            restored: false,
        })
    }

    /// Takes the result of one attempt at `now`. A deferred target was not tried: it is only
    /// marked.
    fn record(&mut self, result: Result<TargetData, UpstreamError>, now: Timestamp) {
        if matches!(&result, Err(e) if e.deferred) {
            self.deferred = true;
            return;
        }
        self.deferred = false;
        self.restored = false;
        self.last_attempt = Some(now);
        match result {
            Ok(data) => {
                let data = data.carry(self.data.as_ref().map(|(d, _)| &**d), now);
                self.data = Some((Arc::new(data), now));
                self.last_ok = Some(true);
                self.last_success = Some(now);
                self.last_error = None;
            }
            Err(e) => {
                if e.reason == FailureReason::NotFound {
                    self.data = None;
                }
                self.last_ok = Some(false);
                self.last_failure = Some(now);
                self.last_error = Some(e);
            }
        }
    }
}

/// The latest run of a collector.
#[derive(Clone, Copy, Debug)]
pub struct RunSummary {
    pub success: bool,
    pub duration: Duration,
    pub finished: Timestamp,
}

#[derive(Clone, Debug)]
pub struct CollectorState {
    pub name: CollectorName,
    pub tenant: TenantName,
    pub schedule: Schedule,
    /// In configured order (then probed ones); changed only through [`Snapshot::apply_run`]
    /// and [`CollectorState::retain_configured`], which keep `index` in step. Each target's
    /// state is shared: a change to the collector copies this list (the published snapshot
    /// still holds the old one), which then costs a pointer per target, not its state; a part
    /// of a first run over a hundred thousand accounts is applied every second or so.
    pub targets: Vec<Arc<TargetState>>,
    pub last_run: Option<RunSummary>,
    pub last_success: Option<Timestamp>,
    /// Targets whose latest run did not reach them before its deadline because of the tenant's
    /// rate limit: not failed, kept as they were, first in the next run.
    pub deferred: usize,
    /// How long values are kept while the tenant's fleet does not fit its rate limit (longer
    /// than `max_age`: each target waits several intervals for its turn); `None` otherwise.
    pub keep_for: Option<Duration>,
    /// Whether targets kept by an earlier process were restored into it at start: its
    /// `mailhost_storage_restored_targets` says how many are still as they were kept.
    pub restored: bool,
    /// Times its loop panicked and was started again ([`crate::engine::restart`]), and when
    /// it last did.
    pub restarts: u64,
    pub last_restart: Option<Timestamp>,
    /// Where each target is in `targets`: `/probe` finds one target of a large fleet at once.
    /// Shared by the copies of this state (see [`Index`]); none below [`INDEXED_FROM`] targets,
    /// which are found by a scan.
    index: Option<Arc<RwLock<Index>>>,
}

/// A collector of fewer targets has no index: a scan of a few finds one as fast, and ten
/// thousand tenants of one account would each keep a map's smallest table (256 bytes) and its
/// lock.
const INDEXED_FROM: usize = 16;

/// Where each target is in a collector's `targets`, shared by the copies of the collector's
/// state: the published snapshot's and the store's working one. Positions only ever grow between
/// two reindexings (a target is added at the end, a result replaces a target's state in its
/// place), so the copy whose `targets` is as long as the index (its tip) adds its new targets to
/// the shared index, and an older copy, a prefix of it, reads only the positions it has. A copy
/// that is not the tip and adds a target takes an index of its own first, as does a copy that
/// forgets targets. Without it every change to a collector copied the index, 65 bytes a target
/// (8.5 MB at 100,000): a first run's parts had one beside the published one all the way through.
///
/// Nothing panics while the index is locked but an allocation; a poisoned index is still whole
/// up to its last insertion (and a tip whose push did not happen is no tip: it reindexes).
#[derive(Debug, Default)]
struct Index {
    at: HashMap<Target, usize>,
    /// How many targets the index covers: the length of its tip's `targets`.
    len: usize,
}

impl CollectorState {
    /// A configured collector that has not run yet.
    pub fn new(spec: &CollectorSpec) -> Self {
        CollectorState {
            name: spec.name,
            tenant: spec.tenant.clone(),
            schedule: spec.schedule,
            targets: Vec::new(),
            last_run: None,
            last_success: None,
            deferred: 0,
            keep_for: None,
            restored: false,
            restarts: 0,
            last_restart: None,
            index: None,
        }
    }

    /// How long a value is kept now: `max_age`, or longer while the tenant's fleet does not fit
    /// its rate limit.
    pub fn max_age(&self) -> Duration {
        self.keep_for
            .map_or(self.schedule.max_age, |k| k.max(self.schedule.max_age))
    }

    /// The state of one target, if it is known.
    pub fn target(&self, target: &Target) -> Option<&Arc<TargetState>> {
        let Some(index) = &self.index else {
            return self.targets.iter().find(|t| t.target == *target);
        };
        let i = *unpoisoned(index.read()).at.get(target)?;
        // A position the tip added past this copy's end is not this copy's.
        self.targets.get(i).filter(|t| t.target == *target)
    }

    /// This collector's header (name, tenant, schedule, last run) with only `targets`.
    pub fn with_targets(&self, targets: Vec<Arc<TargetState>>) -> CollectorState {
        let mut c = CollectorState {
            name: self.name,
            tenant: self.tenant.clone(),
            schedule: self.schedule,
            targets,
            last_run: self.last_run,
            last_success: self.last_success,
            deferred: self.deferred,
            keep_for: self.keep_for,
            restored: self.restored,
            restarts: self.restarts,
            last_restart: self.last_restart,
            index: None,
        };
        c.reindex();
        c
    }

    /// Targets restored at start that this process has not attempted yet.
    pub fn still_restored(&self) -> usize {
        self.targets.iter().filter(|t| t.restored).count()
    }

    /// Forgets the targets no longer configured and makes room for all `configured` ones.
    fn forget_unconfigured(&mut self, configured: &HashSet<&Target>, count: usize) {
        let before = self.targets.len();
        self.targets.retain(|t| configured.contains(&t.target));
        if self.targets.len() != before {
            self.reindex();
        }
        // Room for every configured target at once: a vector left to double would hold up to
        // twice the fleet's states, and both copies while it moves (the config bounds the count).
        let missing = count.saturating_sub(self.targets.len());
        if self.targets.capacity() - self.targets.len() < missing {
            self.targets.reserve_exact(missing);
            if let Some(index) = &self.index {
                let mut index = unpoisoned(index.write());
                if index.len == self.targets.len() {
                    index.at.reserve(missing);
                }
            }
        }
    }

    /// Where `target` is in `targets`; a new target is added, knowing nothing yet. Checked and
    /// added under one lock of the index: a copy adds to the shared index only while it is its
    /// tip, else it takes its own first.
    fn slot(&mut self, target: Target) -> usize {
        let at = self.targets.len();
        match &self.index {
            None => {
                if let Some(i) = self.targets.iter().position(|t| t.target == target) {
                    return i;
                }
                self.targets.push(TargetState::unknown(target));
                if self.targets.len() >= INDEXED_FROM {
                    self.reindex();
                }
                at
            }
            Some(index) => {
                {
                    let mut index = unpoisoned(index.write());
                    if index.len == at {
                        if let Some(&i) = index.at.get(&target) {
                            return i;
                        }
                        index.at.insert(target.clone(), at);
                        index.len = at + 1;
                        self.targets.push(TargetState::unknown(target));
                        return at;
                    }
                }
                self.reindex();
                self.slot(target)
            }
        }
    }

    /// Counts the deferred targets and sums up the run.
    fn end_run(&mut self, duration: Duration, now: Timestamp) {
        self.deferred = self.targets.iter().filter(|t| t.deferred).count();
        // A run of some targets (a catch-up of deferred ones, a probe's first fetch) speaks for
        // the whole collector: it succeeded when, after it, no target's last attempt failed. A
        // catch-up that could call nothing does not turn a failing collector into a healthy one.
        // A failure of this run is among them whether it was applied at the end or with a part
        // handed over earlier (it is a target's last attempt until its next run).
        let success = self.targets.iter().all(|t| t.last_ok != Some(false));
        self.last_run = Some(RunSummary {
            success,
            duration,
            finished: now,
        });
        if success {
            self.last_success = Some(now);
        }
    }

    /// Gives this copy an index of its own, of its targets (none below [`INDEXED_FROM`]), with
    /// room for as many as `targets` has room for: a first run's parts add to it without moving it.
    fn reindex(&mut self) {
        if self.targets.len() < INDEXED_FROM {
            self.index = None;
            return;
        }
        let mut at = HashMap::with_capacity(self.targets.capacity());
        at.extend(
            self.targets
                .iter()
                .enumerate()
                .map(|(i, t)| (t.target.clone(), i)),
        );
        self.index = Some(Arc::new(RwLock::new(Index {
            at,
            len: self.targets.len(),
        })));
    }
}

/// Every collector's state, by collector then tenant. Plain values: rendering reads it, nothing
/// else. Each collector's state is shared between copies: a copy costs a pointer per collector, and
/// a change clones only the state it changes (one tenant's collector), so the published copy and
/// the store's working one hold the rest of a large fleet once.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub collectors: BTreeMap<CollectorKey, Arc<CollectorState>>,
}

impl Snapshot {
    /// Every tenant's collector of one collector, tenants in name order.
    pub fn of_collector(&self, name: CollectorName) -> impl Iterator<Item = &CollectorState> {
        self.collectors
            .range((name, TenantName::default())..)
            .take_while(move |((n, _), _)| *n == name)
            .map(|(_, c)| &**c)
    }

    /// The collectors that have at least one collector, in order.
    pub fn collectors(&self) -> Vec<CollectorName> {
        let mut collectors: Vec<CollectorName> = self.collectors.keys().map(|(n, _)| *n).collect();
        collectors.dedup();
        collectors
    }

    /// Ready once every collector has finished its first run, success or not, or had its loop
    /// panic: a collector whose loop is started again after a back-off does not keep the
    /// exporter, which serves every other collector meanwhile, out of rotation.
    pub fn ready(&self) -> bool {
        self.collectors
            .values()
            .all(|c| c.last_run.is_some() || c.restarts > 0)
    }

    /// Counts a restart of a collector's loop after a panic, at `now`; `false` when the
    /// collector is no longer configured (a reload removed it meanwhile).
    pub fn restarted(&mut self, key: &CollectorKey, now: Timestamp) -> bool {
        let Some(c) = self.collectors.get_mut(key) else {
            return false;
        };
        let c = Arc::make_mut(c);
        c.restarts = c.restarts.saturating_add(1);
        c.last_restart = Some(now);
        true
    }

    /// Applies a finished run of some or all of the collector's targets (a reload runs only the
    /// targets it added): the results not applied yet by [`Snapshot::apply_part`] (each target's
    /// result is applied once), then the run's own series (its outcome, duration, deferred count
    /// and how long values are kept). Targets no longer in `spec` are forgotten; the others keep
    /// their state until a result of theirs comes. A target that failed keeps its last good data
    /// (expired later by [`Snapshot::expire`]), except on `not_found`: the provider says it is
    /// gone, so its values go at once. A target the run deferred (the tenant's rate limit gave it
    /// no turn) was not tried: it stays exactly as it was, and is only counted.
    pub fn apply_run(
        &mut self,
        spec: &CollectorSpec,
        results: Vec<(Target, Result<TargetData, UpstreamError>)>,
        duration: Duration,
        now: Timestamp,
    ) {
        let entry = self.apply_results(spec, results, now);
        entry.schedule = spec.schedule;
        entry.keep_for = spec.keep_for;
        entry.end_run(duration, now);
    }

    /// Takes the targets an earlier process kept (`--storage.path`), before the collector's first
    /// run: each target it does not know yet is served as it was kept, marked restored until
    /// this process attempts it. A collector that is not configured takes nothing. Returns how
    /// many were taken.
    pub fn restore(&mut self, key: &CollectorKey, targets: Vec<TargetState>) -> usize {
        let Some(shared) = self.collectors.get_mut(key) else {
            return 0;
        };
        let c = Arc::make_mut(shared);
        let mut taken = 0;
        for t in targets {
            if c.target(&t.target).is_some() {
                continue;
            }
            let i = c.slot(t.target.clone());
            c.targets[i] = Arc::new(TargetState {
                restored: true,
                deferred: false,
                ..t
            });
            taken += 1;
        }
        c.restored |= taken > 0;
        taken
    }

    /// Applies what a run still under way has fetched so far: each target's result as
    /// [`Snapshot::apply_run`] applies it, and nothing of the run's own series, which wait for
    /// its end (the collector's success, duration, deferred count and readiness speak of a whole
    /// run; how long values are kept is learned at its end).
    pub fn apply_part(
        &mut self,
        spec: &CollectorSpec,
        results: Vec<(Target, Result<TargetData, UpstreamError>)>,
        now: Timestamp,
    ) {
        self.apply_results(spec, results, now);
    }

    /// Forgets the targets no longer in `spec` and records each result of a target still in it;
    /// returns the collector's state.
    fn apply_results(
        &mut self,
        spec: &CollectorSpec,
        results: Vec<(Target, Result<TargetData, UpstreamError>)>,
        now: Timestamp,
    ) -> &mut CollectorState {
        let entry = Arc::make_mut(
            self.collectors
                .entry(spec.key())
                .or_insert_with(|| Arc::new(CollectorState::new(spec))),
        );
        // Sets and an index, not scans: a run over a large fleet is applied in linear time.
        let configured: HashSet<&Target> = spec.targets.iter().collect();
        entry.forget_unconfigured(&configured, spec.targets.len());
        for (target, result) in results {
            if !configured.contains(&target) {
                continue;
            }
            let i = entry.slot(target);
            Arc::make_mut(&mut entry.targets[i]).record(result, now);
        }
        entry
    }

    /// Drops data older than its collector's `max_age`; health series stay. A target whose
    /// last attempt succeeded but is that old (no run has finished since: it never happens while
    /// runs keep their deadlines) is marked failed with `timeout`, so no success series says 1
    /// over data that old. Returns whether anything changed, and the next instant at which
    /// something will expire.
    pub fn expire(&mut self, now: Timestamp) -> (bool, Option<Timestamp>) {
        let mut changed = false;
        let mut next: Option<Timestamp> = None;
        for shared in self.collectors.values_mut() {
            // A target waiting for its turn keeps its values longer while its tenant's fleet does
            // not fit the rate limit; so does one that met a 429 of the token's or endpoint's
            // pace and had no turn left (it waits for the token, not for a fault of its own).
            // One whose turn came and failed for a reason of its own has `max_age`, as always.
            let waiting = shared.max_age();
            let failing = shared.schedule.max_age;
            let max_age_of = |t: &TargetState| {
                let own_fault = t
                    .last_error
                    .as_ref()
                    .is_none_or(|e| e.reason != FailureReason::RateLimited || e.own);
                if t.last_ok == Some(false) && own_fault {
                    failing
                } else {
                    waiting
                }
            };
            // A clock that went back gives a negative age: not expired.
            let too_old = |at: Timestamp, max_age: Duration| {
                let age = now.duration_since(at);
                age.is_positive() && age.unsigned_abs() > max_age
            };
            // Read first: a collector with nothing to expire is not copied.
            let mut due = false;
            for t in &shared.targets {
                let Some((_, fetched)) = &t.data else {
                    continue;
                };
                let max_age = max_age_of(t);
                let max_age_signed =
                    jiff::SignedDuration::try_from(max_age).unwrap_or(jiff::SignedDuration::MAX);
                if too_old(*fetched, max_age) {
                    due = true;
                } else if let Ok(at) = fetched.checked_add(max_age_signed) {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
            if !due {
                continue;
            }
            changed = true;
            let c = Arc::make_mut(shared);
            for t in &mut c.targets {
                let max_age = max_age_of(t);
                if !t
                    .data
                    .as_ref()
                    .is_some_and(|(_, fetched)| too_old(*fetched, max_age))
                {
                    continue;
                }
                let t = Arc::make_mut(t);
                t.data = None;
                let last_attempt_too_old = t.last_attempt.is_none_or(|at| too_old(at, max_age));
                if t.last_ok == Some(true) && last_attempt_too_old {
                    t.last_ok = Some(false);
                    t.last_failure = Some(now);
                    t.last_error = Some(UpstreamError::new(
                        FailureReason::Timeout,
                        format!(
                            "no run finished within max_age ({})",
                            humantime::format_duration(max_age)
                        ),
                    ));
                }
            }
        }
        (changed, next)
    }
}

impl CollectorState {
    /// Forgets the targets that are no longer configured.
    pub fn retain_configured(&mut self, spec: &CollectorSpec) {
        let configured: HashSet<&Target> = spec.targets.iter().collect();
        self.targets.retain(|t| configured.contains(&t.target));
        self.deferred = self.targets.iter().filter(|t| t.deferred).count();
        self.reindex();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::collectors::delivery_account::fixtures::answered;
    use crate::engine::spec::fixtures::accounts;

    type Landed = (Target, Result<TargetData, UpstreamError>);

    fn spec() -> CollectorSpec {
        accounts(&[1, 2], Duration::from_secs(10))
    }

    fn err(reason: FailureReason) -> UpstreamError {
        UpstreamError::new(reason, "test")
    }

    /// Account `id` failed with `e`.
    fn failed(id: i32, e: UpstreamError) -> Landed {
        (Target::DeliveryAccount(id), Err(e))
    }

    /// The time the tests start at, plus `secs` seconds.
    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_000_000 + secs).unwrap()
    }

    /// The key of the one collector of [`spec`] and [`accounts`].
    fn key() -> CollectorKey {
        (CollectorName::DeliveryAccount, TenantName::default())
    }

    /// `spec` while the fleet does not fit: values are kept for 80 s, not max_age's 30 s.
    fn waiting(spec: CollectorSpec) -> CollectorSpec {
        CollectorSpec {
            keep_for: Some(Duration::from_secs(80)),
            ..spec
        }
    }

    /// A target the run deferred: the tenant's rate limit gave it no turn.
    fn deferred() -> UpstreamError {
        UpstreamError {
            deferred: true,
            ..err(FailureReason::RateLimited)
        }
    }

    /// Applies to `s` a run of `spec` that took no time and ended at `now` with `results`.
    fn apply(s: &mut Snapshot, spec: &CollectorSpec, results: Vec<Landed>, now: Timestamp) {
        s.apply_run(spec, results, Duration::ZERO, now);
    }

    /// A snapshot after a run of [`spec`] at `at(0)` in which the accounts answered `values`.
    fn first_run(values: &[(i32, f64)]) -> Snapshot {
        let mut s = Snapshot::default();
        apply(&mut s, &spec(), answered(values), at(0));
        s
    }

    /// Whether account `id` of `c` holds values (it must be known).
    fn has_data(c: &CollectorState, id: i32) -> bool {
        c.target(&Target::DeliveryAccount(id))
            .unwrap()
            .data
            .is_some()
    }

    #[test]
    fn copies_of_a_collector_share_one_index_and_each_finds_only_its_own_targets() {
        let t0 = at(0);
        let key = key();
        // 16 targets (the index's least) and then 1 to 5 more.
        let ids: Vec<i32> = (1..=21).collect();
        let spec = accounts(&ids[..19], Duration::from_secs(10));
        let first: Vec<(i32, f64)> = (1..=16).map(|id| (id, 1.0)).collect();
        let mut working = Snapshot::default();
        working.apply_part(&spec, answered(&first), t0);
        // Published: the store's copy goes on with the next part.
        let published = working.clone();
        working.apply_part(&spec, answered(&[(17, 2.0), (18, 3.0)]), t0);
        let (old, new) = (
            published.collectors[&key].clone(),
            working.collectors[&key].clone(),
        );
        let (old, new) = (&*old, &*new);
        let shared = |a: &CollectorState, b: &CollectorState| match (&a.index, &b.index) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        assert!(shared(old, new), "the next part copied the index");
        let found = |c: &CollectorState, id| c.target(&Target::DeliveryAccount(id)).is_some();
        assert!(found(old, 1) && found(old, 16) && !found(old, 17) && !found(old, 18));
        assert!(found(new, 1) && found(new, 17) && found(new, 18) && !found(new, 19));
        // A copy that is not the tip and adds a target takes its own index, and neither copy
        // finds the other's target at the same place.
        let mut other = published.clone();
        other.apply_part(&spec, answered(&[(19, 4.0)]), t0);
        let forked = &other.collectors[&key];
        assert!(!shared(forked, new));
        assert!(found(forked, 1) && found(forked, 19) && !found(forked, 17));
        assert!(!found(new, 19) && found(new, 17));
        assert!(has_data(forked, 19));
        // A copy that forgets targets takes its own index (none, below 16); the others keep
        // theirs.
        let mut fewer = working.clone();
        let one = accounts(&[3], Duration::from_secs(10));
        fewer.apply_part(&one, answered(&[(3, 5.0)]), t0);
        let c = &fewer.collectors[&key];
        assert!(c.index.is_none());
        assert!(found(c, 3) && !found(c, 1) && c.targets.len() == 1);
        assert!(found(new, 1) && found(new, 3));
        // And the tip goes on adding to the shared one.
        working.apply_part(&spec, answered(&[(19, 4.0)]), t0);
        let tip = &working.collectors[&key];
        assert!(shared(tip, new));
        assert!(found(tip, 19) && found(tip, 1) && !found(old, 19));
        // Two copies as long as each other: the first to add is the tip, the other one then
        // takes its own index, and neither finds the other's new target.
        let all = accounts(&ids, Duration::from_secs(10));
        let mut twin = working.clone();
        twin.apply_part(&all, answered(&[(20, 5.0)]), t0);
        working.apply_part(&all, answered(&[(21, 6.0)]), t0);
        let (a, b) = (&working.collectors[&key], &twin.collectors[&key]);
        assert!(!shared(a, b));
        assert!(found(a, 21) && !found(a, 20) && found(b, 20) && !found(b, 21));
        assert_eq!(
            a.target(&Target::DeliveryAccount(21)).unwrap().target,
            Target::DeliveryAccount(21)
        );
        assert_eq!((a.targets.len(), b.targets.len()), (20, 20));
    }

    #[test]
    fn a_small_collector_finds_its_targets_without_an_index_and_a_large_one_with_it() {
        let t0 = at(0);
        let ids: Vec<i32> = (1..=40).collect();
        for n in [1, INDEXED_FROM - 1, INDEXED_FROM, 40] {
            let spec = accounts(&ids[..n], Duration::from_secs(10));
            let mut s = Snapshot::default();
            // Landed in reverse: each result finds its own target, new or known.
            let values: Vec<(i32, f64)> =
                ids[..n].iter().rev().map(|&id| (id, id.into())).collect();
            apply(&mut s, &spec, answered(&values), t0);
            apply(&mut s, &spec, answered(&values[..1]), t0);
            let c = &s.collectors[&key()];
            assert_eq!(c.targets.len(), n);
            assert_eq!(c.index.is_some(), n >= INDEXED_FROM, "{n} targets");
            for &id in &ids[..n] {
                let t = c.target(&Target::DeliveryAccount(id)).unwrap();
                assert_eq!(t.target, Target::DeliveryAccount(id));
            }
            assert!(c.target(&Target::DeliveryAccount(99)).is_none());
            // Fewer again: the index goes.
            let mut fewer = CollectorState::clone(c);
            fewer.retain_configured(&accounts(&ids[..1], Duration::from_secs(10)));
            assert!(fewer.index.is_none());
            assert!(fewer.target(&Target::DeliveryAccount(1)).is_some());
        }
    }

    #[test]
    fn a_failing_target_keeps_its_values_until_max_age() {
        let mut s = first_run(&[(1, 5.0)]);
        let t1 = at(20);
        let failure = vec![failed(1, err(FailureReason::ServerError))];
        apply(&mut s, &spec(), failure, t1);
        s.expire(t1);
        let c = &s.collectors[&key()];
        assert!(c.targets[0].data.is_some());
        assert!(!c.last_run.unwrap().success);
        let t2 = at(31);
        s.expire(t2);
        assert!(s.collectors[&key()].targets[0].data.is_none());
    }

    #[test]
    fn a_target_that_met_the_tokens_429_waits_as_a_deferred_one_and_one_refused_on_its_own_does_not()
     {
        let mut s = first_run(&[(1, 5.0), (2, 6.0)]);
        let key = key();
        let own = UpstreamError {
            own: true,
            ..err(FailureReason::RateLimited)
        };
        let refused = vec![failed(1, err(FailureReason::RateLimited)), failed(2, own)];
        apply(&mut s, &waiting(spec()), refused, at(20));
        // At 40 s: past max_age (30 s), within the fleet's wait (80 s).
        s.expire(at(40));
        let c = &s.collectors[&key];
        assert!(
            has_data(c, 1),
            "a shared 429 and no turn left: it waits for the token"
        );
        assert!(
            !has_data(c, 2),
            "its own 429s: max_age, as any failure of its own"
        );
    }

    #[test]
    fn a_deferred_target_stays_as_it_was_and_keeps_its_values_while_the_fleet_does_not_fit() {
        let mut s = first_run(&[(1, 5.0), (2, 6.0)]);
        let key = key();
        // The fleet does not fit: values are kept for 80 s instead of max_age's 30 s.
        let waiting = waiting(spec());
        let results = vec![
            failed(1, deferred()),
            failed(2, err(FailureReason::ServerError)),
        ];
        apply(&mut s, &waiting, results, at(20));
        let c = &s.collectors[&key];
        assert_eq!(c.deferred, 1);
        assert!(!c.last_run.unwrap().success, "account 2 failed");
        let one = c.target(&Target::DeliveryAccount(1)).unwrap();
        assert!(one.deferred && one.last_ok == Some(true) && one.last_error.is_none());
        assert_eq!(one.last_attempt, Some(at(0)), "not tried, so not attempted");
        // At 40 s the failing account's values are past max_age; the waiting one's are not.
        s.expire(at(40));
        let c = &s.collectors[&key];
        assert!(has_data(c, 1));
        assert!(!has_data(c, 2));
        s.expire(at(81));
        let c = &s.collectors[&key];
        assert!(!has_data(c, 1));
        // Its turn comes: tried again, it is no longer deferred.
        apply(&mut s, &waiting, answered(&[(1, 4.0)]), at(82));
        assert_eq!(s.collectors[&key].deferred, 0);
    }

    #[test]
    fn a_part_of_a_run_shows_its_targets_at_once_and_leaves_the_runs_own_series_to_its_end() {
        let mut s = Snapshot::default();
        let t0 = at(0);
        let key = key();
        let three = accounts(&[1, 2, 3], Duration::from_secs(10));
        // A first run under way: account 1 answered, 2 failed, 3 is still being fetched.
        s.apply_part(
            &three,
            vec![
                answered(&[(1, 5.0)]).remove(0),
                failed(2, err(FailureReason::ServerError)),
            ],
            t0,
        );
        let c = &s.collectors[&key];
        let one = c.target(&Target::DeliveryAccount(1)).unwrap();
        assert_eq!(one.data.as_ref().map(|(_, at)| *at), Some(t0));
        assert_eq!(one.last_success, Some(t0));
        let two = c.target(&Target::DeliveryAccount(2)).unwrap();
        assert_eq!(two.last_ok, Some(false), "a failure shows as it comes too");
        assert!(c.target(&Target::DeliveryAccount(3)).is_none());
        assert!(c.last_run.is_none() && c.last_success.is_none());
        assert!(!s.ready(), "readiness waits for the first run's end");
        // Its end brings the rest; the failure of the part counts in the run's outcome.
        let t1 = at(4);
        s.apply_run(&three, answered(&[(3, 7.0)]), Duration::from_secs(4), t1);
        let c = &s.collectors[&key];
        let run = c.last_run.unwrap();
        assert!(!run.success, "account 2 failed in this run");
        assert_eq!((run.duration, run.finished), (Duration::from_secs(4), t1));
        assert_eq!(
            c.target(&Target::DeliveryAccount(1)).unwrap().last_success,
            Some(t0),
            "applied once, with its part"
        );
        assert!(has_data(c, 3));
        assert!(s.ready());
        // A part never touches what the last run's end decided: how long values are kept
        // while the fleet does not fit, and the deferred count.
        let waiting = waiting(three.clone());
        apply(&mut s, &waiting, vec![failed(3, deferred())], t1);
        s.apply_part(&three, answered(&[(1, 6.0)]), at(5));
        let c = &s.collectors[&key];
        assert_eq!(c.keep_for, Some(Duration::from_secs(80)));
        assert_eq!(c.deferred, 1);
        assert_eq!(c.last_run.unwrap().finished, t1);
    }

    #[test]
    fn a_run_of_some_targets_leaves_the_others_as_they_were() {
        let mut s = first_run(&[(1, 5.0), (2, 6.0)]);
        let t0 = at(0);
        apply(&mut s, &spec(), answered(&[(2, 7.0)]), at(5));
        let targets = &s.collectors[&key()].targets;
        assert_eq!(targets.len(), 2);
        let one = targets
            .iter()
            .find(|t| t.target == Target::DeliveryAccount(1))
            .unwrap();
        assert_eq!(one.last_success, Some(t0));
        assert_eq!(one.data.as_ref().unwrap().1, t0);
    }

    #[test]
    fn expiry_says_when_the_next_value_goes_and_fails_a_success_that_old() {
        let mut s = first_run(&[(1, 5.0)]);
        let (changed, next) = s.expire(at(10));
        assert!(!changed);
        assert_eq!(next, Some(at(30)));
        // No run finished since (a stuck collector): at max_age the values go, and the target
        // no longer claims success.
        let (changed, next) = s.expire(at(0) + jiff::SignedDuration::from_millis(30_001));
        assert!(changed);
        assert_eq!(next, None);
        let t = &s.collectors[&key()].targets[0];
        assert!(t.data.is_none());
        assert_eq!(t.last_ok, Some(false));
        assert_eq!(
            t.last_error.as_ref().map(|e| e.reason),
            Some(FailureReason::Timeout)
        );
    }

    #[test]
    fn a_clock_that_goes_back_expires_nothing() {
        let mut s = first_run(&[(1, 5.0)]);
        let (changed, _) = s.expire(Timestamp::from_second(0).unwrap());
        assert!(!changed);
        let (changed, _) = s.expire(Timestamp::MAX);
        assert!(changed);
    }

    #[test]
    fn not_found_drops_values_at_once() {
        let mut s = first_run(&[(1, 5.0)]);
        let t0 = at(0);
        apply(
            &mut s,
            &spec(),
            vec![failed(1, err(FailureReason::NotFound))],
            t0,
        );
        let t = &s.collectors[&key()].targets[0];
        assert!(t.data.is_none());
        assert_eq!(t.last_success, Some(t0));
    }

    #[test]
    fn a_target_no_longer_configured_is_forgotten() {
        let mut s = first_run(&[(1, 5.0), (2, 6.0)]);
        let mut reloaded = spec();
        reloaded.targets = vec![Target::DeliveryAccount(2)];
        apply(&mut s, &reloaded, answered(&[(2, 6.0)]), at(0));
        let targets = &s.collectors[&key()].targets;
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].target, Target::DeliveryAccount(2));
    }
}
