//! The pacer: one per token (tenant), and every call of that token goes through it. It admits a
//! call when a connection slot is free (`api.concurrency`), the provider has not paused the
//! token, its stated quota is not used up, and the learned rate (or the configured
//! `rate_limit`) has a slot for it ([`control`]). Waiting calls are served oldest data first,
//! whichever collector of the tenant they belong to (each call carries when its target was last
//! fetched: its [`Rank`]), then in the order they came; urgent ones (the first fetch of a
//! target, which a `/probe` may be waiting for) go before all the others. A call that cannot be admitted before its deadline is
//! refused, saying whether the token's pace was the reason ([`Denied::paced`]).
//!
//! The pacer outlives a reload that keeps its token and address, so what it learned stays. It
//! also compares what the tenant's collectors need ([`Pacer::set_demand`]) with what the
//! provider allows, and tells the operator, once per change, when the fleet does not fit.

pub mod control;
pub mod headers;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::collector::CollectorName;
use crate::tenant::TenantName;
use crate::upstream::observe::Observer;
use control::{Control, Event};
use headers::QuotaInfo;

/// What a collector asks of the token: calls per run, once per interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Demand {
    pub calls: u64,
    pub interval: Duration,
}

impl Demand {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.interval.as_secs_f64().max(1e-3)
    }
}

/// How the fleet compares with what the provider allows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fit {
    Fits,
    /// Each target is refreshed every this many intervals.
    Over(u64),
}

/// When the target of a call was last fetched successfully (`None`: never): the older, the
/// sooner its turn.
pub type Rank = Option<Instant>;

/// One urgent call waiting for its turn.
#[derive(Debug)]
struct Waiter {
    id: u64,
    notify: Arc<Notify>,
}

/// Where a waiting call stands: the urgent queue, or its place among the others.
#[derive(Clone, Copy, Debug)]
enum Lane {
    Urgent,
    Ranked(Rank),
}

#[derive(Debug)]
struct State {
    control: Control,
    concurrency: usize,
    in_flight: usize,
    /// Urgent callers, first come, first served.
    urgent: VecDeque<Waiter>,
    /// The others, oldest data first, then in the order they came.
    ranked: BTreeMap<(Rank, u64), Arc<Notify>>,
    next_id: u64,
    /// Calls admitted so far: a call's sequence number says which answers are newer.
    seq: u64,
    demand: BTreeMap<CollectorName, Demand>,
    /// The fit now (with hysteresis): how long values are kept follows it at once.
    fit: Fit,
    /// Since when `fit` has held.
    fit_since: Instant,
    /// The fit as last told to the operator: told once it has held for the longest interval of
    /// the tenant's collectors, so the first runs, while the pacer is still learning, say
    /// nothing they would take back.
    told: Fit,
    /// A call was refused for want of a turn since the last one admitted: demand the pace does
    /// not meet, even with no call waiting (its run will come back for it).
    backlogged: bool,
    /// How long answers take (an average of the recent ones), seconds: a paced call is not
    /// started when less than twice that is left before its deadline, as it would only be cut.
    latency: f64,
}

impl State {
    fn head(&self) -> Option<u64> {
        match self.urgent.front() {
            Some(w) => Some(w.id),
            None => self.ranked.keys().next().map(|(_, id)| *id),
        }
    }

    fn waiting(&self) -> bool {
        !self.urgent.is_empty() || !self.ranked.is_empty()
    }

    fn wake_head(&self) {
        match self.urgent.front() {
            Some(w) => w.notify.notify_one(),
            None => {
                if let Some(n) = self.ranked.values().next() {
                    n.notify_one();
                }
            }
        }
    }

    fn enqueue(&mut self, lane: Lane, id: u64, notify: Arc<Notify>) {
        match lane {
            Lane::Urgent => self.urgent.push_back(Waiter { id, notify }),
            Lane::Ranked(rank) => {
                self.ranked.insert((rank, id), notify);
            }
        }
    }

    fn dequeue(&mut self, lane: Lane, id: u64) {
        match lane {
            Lane::Urgent => self.urgent.retain(|w| w.id != id),
            Lane::Ranked(rank) => {
                self.ranked.remove(&(rank, id));
            }
        }
    }

    /// Moves the control's clocks on, describing the gate from now on.
    fn tick(&mut self, now: Instant) {
        let active = self.waiting() || self.in_flight > 0 || self.backlogged;
        let saturated = (self.waiting() || self.backlogged) && self.in_flight < self.concurrency;
        self.control.tick(now, active, saturated);
    }

