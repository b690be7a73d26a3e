//! What the pacer knows of one token: its own pace, and for each endpoint it calls a [`Way`]
//! (that endpoint's pace, queue of waiting calls, slow-start window, outage, retry budget and
//! recent answers). The queries here say when a call may go; [`super::admission`] and
//! [`super::attribution`] change the state. Nothing here reads a clock, takes a lock or does
//! I/O: every instant is passed in.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::control::Control;
use super::fit::FleetFit;
use super::headers::either;
use super::outage::{self, Outage};
use super::retry_budget::RetryBudget;
use super::shape::Outcomes;
use super::slow_start::SlowStart;
use super::targets::Targets;
use crate::settings::BreakerPolicy;
use crate::upstream::cooldown::far;
use crate::upstream::endpoint::Endpoint;

/// The weight of the last answer in the average answer time: a fifth, so that one slow answer
/// moves it little and a lasting change shows within about ten answers.
const LATENCY_WEIGHT: f64 = 0.2;
/// While a pace holds calls back, a call is let out only with this many average answer times
/// left before its deadline: one let out at the last moment would only be cut by it.
const MARGIN_ANSWERS: f64 = 2.0;
/// That margin is at least this (answers at once still take a scheduler's tick)...
const MIN_MARGIN_SECS: f64 = 0.005;
/// ...and at most this (a provider gone slow must not refuse every call of a short deadline).
const MAX_MARGIN_SECS: f64 = 2.0;

/// When the target of a call was last fetched successfully (`None`: never): the older, the
/// sooner its turn.
pub type Rank = Option<Instant>;

/// A call's place among the waiting ones: urgent first (in the order they came), then the calls
/// of targets not known to be failing before those of targets that are (and retries after a
/// failure), each oldest data first, then in the order they came.
pub(super) type Key = (bool, bool, Rank, u64);

/// The target of a call, keyed as its circuit is: its endpoint and its id.
pub type TargetKey = crate::upstream::breaker::CircuitKey;

/// One endpoint of the token: its pace, its queue, what its answers said.
#[derive(Debug)]
pub(super) struct Way {
    pub(super) control: Control,
    pub(super) queue: BTreeMap<Key, Arc<Notify>>,
    pub(super) in_flight: usize,
    /// A call was refused for want of a turn of this endpoint's pace since the last admitted.
    pub(super) backlogged: bool,
    pub(super) history: Outcomes,
    /// The last success, for telling the token's limit from this endpoint's.
    pub(super) last_success: Option<Instant>,
    /// The last 429 that came in a burst there.
    pub(super) last_burst: Option<Instant>,
    /// Calls in flight while the endpoint's limit is not known yet (a cold start, the end of
    /// an outage).
    pub(super) slow_start: SlowStart,
    /// Whether the endpoint fails everywhere.
    pub(super) outage: Outage,
    /// Retries of failed calls, at most a share of first attempts.
    pub(super) retries: RetryBudget,
    /// A call waited for room in the slow-start window since the last congestion event: what
    /// went through measured the window, not the provider's limit.
    pub(super) window_held: bool,
    /// Retries the budget refused so far.
    pub(super) retries_refused: u64,
}

impl Way {
    pub(super) fn new(now: Instant, ceiling: Option<f64>) -> Way {
        Way {
            control: Control::new(now, ceiling),
            queue: BTreeMap::new(),
            in_flight: 0,
            backlogged: false,
            history: Outcomes::default(),
            last_success: None,
            last_burst: None,
            slow_start: SlowStart::default(),
            outage: Outage::default(),
            retries: RetryBudget::new(now),
            window_held: false,
            retries_refused: 0,
        }
    }

    /// Whether another call may go as far as the slow-start window says.
    pub(super) fn room(&self) -> bool {
        self.slow_start.room(self.in_flight)
    }

    /// When a call may go as far as this endpoint's pace and outage say.
    pub(super) fn ready_at(&self, now: Instant) -> Instant {
        let at = self.control.ready_at(now);
        self.outage
            .ready_at(far(now))
            .map_or(at, |probe| at.max(probe))
    }

    pub(super) fn head(&self) -> Option<Key> {
        self.queue.keys().next().copied()
    }

    pub(super) fn wake_head(&self) {
        if let Some(n) = self.queue.values().next() {
            n.notify_one();
        }
    }
}

/// Each endpoint's way, in endpoint order: a list, since a tenant calls one endpoint or a few.
/// Each way is boxed, so that the list holds a pointer per endpoint; a map's first node has room
/// for eleven (290 bytes a tenant, eleven ways inline before they were boxed).
#[derive(Debug, Default)]
pub(super) struct Ways(Vec<(Endpoint, Box<Way>)>);

impl Ways {
    fn find(&self, endpoint: &Endpoint) -> Result<usize, usize> {
        self.0.binary_search_by(|(e, _)| e.cmp(endpoint))
    }

