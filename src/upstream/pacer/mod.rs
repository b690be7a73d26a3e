//! The pacer: one per token (tenant), and every call of that token goes through it. It admits a
//! call when a connection slot is free (`api.concurrency`), neither the token nor the call's
//! endpoint is paused or past its stated quota, both the token's pace and its endpoint's have a
//! slot for it ([`control`]: learned, or set by `rate_limit` and `endpoint_rate_limits`), and
//! its target is not backing off on its own ([`shape`]). Each endpoint has its own queue, so a
//! slow endpoint never holds up a free one; within an endpoint, and across endpoints for a free
//! slot, waiting calls are served oldest data first, whichever collector of the tenant they
//! belong to (each call carries when its target was last fetched: its [`Rank`]), then in the
//! order they came; urgent ones (the first fetch of a target, which a `/probe` may be waiting
//! for) go before all the others. A call that cannot be admitted before its deadline is refused,
//! saying why ([`Denied`]).
//!
//! Whose a 429 is decides what slows down ([`shape`], [`attribution`]): a target refused again
//! and again while its neighbours succeed backs off alone; a lone 429 of a target not known
//! either way waits for the target's next answer (a success cuts the shared pace then); a burst
//! is its endpoint's, or the token's when the token's other endpoints are refused too within
//! [`TOKEN_SPAN`]. A `Retry-After` pauses the endpoint or the token in full when it is shared
//! (a burst, or a retry refused again while the endpoint refuses many); a lone one makes its
//! own call wait, and pauses the endpoint only until a call of it succeeds.
//!
//! The pacer outlives a reload that keeps its token and address, so what it learned stays. It
//! also compares what the tenant's collectors need ([`Pacer::set_demand`]) with what the
//! provider allows ([`fit`]), and tells the operator, once per change, when the fleet does not
//! fit.
//!
//! This file is the shell: it holds the token's [`state`] under a lock, reads the clock, sleeps
//! and wakes the waiting calls, logs and publishes the series. What a call's turn is
//! ([`admission`]), what an answer teaches ([`attribution`]) and whether the fleet fits
//! ([`fit`]) are pure moves of the state, driven by the instants passed in; `docs/pacer.md`
//! tells the whole design.

pub mod admission;
pub mod attribution;
pub mod control;
pub mod fit;
pub mod headers;
pub mod outage;
pub mod resume;
pub mod retry_budget;
pub mod shape;
pub mod slow_start;
pub mod state;
pub mod targets;
pub mod window;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::settings::BreakerPolicy;
use crate::storage::pace::{Clocks, KeptPacer};
use crate::tenant::TenantName;
use crate::upstream::breaker;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::FailureReason;
use crate::upstream::observe::{EndpointPace, Observer, OutageView};
pub use admission::{Call, Denied};
use admission::{Entry, Granted, Sent, Turn};
use attribution::{Answer, Learned};
pub use attribution::{Charged, FREE_SPAN, Outcome, TOKEN_SPAN};
use control::Event;
pub use fit::Demand;
use fit::Told;
use headers::QuotaInfo;
use outage::Change;
pub use outage::Standing;
use state::{Key, State};
pub use state::{Rank, TargetKey};
use targets::Targets;

struct Shared {
    tenant: TenantName,
    observer: Arc<dyn Observer>,
    state: Mutex<State>,
}

/// The pacer of one token; cheap to clone (clones share it).
#[derive(Clone)]
pub struct Pacer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer")
            .field("tenant", &self.shared.tenant)
            .finish_non_exhaustive()
    }
}

/// A call admitted and not yet ended: it holds a connection slot until dropped.
pub struct Permit {
    pacer: Pacer,
    sent: Sent,
    place: u64,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.pacer.lock();
        s.release(&self.sent, Instant::now());
        s.wake_heads();
    }
}