    /// Whether a call starting at `at` has time left before `deadline`: while the pacer holds
    /// calls back, at least twice the recent answer time (at least 5 ms, at most 2 s), so that
    /// a call let out at the last moment is not merely cut by the deadline.
    fn time_for(&self, at: Instant, deadline: Option<Instant>) -> bool {
        let Some(d) = deadline else {
            return true;
        };
        if !self.control.limiting(at) {
            return at <= d;
        }
        let margin = Duration::from_secs_f64((2.0 * self.latency).clamp(0.005, 2.0));
        at.checked_add(margin).is_some_and(|end| end <= d)
    }

    /// A call was refused before its deadline; `paced` when the pace (not the connection
    /// slots) held it back.
    fn refused(&mut self, paced: bool) {
        if paced {
            self.tick(Instant::now());
            self.backlogged = true;
        }
    }

    fn demand(&self) -> f64 {
        self.demand.values().map(Demand::rate).sum()
    }

    /// Demand over the allowed rate: above 1 the fleet does not fit.
    fn overload(&self) -> f64 {
        match self.control.allowed() {
            Some(allowed) if allowed > 0.0 => self.demand() / allowed,
            _ => 0.0,
        }
    }

    /// The fit now, with hysteresis so that a learned rate moving by a few percent around a
    /// boundary does not flip it: the fleet stops fitting above 1.0 and fits again below 0.9;
    /// the refresh period moves when the overload has clearly passed a whole number.
    fn fit_now(&self) -> Fit {
        let f = self.overload();
        match self.fit {
            Fit::Fits if f > 1.0 => Fit::Over(f.ceil() as u64),
            Fit::Over(_) if f < 0.9 => Fit::Fits,
            Fit::Over(k) => {
                let k = k as f64;
                if f > k * 1.05 || f < (k - 1.0) * 0.95 {
                    Fit::Over(f.ceil().max(2.0) as u64)
                } else {
                    Fit::Over(k as u64)
                }
            }
            fits => fits,
        }
    }
}

/// What to tell the operator after a change, said outside the lock.
#[derive(Debug)]
enum Told {
    Over {
        intervals: u64,
        needed: f64,
        allowed: f64,
        fitting: String,
    },
    FitsAgain {
        needed: f64,
        allowed: f64,
    },
}

/// Why a call was not admitted before its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The token's pace (rate, pause or quota) held it back; otherwise only the connection
    /// slots were all taken.
    pub paced: bool,
}

/// How an admitted call ended, as the pacer learns from it.
#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    Success,
    /// HTTP 429, with the `Retry-After` it carried.
    Throttled(Option<Duration>),
    /// Anything else (another status, a timeout, a broken connection).
    Other,
}

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
    seq: u64,
    sent_at: Instant,
    place: u64,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.pacer.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.tick(Instant::now());
        s.wake_head();
    }
}

/// A place in the queue; leaving it (admitted, refused or dropped) passes the turn on.
struct Ticket<'a> {
    pacer: &'a Pacer,
    id: u64,
    notify: Arc<Notify>,
    lane: Lane,
    queued: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.queued {
            return;
        }
        let mut s = self.pacer.lock();
        let was_head = s.head() == Some(self.id);
        s.dequeue(self.lane, self.id);
        if was_head {
            s.wake_head();
        }
        s.tick(Instant::now());
    }
}