    pub(super) fn get(&self, endpoint: &Endpoint) -> Option<&Way> {
        self.find(endpoint).ok().map(|i| &*self.0[i].1)
    }

    pub(super) fn get_mut(&mut self, endpoint: &Endpoint) -> Option<&mut Way> {
        self.find(endpoint).ok().map(|i| &mut *self.0[i].1)
    }

    pub(super) fn contains_key(&self, endpoint: &Endpoint) -> bool {
        self.find(endpoint).is_ok()
    }

    /// The way of `endpoint`, made by `make` if it has none yet.
    pub(super) fn or_insert_with(
        &mut self,
        endpoint: Endpoint,
        make: impl FnOnce() -> Box<Way>,
    ) -> &mut Way {
        let i = match self.find(&endpoint) {
            Ok(i) => i,
            Err(i) => {
                // One more place, not the four a vector takes when it grows from nothing.
                self.0.reserve_exact(1);
                self.0.insert(i, (endpoint, make()));
                i
            }
        };
        &mut self.0[i].1
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&Endpoint, &Way)> {
        self.0.iter().map(|(e, w)| (e, &**w))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&Endpoint, &mut Way)> {
        self.0.iter_mut().map(|(e, w)| (&*e, &mut **w))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Way> {
        self.0.iter().map(|(_, w)| &**w)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Way> {
        self.0.iter_mut().map(|(_, w)| &mut **w)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The places the list holds.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl std::ops::Index<&Endpoint> for Ways {
    type Output = Way;

    fn index(&self, endpoint: &Endpoint) -> &Way {
        self.get(endpoint).expect("no way for this endpoint")
    }
}

#[derive(Debug)]
pub(super) struct State {
    /// The token's own pace: `rate_limit`, and what 429s charged to the token taught.
    pub(super) token: Control,
    /// Each endpoint called so far (a fixed set, declared by the collectors).
    pub(super) ways: Ways,
    /// `endpoint_rate_limits` of the config, by endpoint name.
    pub(super) ceilings: BTreeMap<String, f64>,
    pub(super) targets: Targets,
    pub(super) concurrency: usize,
    pub(super) in_flight: usize,
    pub(super) next_id: u64,
    /// Calls admitted so far: a call's sequence number says which answers are newer.
    pub(super) seq: u64,
    /// The demand of the tenant's collectors, and whether the fleet fits what is allowed.
    pub(super) fleet: FleetFit,
    /// A call was refused for want of a turn since the last one admitted: demand the pace does
    /// not meet, even with no call waiting (its run will come back for it).
    pub(super) backlogged: bool,
    /// How long answers take (an average of the recent ones), seconds: a paced call is not
    /// started when less than twice that is left before its deadline, as it would only be cut.
    pub(super) latency: f64,
    /// Whether an endpoint first called starts with a slow-start window (always, but for the
    /// unit tests of what the window is beside).
    pub(super) slow_start: bool,
}

impl State {
    /// A token's state before its first call: `concurrency` slots, its `ceiling` and the
    /// `ceilings` of the endpoints named.
    pub(super) fn new(
        now: Instant,
        concurrency: usize,
        ceiling: Option<f64>,
        ceilings: BTreeMap<String, f64>,
    ) -> State {
        State {
            token: Control::new(now, ceiling),
            ways: Ways::default(),
            ceilings,
            targets: Targets::new(BreakerPolicy::default()),
            concurrency: concurrency.max(1),
            in_flight: 0,
            next_id: 0,
            seq: 0,
            fleet: FleetFit::new(now),
            backlogged: false,
            latency: 0.0,
            slow_start: true,
        }
    }

    /// Takes a reloaded `api.concurrency`, `rate_limit` and `endpoint_rate_limits`; what was
    /// learned stays.
    pub(super) fn configure(
        &mut self,
        concurrency: usize,
        ceiling: Option<f64>,
        ceilings: BTreeMap<String, f64>,
        now: Instant,
    ) {
        self.concurrency = concurrency.max(1);
        self.token.set_ceiling(ceiling);
        for (e, w) in self.ways.iter_mut() {
            w.control.set_ceiling(ceilings.get(e.as_str()).copied());
        }
        self.ceilings = ceilings;
        self.tick(now);
    }

    /// An answer took `d`: the recent average moves a fifth of the way to it.
    pub(super) fn took(&mut self, d: Duration) {
        let took = d.as_secs_f64();
        self.latency = if self.latency == 0.0 {
            took
        } else {
            (1.0 - LATENCY_WEIGHT) * self.latency + LATENCY_WEIGHT * took
        };
    }

    pub(super) fn waiting(&self) -> bool {
        self.ways.values().any(|w| !w.queue.is_empty())
    }

    pub(super) fn way(&mut self, endpoint: Endpoint, now: Instant) -> &mut Way {
        let ceiling = self.ceilings.get(endpoint.as_str()).copied();
        let slow_start = self.slow_start;
        self.ways.or_insert_with(endpoint, || {
            let mut w = Way::new(now, ceiling);
            if !slow_start {
                w.slow_start.open();
            }
            Box::new(w)
        })
    }

    pub(super) fn wake_heads(&self) {
        for w in self.ways.values() {
            w.wake_head();
        }
    }

    /// The call that goes next, if a slot is free: the first of the heads whose endpoint has a
    /// turn now.
    pub(super) fn next(&self, now: Instant) -> Option<Key> {
        self.ways
            .values()
            .filter(|w| w.ready_at(now) <= now && w.room())
            .filter_map(|w| w.head())
            .min()
    }

    /// When the call `key` of `endpoint` may go, as far as the paces say.
    pub(super) fn ready_at(&self, endpoint: Endpoint, now: Instant) -> Instant {
        let way = self.ways.get(&endpoint).map_or(now, |w| w.ready_at(now));
        way.max(self.token.ready_at(now))
    }

    /// Whether the endpoint's slow-start window has room for another call.
    pub(super) fn room(&self, endpoint: Endpoint) -> bool {
        self.ways.get(&endpoint).is_none_or(|w| w.room())
    }

    /// Whether a call asking after a pause of the token or of `endpoint` is on its way: the
    /// others wait for its answer.
    pub(super) fn asking(&self, endpoint: Endpoint) -> bool {
        self.token.asking() || self.ways.get(&endpoint).is_some_and(|w| w.control.asking())
    }

    /// The outage `endpoint` is in, if any.
    pub(super) fn down(&self, endpoint: Endpoint) -> Option<outage::Down> {
        self.ways.get(&endpoint).and_then(|w| w.outage.down())
    }

    pub(super) fn limiting(&self, endpoint: Endpoint, now: Instant) -> bool {
        self.token.limiting(now)
            || self
                .ways
                .get(&endpoint)
                .is_some_and(|w| w.control.limiting(now) || w.outage.down().is_some())
    }

    /// The longest cool-down of an outage: half the shortest interval of the tenant's
    /// collectors. A run's calls wait for the probe only while it comes before their deadline,
    /// so with a probe every half interval each run has one, and an outage that ended is
    /// noticed within the run that follows it.
    pub(super) fn cooldown_cap(&self) -> Duration {
        self.fleet
            .shortest_interval()
            .map_or(outage::MAX_COOLDOWN, |i| i / 2)
    }

    /// Moves the controls' clocks on, describing the gates from now on.
    pub(super) fn tick(&mut self, now: Instant) {
        let free = self.in_flight < self.concurrency;
        let waiting = self.waiting();
        let active = waiting || self.in_flight > 0 || self.backlogged;
        let saturated = (waiting || self.backlogged) && free;
        self.token.tick(now, active, saturated);
        for w in self.ways.values_mut() {
            let waiting = !w.queue.is_empty() || w.backlogged;
            // An endpoint out of service is not held back by its pace: its curve does not
            // climb meanwhile.
            let out = w.outage.down().is_some();
            w.control
                .tick(now, waiting || w.in_flight > 0, waiting && free && !out);
        }
    }

    /// Whether a call of `endpoint` starting at `at` has time left before `deadline`: while a
    /// pace holds calls back, at least twice the recent answer time (at least 5 ms, at most
    /// 2 s), so that a call let out at the last moment is not merely cut by the deadline.
    pub(super) fn time_for(
        &self,
        endpoint: Endpoint,
        at: Instant,
        deadline: Option<Instant>,
    ) -> bool {
        let Some(d) = deadline else {
            return true;
        };
        if !self.limiting(endpoint, at) {
            return at <= d;
        }
        let margin = Duration::from_secs_f64(
            (MARGIN_ANSWERS * self.latency).clamp(MIN_MARGIN_SECS, MAX_MARGIN_SECS),
        );
        at.checked_add(margin).is_some_and(|end| end <= d)
    }

    pub(super) fn demand(&self) -> f64 {
        self.fleet.demand()
    }

    /// The rate the provider allows the whole token, as far as the pacer knows: its own, and
    /// the sum over the endpoints it calls when every one of them is limited.
    pub(super) fn allowed(&self) -> Option<f64> {
        let sum = self
            .ways
            .values()
            .map(|w| w.control.allowed())
            .sum::<Option<f64>>()
            .filter(|_| !self.ways.is_empty());
        either(self.token.allowed(), sum, f64::min)
    }

    /// Demand over the allowed rate, the worst of the token's and of each endpoint's: above 1
    /// the fleet does not fit.
    pub(super) fn overload(&self) -> f64 {
        self.fleet.overload(self.token.allowed(), |e| {
            self.ways.get(&e).and_then(|w| w.control.allowed())
        })
    }

    /// Whether the provider has paused the token, or every endpoint it calls.
    pub(super) fn paused(&self, now: Instant) -> bool {
        self.token.paused(now)
            || (!self.ways.is_empty() && self.ways.values().all(|w| w.control.paused(now)))
    }
}