/// A place in an endpoint's queue; leaving it (admitted, refused or dropped) passes the turn
/// on.
struct Ticket<'a> {
    pacer: &'a Pacer,
    endpoint: Endpoint,
    key: Key,
    notify: Arc<Notify>,
    /// Whether it is still in the queue (not admitted).
    queued: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.queued {
            return;
        }
        let mut s = self.pacer.lock();
        s.leave(self.endpoint, self.key, Instant::now());
        s.wake_heads();
    }
}

impl Pacer {
    /// A pacer for `tenant` letting `concurrency` calls through at once, at most `ceiling`
    /// requests per second when set, and at most `endpoint_ceilings` on the endpoints named.
    pub fn new(
        tenant: TenantName,
        concurrency: usize,
        ceiling: Option<f64>,
        endpoint_ceilings: BTreeMap<String, f64>,
        breaker: BreakerPolicy,
        observer: Arc<dyn Observer>,
    ) -> Pacer {
        let mut state = State::new(Instant::now(), concurrency, ceiling, endpoint_ceilings);
        state.targets = Targets::new(breaker);
        let pacer = Pacer {
            shared: Arc::new(Shared {
                tenant,
                observer,
                state: Mutex::new(state),
            }),
        };
        pacer.publish(&pacer.lock());
        pacer
    }