impl Pacer {
    /// A pacer for `tenant` letting `concurrency` calls through at once, at most `ceiling`
    /// requests per second when set.
    pub fn new(
        tenant: TenantName,
        concurrency: usize,
        ceiling: Option<f64>,
        observer: Arc<dyn Observer>,
    ) -> Pacer {
        let pacer = Pacer {
            shared: Arc::new(Shared {
                tenant,
                observer,
                state: Mutex::new(State {
                    control: Control::new(Instant::now(), ceiling),
                    concurrency: concurrency.max(1),
                    in_flight: 0,
                    urgent: VecDeque::new(),
                    ranked: BTreeMap::new(),
                    next_id: 0,
                    seq: 0,
                    demand: BTreeMap::new(),
                    fit: Fit::Fits,
                    fit_since: Instant::now(),
                    told: Fit::Fits,
                    backlogged: false,
                    latency: 0.0,
                }),
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

    /// Whether `other` is this very pacer (not one of the same tenant built anew).
    pub fn same(&self, other: &Pacer) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Takes a reloaded `api.concurrency` and `rate_limit`; what was learned stays.
    pub fn configure(&self, concurrency: usize, ceiling: Option<f64>) {
        let told = {
            let mut s = self.lock();
            s.concurrency = concurrency.max(1);
            s.control.set_ceiling(ceiling);
            s.tick(Instant::now());
            s.wake_head();
            self.publish(&s);
            self.check_fit(&mut s)
        };
        self.tell(told);
    }

    /// Waits for this call's turn, at most until `deadline`. `urgent` calls go before the
    /// others, which go oldest `rank` first, then in the order they first came: a call back
    /// after a 429 passes its `place` (from [`Permit::place`]) and keeps its turn among equals.
    pub async fn admit(
        &self,
        urgent: bool,
        rank: Rank,
        place: Option<u64>,
        deadline: Option<Instant>,
    ) -> Result<Permit, Denied> {
        let started = Instant::now();
        let mut ticket = {
            let mut s = self.lock();
            s.tick(started);
            let id = place.unwrap_or_else(|| {
                s.next_id += 1;
                s.next_id
            });
            if !s.waiting()
                && s.in_flight < s.concurrency
                && s.control.ready_at(started) <= started
                && s.time_for(started, deadline)
            {
                return Ok(self.grant(&mut s, started, started, id));
            }
            let notify = Arc::new(Notify::new());
            let lane = if urgent {
                Lane::Urgent
            } else {
                Lane::Ranked(rank)
            };
            s.enqueue(lane, id, notify.clone());
            s.tick(started);
            Ticket {
                pacer: self,
                id,
                notify,
                lane,
                queued: true,
            }
        };
        loop {
            let now = Instant::now();
            let wait_until = {
                let mut s = self.lock();
                s.tick(now);
                if s.head() == Some(ticket.id) && s.in_flight < s.concurrency {
                    let at = s.control.ready_at(now);
                    if at <= now && s.time_for(now, deadline) {
                        s.dequeue(ticket.lane, ticket.id);
                        ticket.queued = false;
                        let permit = self.grant(&mut s, now, started, ticket.id);
                        s.wake_head();
                        return Ok(permit);
                    }
                    if !s.time_for(at, deadline) {
                        // Nothing will let it through in time: refused now, not at the deadline.
                        let paced = s.control.limiting(now);
                        s.refused(paced);
                        tracing::trace!(
                            tenant = self.shared.tenant.as_str(),
                            next_turn_ms =
                                u64::try_from(at.saturating_duration_since(now).as_millis())
                                    .unwrap_or(u64::MAX),
                            "call refused: the pacer has no turn for it before its deadline"
                        );
                        drop(s);
                        drop(ticket);
                        return Err(self.refuse(paced, started));
                    }
                    Some(at)
                } else {
                    None
                }
            };
            // Past the deadline, and its turn did not come above: refused.
            if deadline.is_some_and(|d| now >= d) {
                let paced = {
                    let mut s = self.lock();
                    let paced = s.control.limiting(now);
                    s.refused(paced);
                    paced
                };
                drop(ticket);
                return Err(self.refuse(paced, started));
            }
            let timer = async {
                match (wait_until, deadline) {
                    (Some(a), Some(d)) => tokio::time::sleep_until(a.min(d)).await,
                    (Some(a), None) => tokio::time::sleep_until(a).await,
                    (None, Some(d)) => tokio::time::sleep_until(d).await,
                    (None, None) => std::future::pending().await,
                }
            };
            tokio::select! {
                () = ticket.notify.notified() => {}
                () = timer => {}
            }
        }
    }

    /// Admits a call now (under the lock); `place` is its place in the queue.
    fn grant(&self, s: &mut State, now: Instant, started: Instant, place: u64) -> Permit {
        let limiting = s.control.limiting(now);
        s.in_flight += 1;
        s.seq += 1;
        s.control.admitted(now);
        s.backlogged = false;
        s.tick(now);
        if limiting {
            self.waited(now.saturating_duration_since(started));
        }
        self.publish(s);
        Permit {
            pacer: self.clone(),
            seq: s.seq,
            sent_at: now,
            place,
        }
    }

    fn refuse(&self, paced: bool, started: Instant) -> Denied {
        if paced {
            self.waited(started.elapsed());
        }
        Denied { paced }
    }

    fn waited(&self, d: Duration) {
        if !d.is_zero() {
            self.shared
                .observer
                .observe_pacer_wait(&self.shared.tenant, d);
        }
    }

    /// Learns from the answer to an admitted call: its outcome and its quota fields.
    pub fn observe(&self, permit: &Permit, outcome: Outcome, quota: &QuotaInfo) {
        let now = Instant::now();
        let (event, told) = {
            let mut s = self.lock();
            s.tick(now);
            let sent_after = s.seq.saturating_sub(permit.seq);
            let mut changed = false;
            if !quota.is_empty() {
                changed |= s.control.quota(now, quota, permit.seq, sent_after);
            }
            let event = match outcome {
                Outcome::Success => {
                    s.control.succeeded(now);
                    let took = now.saturating_duration_since(permit.sent_at).as_secs_f64();
                    s.latency = if s.latency == 0.0 {
                        took
                    } else {
                        0.8 * s.latency + 0.2 * took
                    };
                    None
                }
                Outcome::Throttled(retry_after) => {
                    // A 429 that names no wait but says the quota is used up waits for its reset.
                    let wait = retry_after.or(match (quota.remaining, quota.reset) {
                        (Some(0), Some(reset)) => Some(reset),
                        _ => None,
                    });
                    let was = s.control.rate();
                    let e = s.control.throttled(now, permit.sent_at, wait);
                    changed = true;
                    Some((e, was, wait))
                }
                Outcome::Other => None,
            };
            if changed {
                s.wake_head();
            }
            self.publish(&s);
            let told = self.check_fit(&mut s);
            (event, told)
        };
        if let Some((Event::Cut(rate), was, wait)) = event {
            let tenant = self.shared.tenant.as_str();
            let pause_ms = wait.map_or(0, |w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX));
            if was.is_none() {
                tracing::info!(
                    tenant,
                    rate = format!("{rate:.2}"),
                    pause_ms,
                    "the provider rate-limits this token (HTTP 429): calls are paced from now on"
                );
            } else {
                tracing::debug!(
                    tenant,
                    rate = format!("{rate:.2}"),
                    pause_ms,
                    "HTTP 429: pace lowered"
                );
            }
        }
        self.tell(told);
    }

    /// Records what collector `name` needs of the token; `None` when it stops.
    pub fn set_demand(&self, name: CollectorName, demand: Option<Demand>) {
        let told = {
            let mut s = self.lock();
            match demand {
                Some(d) => {
                    if s.demand.get(&name) == Some(&d) {
                        return;
                    }
                    s.demand.insert(name, d);
                }
                None => {
                    if s.demand.remove(&name).is_none() {
                        return;
                    }
                }
            }
            self.publish(&s);
            self.check_fit(&mut s)
        };
        self.tell(told);
    }

    /// Each target's refresh period in intervals while the fleet does not fit its rate limit
    /// (`None` while it fits): ceil(demand / allowed rate).
    pub fn refresh_intervals(&self) -> Option<u64> {
        match self.lock().fit {
            Fit::Over(k) => Some(k),
            Fit::Fits => None,
        }
    }

    /// The refresh period the operator was last told of (`None`: that the fleet fits).
    #[cfg(test)]
    fn told(&self) -> Option<u64> {
        match self.lock().told {
            Fit::Over(k) => Some(k),
            Fit::Fits => None,
        }
    }

    /// When the pause the provider asked for ends, if one is running.
    pub fn resumes_at(&self) -> Option<Instant> {
        self.lock().control.resumes_at(Instant::now())
    }

    /// The rate the pacer allows now (`None`: unlimited), for tests and the landing page.
    pub fn allowed(&self) -> Option<f64> {
        self.lock().control.allowed()
    }

    /// Puts the current figures on the tenant's series.
    fn publish(&self, s: &State) {
        let t = &self.shared.observer;
        let now = Instant::now();
        t.set_pacer(
            &self.shared.tenant,
            s.control.allowed(),
            s.demand(),
            s.control.paused(now),
        );
    }

    /// Compares the fleet's needs with the allowed rate; what to tell if the fit changed and
    /// has held long enough.
    fn check_fit(&self, s: &mut State) -> Option<Told> {
        let now = Instant::now();
        let fit = s.fit_now();
        if fit != s.fit {
            s.fit = fit;
            s.fit_since = now;
        }
        let settle = s
            .demand
            .values()
            .map(|d| d.interval)
            .max()
            .unwrap_or(Duration::ZERO);
        if fit == s.told || now.saturating_duration_since(s.fit_since) < settle {
            return None;
        }
        let was = std::mem::replace(&mut s.told, fit);
        if fit == Fit::Fits && was == Fit::Fits {
            return None;
        }
        let allowed = s.control.allowed();
        let needed = s.demand();
        let allowed = allowed.unwrap_or(f64::INFINITY);
        Some(match fit {
            Fit::Over(intervals) => {
                let f = needed / allowed;
                let fitting = s
                    .demand
                    .iter()
                    .map(|(name, d)| {
                        let secs = (d.interval.as_secs_f64() * f).ceil();
                        format!(
                            "{name}={}",
                            humantime::format_duration(Duration::from_secs_f64(secs))
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(",");
                Told::Over {
                    intervals,
                    needed,
                    allowed,
                    fitting,
                }
            }
            Fit::Fits => Told::FitsAgain { needed, allowed },
        })
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

impl Permit {
    /// When the call went out.
    pub fn sent_at(&self) -> Instant {
        self.sent_at
    }

    /// The call's place in the queue, to keep when it comes back after a 429.
    pub fn place(&self) -> u64 {
        self.place
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(concurrency: usize, ceiling: Option<f64>) -> Pacer {
        Pacer::new(
            TenantName::default(),
            concurrency,
            ceiling,
            Arc::new(crate::upstream::observe::Nothing),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn calls_beyond_the_concurrency_wait_for_a_slot_and_time_out_without_a_pace() {
        let p = pacer(2, None);
        let a = p.admit(false, None, None, None).await.unwrap();
        let _b = p.admit(false, None, None, None).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        let denied = p
            .admit(false, None, None, Some(deadline))
            .await
            .err()
            .unwrap();
        assert_eq!(denied, Denied { paced: false });
        assert_eq!(Instant::now(), deadline);
        drop(a);
        assert!(
            p.admit(false, None, None, Some(Instant::now()))
                .await
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_ceiling_spaces_calls_and_refuses_at_once_what_cannot_go_before_the_deadline() {
        let p = pacer(8, Some(10.0));
        let t0 = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..5 {
            let permit = p.admit(false, None, None, None).await.unwrap();
            sent.push(permit.sent_at() - t0);
        }
        // 100 ms apart (the first catches up one slot).
        assert!(sent[4] >= Duration::from_millis(300), "{sent:?}");
        let d = Instant::now() + Duration::from_millis(10);
        let before = Instant::now();
        assert_eq!(
            p.admit(false, None, None, Some(d)).await.err(),
            Some(Denied { paced: true })
        );
        assert_eq!(
            Instant::now(),
            before,
            "refused without waiting for the deadline"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn urgent_calls_go_first_then_the_oldest_data_then_the_order_of_arrival() {
        let p = pacer(1, Some(10.0));
        let first = p.admit(false, None, None, None).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (p, order) = (p.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = p.admit(false, None, None, None).await.unwrap();
                order.lock().unwrap().push(i);
            }));
            tokio::task::yield_now().await;
        }
        // Targets fetched before (ranked): after the ones never fetched, oldest first.
        let t0 = Instant::now();
        for (i, age) in [(10, 5), (11, 9), (12, 1)] {
            let (p, order) = (p.clone(), order.clone());
            let rank = Some(t0 - Duration::from_secs(age));
            tasks.push(tokio::spawn(async move {
                let _permit = p.admit(false, rank, None, None).await.unwrap();
                order.lock().unwrap().push(i);
            }));
            tokio::task::yield_now().await;
        }
        let (p2, order2) = (p.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = p2.admit(true, None, None, None).await.unwrap();
            order2.lock().unwrap().push(99);
        }));
        tokio::task::yield_now().await;
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![99, 0, 1, 2, 3, 4, 11, 10, 12]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_back_after_a_429_keeps_its_place_among_equals() {
        let p = pacer(1, Some(10.0));
        let first = p.admit(false, None, None, None).await.unwrap();
        let place = first.place();
        drop(first);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let held = p.admit(false, None, None, None).await.unwrap();
        for i in 0..3 {
            let (p, order) = (p.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = p.admit(false, None, None, None).await.unwrap();
                order.lock().unwrap().push(i);
            }));
            tokio::task::yield_now().await;
        }
        // The first call comes back (its answer was 429): it goes before the later ones.
        let (p2, order2) = (p.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = p2.admit(false, None, Some(place), None).await.unwrap();
            order2.lock().unwrap().push(99);
        }));
        tokio::task::yield_now().await;
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![99, 0, 1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_call_is_not_started_when_its_deadline_leaves_no_time_for_an_answer() {
        let p = pacer(4, Some(10.0));
        let permit = p.admit(false, None, None, None).await.unwrap();
        // Answers take 300 ms.
        tokio::time::advance(Duration::from_millis(300)).await;
        p.observe(&permit, Outcome::Success, &QuotaInfo::default());
        drop(permit);
        // The next turn is now, but only 100 ms are left: not started, deferred.
        let d = Instant::now() + Duration::from_millis(100);
        assert_eq!(
            p.admit(false, None, None, Some(d)).await.err(),
            Some(Denied { paced: true })
        );
        let d = Instant::now() + Duration::from_secs(1);
        assert!(p.admit(false, None, None, Some(d)).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_pauses_every_call_of_the_token() {
        let p = pacer(4, None);
        let permit = p.admit(false, None, None, None).await.unwrap();
        p.observe(
            &permit,
            Outcome::Throttled(Some(Duration::from_secs(3))),
            &QuotaInfo::default(),
        );
        drop(permit);
        let t = Instant::now();
        assert!(p.resumes_at().is_some());
        let _next = p.admit(false, None, None, None).await.unwrap();
        assert!(Instant::now() - t >= Duration::from_secs(3));
        // Within a deadline shorter than the pause: refused at once, as paced.
        p.observe(
            &_next,
            Outcome::Throttled(Some(Duration::from_secs(3))),
            &QuotaInfo::default(),
        );
        let d = Instant::now() + Duration::from_secs(1);
        assert_eq!(
            p.admit(false, None, None, Some(d)).await.err(),
            Some(Denied { paced: true })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_waiter_passes_its_turn_on() {
        let p = pacer(1, None);
        let held = p.admit(false, None, None, None).await.unwrap();
        let waiting = {
            let p = p.clone();
            tokio::spawn(async move { p.admit(false, None, None, None).await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        let behind = {
            let p = p.clone();
            tokio::spawn(async move { p.admit(false, None, None, None).await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        waiting.abort();
        drop(held);
        assert!(behind.await.unwrap().is_ok());
        let s = p.lock();
        assert!(!s.waiting());
        assert_eq!(s.in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_operator_is_told_of_a_fit_once_it_has_held_for_an_interval() {
        let p = pacer(1, Some(10.0));
        let d = |calls| {
            Some(Demand {
                calls,
                interval: Duration::from_secs(30),
            })
        };
        p.set_demand(CollectorName::DeliveryAccount, d(600));
        assert_eq!(p.refresh_intervals(), Some(2), "kept values follow at once");
        assert_eq!(
            p.told(),
            None,
            "not told yet: the pacer may still be learning"
        );
        // A blip back under the limit within the interval is never told.
        tokio::time::advance(Duration::from_secs(10)).await;
        p.set_demand(CollectorName::DeliveryAccount, d(100));
        tokio::time::advance(Duration::from_secs(10)).await;
        p.set_demand(CollectorName::DeliveryAccount, d(600));
        assert_eq!(p.told(), None);
        tokio::time::advance(Duration::from_secs(31)).await;
        p.set_demand(CollectorName::DeliveryAccount, d(601));
        assert_eq!(p.told(), Some(2), "held for an interval: told");
        p.set_demand(CollectorName::DeliveryAccount, d(100));
        tokio::time::advance(Duration::from_secs(31)).await;
        p.set_demand(CollectorName::DeliveryAccount, d(101));
        assert_eq!(p.told(), None, "fits again, and told so");
    }

    #[test]
    fn the_fit_flips_with_hysteresis_and_names_the_refresh_period() {
        let p = pacer(1, Some(10.0));
        let d = |calls| {
            Some(Demand {
                calls,
                interval: Duration::from_secs(10),
            })
        };
        p.set_demand(CollectorName::DeliveryAccount, d(50));
        assert_eq!(p.refresh_intervals(), None, "5 per second of 10 fits");
        p.set_demand(CollectorName::DeliveryAccount, d(250));
        assert_eq!(p.refresh_intervals(), Some(3), "25 per second of 10");
        p.set_demand(CollectorName::DeliveryAccount, d(95));
        assert_eq!(
            p.refresh_intervals(),
            Some(2),
            "9.5 per second: not yet below 0.9"
        );
        p.set_demand(CollectorName::DeliveryAccount, d(80));
        assert_eq!(p.refresh_intervals(), None);
        p.set_demand(CollectorName::DeliveryAccount, None);
        assert_eq!(p.lock().demand(), 0.0);
    }
}