    /// The state is counters and queues, valid at every point: a panic elsewhere while holding
    /// the lock must not turn every later call into one.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn tenant(&self) -> &TenantName {
        &self.shared.tenant
    }

    /// Calls waiting in a queue for their turn, of every endpoint.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().ways.values().map(|w| w.queue.len()).sum()
    }

    /// Whether `other` is this very pacer (not one of the same tenant built anew).
    pub fn same(&self, other: &Pacer) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Takes a reloaded `api.concurrency`, `rate_limit` and `endpoint_rate_limits`; what was
    /// learned stays.
    pub fn configure(
        &self,
        concurrency: usize,
        ceiling: Option<f64>,
        endpoint_ceilings: BTreeMap<String, f64>,
    ) {
        let told = {
            let mut s = self.lock();
            s.configure(concurrency, ceiling, endpoint_ceilings, Instant::now());
            s.wake_heads();
            self.publish(&s);
            self.check_fit(&mut s)
        };
        self.tell(told);
    }

    /// Waits for this call's turn, at most until its deadline: after the `Retry-After` of its
    /// target's last lone 429, if any (a target refused on its own is refused at once while it
    /// backs off), then in its endpoint's queue until both paces have a slot and a connection
    /// slot is free.
    pub async fn admit(&self, call: Call<'_>) -> Result<Permit, Denied> {
        let backing_off = self.lock().before_queue(&call, Instant::now())?;
        if let Some(until) = backing_off {
            tokio::time::sleep_until(until).await;
        }
        let started = Instant::now();
        let (ticket, paced) = {
            let mut s = self.lock();
            match s.enter(&call, started) {
                Entry::Granted(granted) => return Ok(self.permit(&s, granted)),
                Entry::Queued { key, notify, paced } => {
                    let ticket = Ticket {
                        pacer: self,
                        endpoint: call.target.0,
                        key,
                        notify,
                        queued: true,
                    };
                    (ticket, paced)
                }
            }
        };
        self.wait_in_queue(&call, ticket, (started, paced)).await
    }

    /// Waits in the queue with `ticket` until the call's turn, its refusal or its deadline.
    async fn wait_in_queue(
        &self,
        call: &Call<'_>,
        mut ticket: Ticket<'_>,
        queued: (Instant, bool),
    ) -> Result<Permit, Denied> {
        loop {
            let now = Instant::now();
            let wait_until = {
                let mut s = self.lock();
                match s.turn(call, ticket.key, queued, now) {
                    Turn::Go(granted) => {
                        ticket.queued = false;
                        return Ok(self.permit(&s, granted));
                    }
                    Turn::Refused { denied, next_turn } => {
                        drop(s);
                        return Err(self.refused(call, ticket, denied, next_turn, queued.0));
                    }
                    Turn::Wait(until) => until,
                }
            };
            let timer = async {
                match wait_until.into_iter().chain(call.deadline).min() {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = ticket.notify.notified() => {}
                () = timer => {}
            }
        }
    }

    /// The permit of a call admitted now; counts its wait and publishes.
    fn permit(&self, s: &State, granted: Granted) -> Permit {
        if let Some(d) = granted.waited {
            self.waited(d);
        }
        self.publish(s);
        Permit {
            pacer: self.clone(),
            sent: granted.sent,
            place: granted.place,
        }
    }

    /// A queued call refused: it leaves the queue (`ticket`); its wait since `started` is
    /// counted when a pace held it back.
    fn refused(
        &self,
        call: &Call<'_>,
        ticket: Ticket<'_>,
        denied: Denied,
        next_turn: Option<Duration>,
        started: Instant,
    ) -> Denied {
        if let Some(next) = next_turn {
            tracing::trace!(
                tenant = self.shared.tenant.as_str(),
                endpoint = call.target.0.as_str(),
                next_turn_ms = millis(next),
                "call refused: the pacer has no turn for it before its deadline"
            );
        }
        drop(ticket);
        if denied.paced {
            self.waited(started.elapsed());
        }
        denied
    }

    fn waited(&self, d: Duration) {
        if !d.is_zero() {
            self.shared
                .observer
                .observe_pacer_wait(&self.shared.tenant, d);
        }
    }

    /// Learns from the answer to an admitted call of `target`: its outcome and its quota
    /// fields; `hold` is how long the target's values live (its own back-off never outlasts
    /// them). Says whose a 429 was.
    pub fn observe(
        &self,
        permit: &Permit,
        target: &TargetKey,
        outcome: Outcome,
        quota: &QuotaInfo,
        hold: Duration,
    ) -> Charged {
        let answer = Answer {
            target,
            outcome,
            quota,
            hold,
        };
        let (learned, told) = {
            let mut s = self.lock();
            let learned = s.answered(&permit.sent, answer, Instant::now());
            if learned.changed {
                s.wake_heads();
            }
            self.publish(&s);
            (learned, self.check_fit(&mut s))
        };
        self.tell_service(permit.sent.endpoint, learned.service);
        self.tell_cut(permit.sent.endpoint, &learned);
        self.tell(told);
        learned.charged
    }

    /// Logs a pace cut by a shared 429: at info the first time its scope is limited.
    fn tell_cut(&self, endpoint: Endpoint, learned: &Learned) {
        let Some(cut) = learned.cut else { return };
        let Event::Cut(rate) = cut.event else { return };
        let tenant = self.shared.tenant.as_str();
        let pause_ms = cut.pause.map_or(0, millis);
        let scope = if cut.charged == Charged::Token {
            "token"
        } else {
            endpoint.as_str()
        };
        if cut.was.is_none() {
            tracing::info!(
                tenant,
                scope,
                rate = format!("{rate:.2}"),
                pause_ms,
                "the provider rate-limits this token (HTTP 429): calls of this scope are paced from now on"
            );
        } else {
            tracing::debug!(
                tenant,
                scope,
                rate = format!("{rate:.2}"),
                pause_ms,
                "HTTP 429: pace lowered"
            );
        }
    }

    /// Logs an endpoint going out of service or coming back.
    fn tell_service(&self, endpoint: Endpoint, (change, down): (Change, Option<outage::Down>)) {
        let tenant = self.shared.tenant.as_str();
        let endpoint = endpoint.as_str();
        match (change, down) {
            (Change::Entered, Some(d)) => tracing::warn!(
                tenant,
                endpoint,
                next_probe_in_ms = millis(d.cooldown),
                "the provider fails every call of this endpoint (5xx, timeouts or refused connections, no answer between): its calls are paused and one call asks after a cool-down that doubles while it fails; values are kept until their max_age"
            ),
            (Change::ProbeFailed, Some(d)) => tracing::debug!(
                tenant,
                endpoint,
                next_probe_in_ms = millis(d.cooldown),
                "the endpoint's outage goes on: its probe failed"
            ),
            (Change::Lifted, _) => tracing::info!(
                tenant,
                endpoint,
                "the endpoint answers again: its calls resume, a few at first"
            ),
            _ => {}
        }
    }

    /// A failed call of `endpoint` asks to be tried again: whether the endpoint's retry budget
    /// allows it now (if so, it is counted).
    pub fn may_retry(&self, endpoint: Endpoint) -> bool {
        let mut s = self.lock();
        let may = s.may_retry(endpoint, Instant::now());
        if !may {
            self.publish(&s);
        }
        may
    }

    /// Records what `name` (a collector) needs of the token; `None` when it stops.
    pub fn set_demand(&self, name: &'static str, demand: Option<Demand>) {
        let told = {
            let mut s = self.lock();
            if !s.fleet.set(name, demand) {
                return;
            }
            self.publish(&s);
            self.check_fit(&mut s)
        };
        self.tell(told);
    }

    /// Each target's refresh period in intervals while the fleet does not fit its rate limit
    /// (`None` while it fits): ceil(demand / allowed rate).
    pub fn refresh_intervals(&self) -> Option<u64> {
        self.lock().fleet.refresh_intervals()
    }

    /// The refresh period the operator was last told of (`None`: that the fleet fits).
    #[cfg(test)]
    fn told(&self) -> Option<u64> {
        self.lock().fleet.told()
    }

    /// When the first pause the provider asked for ends (the token's, or one endpoint's), if
    /// one is running.
    pub fn resumes_at(&self) -> Option<Instant> {
        let s = self.lock();
        let now = Instant::now();
        std::iter::once(s.token.resumes_at(now))
            .chain(s.ways.values().map(|w| w.control.resumes_at(now)))
            .flatten()
            .min()
    }

    /// When the next probe of an endpoint in an outage may go (the soonest, if several are
    /// out and none has a probe on its way).
    pub fn next_probe_at(&self) -> Option<Instant> {
        self.lock()
            .ways
            .values()
            .filter_map(|w| w.outage.down())
            .filter(|d| !d.probing())
            .map(|d| d.next_probe())
            .min()
    }

    /// The rate the pacer allows the token now (`None`: unlimited), for tests and the landing
    /// page.
    pub fn allowed(&self) -> Option<f64> {
        self.lock().allowed()
    }

    /// Each endpoint's pace as it stands, for the landing page.
    pub fn endpoints(&self) -> Vec<EndpointPace> {
        endpoint_paces(&self.lock(), Instant::now())
    }

    /// At most `limit` targets backing off on their own now: endpoint, target, until when,
    /// soonest first.
    #[cfg(test)]
    fn backing_off(&self, limit: usize) -> Vec<(Endpoint, String, Instant)> {
        self.lock().targets.list_own(Instant::now(), limit)
    }

    /// What this pacer has learned and must still honour, to keep across a restart
    /// ([`resume`]): plain data, instants as Unix times.
    pub fn keep(&self) -> KeptPacer {
        self.lock().keep(Clocks::now())
    }

    /// Takes back what an earlier process of this token kept ([`Pacer::keep`]), before its
    /// first call: the paces start at their kept rate, the pauses, outages and back-offs still
    /// in force go on; `known` are the endpoints this version calls.
    pub fn resume(&self, kept: &KeptPacer, known: &[Endpoint]) -> resume::Resumed {
        let mut s = self.lock();
        let resumed = s.resume(kept, known, Clocks::now());
        s.wake_heads();
        self.publish(&s);
        resumed
    }

    /// Takes a reloaded breaker policy and forgets the targets a reload removed: only those
    /// `keep` names stay on record, circuits and 429s alike. Returns the open circuits per
    /// endpoint that has had one.
    pub fn reconfigure_targets(
        &self,
        breaker: BreakerPolicy,
        keep: impl Fn(&TargetKey) -> bool,
    ) -> Vec<(Endpoint, usize)> {
        let mut s = self.lock();
        let open = s.targets.reconfigure(breaker, keep);
        self.publish(&s);
        open
    }

    /// Whether a call for `key` may go out now, as its circuit says
    /// ([`Targets::admit`]).
    pub fn admit_circuit(&self, key: &TargetKey, now: Instant) -> Result<(), breaker::Open> {
        self.lock().targets.admit(key, now)
    }

    /// An admitted call of `key` ended without an outcome for its circuit
    /// ([`Targets::abandon`]).
    pub fn abandon_circuit(&self, key: &TargetKey) {
        self.lock().targets.abandon(key);
    }

    /// The outcome of an admitted call of `key`, for its circuit; the open circuits of its
    /// endpoint now ([`Targets::record`]).
    pub fn record_circuit(
        &self,
        key: &TargetKey,
        outcome: Result<(), FailureReason>,
        now: Instant,
    ) -> usize {
        self.lock().targets.record(key, outcome, now)
    }

    /// The circuit of `key` as it stands.
    pub fn circuit(&self, key: &TargetKey) -> breaker::Circuit {
        self.lock().targets.circuit(key)
    }

    /// Puts the current figures on the tenant's series.
    fn publish(&self, s: &State) {
        let t = &self.shared.observer;
        let now = Instant::now();
        t.set_pacer(&self.shared.tenant, s.allowed(), s.demand(), s.paused(now));
        t.set_endpoint_paces(&self.shared.tenant, &endpoint_paces(s, now));
    }

    /// Compares the fleet's needs with the allowed rate; what to tell if the fit changed and
    /// has held long enough.
    fn check_fit(&self, s: &mut State) -> Option<Told> {
        let now = Instant::now();
        s.targets.forget_now(now);
        let f = s.overload();
        let allowed = s.allowed();
        s.fleet.check(now, f, allowed)
    }

    fn tell(&self, told: Option<Told>) {
        let tenant = self.shared.tenant.as_str();
        match told {
            Some(Told::Over {
                intervals,
                needed,
                allowed,
                fitting,
            }) => tracing::warn!(
                tenant,
                needed_rps = format!("{needed:.2}"),
                allowed_rps = format!("{allowed:.2}"),
                refreshed_every_intervals = intervals,
                intervals_that_fit = %fitting,
                "the provider's rate limit is below what the tenant's targets need: each is refreshed every few intervals, oldest first, and keeps its values until then (lengthen the intervals to those named, split the accounts over more tokens, or raise the limit)"
            ),
            Some(Told::FitsAgain { needed, allowed }) => tracing::info!(
                tenant,
                needed_rps = format!("{needed:.2}"),
                allowed_rps = format!("{allowed:.2}"),
                "the tenant's targets fit the provider's rate limit again: each is refreshed every interval"
            ),
            None => {}
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Each endpoint's pace in `s` at `now`.
fn endpoint_paces(s: &State, now: Instant) -> Vec<EndpointPace> {
    s.ways
        .iter()
        .map(|(e, w)| EndpointPace {
            endpoint: *e,
            allowed: w.control.allowed(),
            paused: w.control.paused(now),
            backing_off: s.targets.own(*e),
            outage: w.outage.down().map(|d| OutageView {
                since: unix(d.since, now),
                next_probe: unix(d.next_probe(), now),
                probing: d.probing(),
            }),
            window: w.slow_start.window(),
            retries_refused: w.retries_refused,
        })
        .collect()
}

/// `at` as seconds since the epoch, to the millisecond (so that publishing the same instant
/// again reads the same).
fn unix(at: Instant, now: Instant) -> f64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let offset = if at >= now {
        at.duration_since(now).as_secs_f64()
    } else {
        -now.duration_since(at).as_secs_f64()
    };
    ((wall + offset) * 1000.0).round() / 1000.0
}

impl Permit {
    /// When the call went out.
    pub fn sent_at(&self) -> Instant {
        self.sent.at
    }

    /// The call's place in the queue, to keep when it comes back after a 429.
    pub fn place(&self) -> u64 {
        self.place
    }
}

#[cfg(test)]
mod tests;
