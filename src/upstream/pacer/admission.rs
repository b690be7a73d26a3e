//! Admission: a call's turn. A call whose target backs off on its own, or whose endpoint is out
//! while its target was failing, is refused before it queues. Otherwise it goes at once when
//! nothing waits, a connection slot is free and both paces have a slot for it; else it queues
//! on its endpoint ([`Key`]: urgent first, then healthy targets before failing ones, oldest
//! data first, then in the order they came) and goes when it heads its queue, its endpoint has
//! a turn and its head is the first of all the heads with one. A call that cannot have a turn
//! before its deadline is refused at once, saying what held it ([`Denied`]).
//!
//! These are [`State`]'s moves, driven by the instants passed in: no clock, no lock, no I/O.
//! The shell ([`super::Pacer::admit`]) sleeps and wakes between them.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::outage::{self, Standing};
use super::state::{Key, Rank, State, TargetKey};
use crate::upstream::endpoint::Endpoint;

/// One call as the pacer sees it: its endpoint and target, its turn and its time.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    pub target: &'a TargetKey,
    /// Goes before the token's other waiting calls (a first fetch a probe may wait for).
    pub urgent: bool,
    pub rank: Rank,
    /// Its place from an earlier attempt ([`Permit::place`]): kept among equals after a 429.
    pub place: Option<u64>,
    pub deadline: Option<Instant>,
    /// What its target's last call did: whether its failure would be a sign of an outage.
    pub standing: Standing,
    /// Its target is failing (its last call failed, or this is a retry after a failure): it
    /// waits behind the calls of targets that are not, so that broken targets, which hold
    /// their slots until a timeout, never take the slots the healthy ones wait for.
    pub behind: bool,
    /// Its first attempt (not a retry, nor a call back after a 429): it earns the retry budget.
    pub first: bool,
}

#[cfg(test)]
impl<'a> Call<'a> {
    /// A first call of `target` with nothing known of it: not urgent, no rank, no place, no
    /// deadline. Tests set what they need on top.
    pub(super) fn of(target: &'a TargetKey) -> Call<'a> {
        Call {
            target,
            urgent: false,
            rank: None,
            place: None,
            deadline: None,
            standing: Standing::Unknown,
            behind: false,
            first: true,
        }
    }
}

/// Why a call was not admitted before its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The token's or the endpoint's pace (rate, pause or quota) held it back; otherwise only
    /// the connection slots were all taken, or its target's own back-off.
    pub paced: bool,
    /// Its target's own wait (after its own 429s) outlasts the deadline: nothing else held it.
    pub backing_off: bool,
    /// That target is known to be refused on its own, its neighbours succeeding.
    pub own: bool,
    /// How long its back-off had left, and the `Retry-After` its last 429 carried.
    pub left: Duration,
    pub told: Option<Duration>,
    /// The endpoint is in an outage ([`outage`]): since when, and when its next probe goes.
    pub outage: Option<outage::Down>,
}

impl Denied {
    pub(super) fn paced(paced: bool) -> Denied {
        Denied {
            paced,
            backing_off: false,
            own: false,
            left: Duration::ZERO,
            told: None,
            outage: None,
        }
    }

    pub(super) fn outage(down: outage::Down) -> Denied {
        Denied {
            outage: Some(down),
            ..Denied::paced(false)
        }
    }
}

/// An admitted call, as the pacer knows it until its answer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sent {
    pub(super) endpoint: Endpoint,
    /// Its sequence number among the token's admitted calls: which answers are newer.
    pub(super) seq: u64,
    pub(super) at: Instant,
    pub(super) standing: Standing,
}

/// A call admitted now.
#[derive(Clone, Copy, Debug)]
pub(super) struct Granted {
    pub(super) sent: Sent,
    /// Its place in the queue, kept if it comes back after a 429.
    pub(super) place: u64,
    /// How long a pace held it back, when one did.
    pub(super) waited: Option<Duration>,
}

/// A call come to the queue.
pub(super) enum Entry {
    Granted(Granted),
    /// It waits there under `key`, woken by `notify`; `paced` when a pace or a pause held it
    /// back as it queued (its wait is the pacer's even when the pause is over by its turn).
    Queued {
        key: Key,
        notify: Arc<Notify>,
        paced: bool,
    },
}

/// What a queued call is told when it looks again.
pub(super) enum Turn {
    Go(Granted),
    /// Wait for a wake-up, or at most until this instant (its deadline bounds it anyway).
    Wait(Option<Instant>),
    /// Refused; `next_turn` is how far its turn was when nothing would let it through in time.
    Refused {
        denied: Denied,
        next_turn: Option<Duration>,
    },
}

impl State {
    /// What a call meets before it queues: refused at once (its endpoint is out and its target
    /// was failing; its target backs off on its own, or past the deadline), or the instant its
    /// target's back-off ends, to sleep until.
    pub(super) fn before_queue(
        &self,
        call: &Call<'_>,
        now: Instant,
    ) -> Result<Option<Instant>, Denied> {
        // While the endpoint is out, a target that was failing before says nothing a probe
        // needs to know: it is not queued.
        if let Some(d) = self.down(call.target.0)
            && call.standing == Standing::Bad
        {
            return Err(Denied::outage(d));
        }
        let Some(b) = self.targets.backing_off(call.target, now) else {
            return Ok(None);
        };
        // A target refused on its own is not waited for within the run: its run (and the
        // publication of its neighbours' values) does not wait on it; it is tried again at the
        // first run after its back-off.
        if b.own || call.deadline.is_some_and(|d| b.until >= d) {
            return Err(Denied {
                backing_off: true,
                own: b.own,
                left: b.until.saturating_duration_since(now),
                told: b.told,
                ..Denied::paced(false)
            });
        }
        Ok(Some(b.until))
    }

    /// A call comes to its endpoint's queue at `now`: admitted at once when nothing waits and
    /// everything has room, else queued.
    pub(super) fn enter(&mut self, call: &Call<'_>, now: Instant) -> Entry {
        let endpoint = call.target.0;
        self.way(endpoint, now);
        self.tick(now);
        let id = call.place.unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id
        });
        if !self.waiting()
            && self.in_flight < self.concurrency
            && self.room(endpoint)
            && self.ready_at(endpoint, now) <= now
            && self.time_for(endpoint, now, call.deadline)
        {
            return Entry::Granted(self.grant(call, now, (now, false), id));
        }
        let paced = self.limiting(endpoint, now);
        let notify = Arc::new(Notify::new());
        let key = if call.urgent {
            (false, false, None, id)
        } else {
            (true, call.behind, call.rank, id)
        };
        self.way(endpoint, now).queue.insert(key, notify.clone());
        self.tick(now);
        Entry::Queued { key, notify, paced }
    }

    /// The queued call `key` looks again at `now`; it came at `started`, held back by a pace
    /// then when `paced`.
    pub(super) fn turn(
        &mut self,
        call: &Call<'_>,
        key: Key,
        (started, paced): (Instant, bool),
        now: Instant,
    ) -> Turn {
        let endpoint = call.target.0;
        self.tick(now);
        if let Some(d) = self.down(endpoint)
            && call.standing == Standing::Bad
        {
            return Turn::Refused {
                denied: Denied::outage(d),
                next_turn: None,
            };
        }
        let head = self.ways.get(&endpoint).and_then(|w| w.head()) == Some(key);
        let free = self.in_flight < self.concurrency;
        if head && free && !self.room(endpoint) {
            self.way(endpoint, now).window_held = true;
        }
        let wait = if head && free && self.room(endpoint) {
            match self.at_the_head(call, key, (started, paced), now) {
                Ok(wait) => wait,
                Err(turn) => return turn,
            }
        } else {
            None
        };
        // Past the deadline, and its turn did not come above: refused.
        if call.deadline.is_some_and(|d| now >= d) {
            let paced = self.limiting(endpoint, now);
            self.refused(endpoint, paced, now);
            let denied = self
                .down(endpoint)
                .map_or(Denied::paced(paced), Denied::outage);
            return Turn::Refused {
                denied,
                next_turn: None,
            };
        }
        Turn::Wait(wait)
    }

    /// The call `key` heads its endpoint's queue and a slot is free: it goes if its endpoint
    /// has a turn and no other endpoint's head goes first (`Err(Turn::Go)`), is refused if
    /// nothing will let it through in time, or waits (until when, if its turn is to come).
    fn at_the_head(
        &mut self,
        call: &Call<'_>,
        key: Key,
        queued: (Instant, bool),
        now: Instant,
    ) -> Result<Option<Instant>, Turn> {
        let endpoint = call.target.0;
        let at = self.ready_at(endpoint, now);
        if at <= now && self.next(now) == Some(key) && self.time_for(endpoint, now, call.deadline) {
            self.way(endpoint, now).queue.remove(&key);
            let granted = self.grant(call, now, queued, key.3);
            self.wake_heads();
            return Err(Turn::Go(granted));
        }
        let down = self.down(endpoint);
        if down.is_some_and(|d| d.probing()) || self.asking(endpoint) {
            // An outage's probe, or the call asking after a pause, is on its way: its answer
            // may let the call go.
            return Ok(None);
        }
        if !self.time_for(endpoint, at, call.deadline) {
            if let Some(d) = down {
                return Err(Turn::Refused {
                    denied: Denied::outage(d),
                    next_turn: None,
                });
            }
            // Nothing will let it through in time: refused now, not at the deadline.
            let paced = self.limiting(endpoint, now);
            self.refused(endpoint, paced, now);
            return Err(Turn::Refused {
                denied: Denied::paced(paced),
                next_turn: Some(at.saturating_duration_since(now)),
            });
        }
        // Its turn has come but another endpoint's head goes first: woken after.
        Ok((at > now).then_some(at))
    }

    /// Admits a call of `endpoint` now; `place` is its place in the queue, `queued` when it
    /// came and whether a pace held it back then.
    fn grant(
        &mut self,
        call: &Call<'_>,
        now: Instant,
        queued: (Instant, bool),
        place: u64,
    ) -> Granted {
        let endpoint = call.target.0;
        let (started, paced) = queued;
        let limiting = paced || self.limiting(endpoint, now);
        self.in_flight += 1;
        self.seq += 1;
        let seq = self.seq;
        self.token.admitted(now, seq);
        self.backlogged = false;
        let w = self.way(endpoint, now);
        w.in_flight += 1;
        w.backlogged = false;
        w.control.admitted(now, seq);
        w.outage.admitted(now, seq);
        if call.first {
            w.retries.sent(now);
        }
        self.tick(now);
        Granted {
            sent: Sent {
                endpoint,
                seq,
                at: now,
                standing: call.standing,
            },
            place,
            waited: limiting.then(|| now.saturating_duration_since(started)),
        }
    }

    /// A call of `endpoint` was refused before its deadline; `paced` when a pace (not the
    /// connection slots) held it back.
    fn refused(&mut self, endpoint: Endpoint, paced: bool, now: Instant) {
        if paced && self.down(endpoint).is_none() {
            self.tick(now);
            self.backlogged = true;
            if let Some(w) = self.ways.get_mut(&endpoint) {
                w.backlogged = true;
            }
        }
    }

    /// An admitted call ended (answered or not): its slots are free again.
    pub(super) fn release(&mut self, sent: &Sent, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(w) = self.ways.get_mut(&sent.endpoint) {
            w.in_flight = w.in_flight.saturating_sub(1);
            // An outage's probe, or the call asking after a pause, that ended without an
            // answer (its deadline, a shutdown) lets the next call ask.
            w.outage.abandoned(sent.seq);
            w.control.answered(sent.seq);
        }
        self.token.answered(sent.seq);
        self.tick(now);
    }

    /// A queued call left its queue without being admitted (refused, or dropped).
    pub(super) fn leave(&mut self, endpoint: Endpoint, key: Key, now: Instant) {
        if let Some(w) = self.ways.get_mut(&endpoint) {
            w.queue.remove(&key);
        }
        self.tick(now);
    }

    /// A failed call of `endpoint` asks to be tried again: whether the endpoint's retry budget
    /// allows it now (if so, it is counted; if not, the refusal is).
    pub(super) fn may_retry(&mut self, endpoint: Endpoint, now: Instant) -> bool {
        let w = self.way(endpoint, now);
        if w.retries.try_retry(now) {
            return true;
        }
        w.retries_refused = w.retries_refused.saturating_add(1);
        false
    }
}

#[cfg(test)]
mod tests {
    //! Admission as moves of the state at chosen instants: no runtime, no clock.

    use std::collections::BTreeMap;

    use super::*;

    const E: Endpoint = Endpoint::new("delivery_account");

    /// A token's state of `concurrency` slots and `ceiling`, its endpoints without a slow-start
    /// window (what the window does is `slow_start.rs`'s to test).
    fn state(now: Instant, concurrency: usize, ceiling: Option<f64>) -> State {
        let mut s = State::new(now, concurrency, ceiling, BTreeMap::new());
        s.slow_start = false;
        s
    }

    fn call(target: &TargetKey, deadline: Option<Instant>) -> Call<'_> {
        Call {
            deadline,
            ..Call::of(target)
        }
    }

    fn granted(entry: Entry) -> Granted {
        match entry {
            Entry::Granted(g) => g,
            Entry::Queued { .. } => panic!("queued, expected admitted at once"),
        }
    }

    #[test]
    fn a_call_goes_at_once_while_a_slot_is_free_and_otherwise_when_one_is_released() {
        let t0 = Instant::now();
        let mut s = state(t0, 1, None);
        let (a, b) = ((E, "a".to_owned()), (E, "b".to_owned()));
        let first = granted(s.enter(&call(&a, None), t0));
        assert_eq!((first.sent.seq, first.waited), (1, None));
        let Entry::Queued { key, paced, .. } = s.enter(&call(&b, None), t0) else {
            panic!("the only slot is taken: b queues");
        };
        assert!(!paced, "no pace held it back, only the slot");
        assert!(matches!(
            s.turn(&call(&b, None), key, (t0, paced), t0),
            Turn::Wait(None)
        ));
        let t1 = t0 + Duration::from_millis(30);
        s.release(&first.sent, t1);
        match s.turn(&call(&b, None), key, (t0, paced), t1) {
            Turn::Go(g) => assert_eq!((g.sent.seq, g.place, g.sent.at), (2, key.3, t1)),
            _ => panic!("the slot is free: b goes"),
        }
        assert!(s.ways[&E].queue.is_empty() && s.in_flight == 1);
    }

    /// On a pace of two calls a second, `a` goes at `t0` and `b`, due by `deadline`, queues
    /// behind it: `b`'s key and whether a pace held it back.
    fn behind_a_paced_call(
        s: &mut State,
        b: &TargetKey,
        deadline: Option<Instant>,
        t0: Instant,
    ) -> (Key, bool) {
        let a = (E, "a".to_owned());
        granted(s.enter(&call(&a, None), t0));
        let Entry::Queued { key, paced, .. } = s.enter(&call(b, deadline), t0) else {
            panic!("the pace has no turn now: b queues");
        };
        (key, paced)
    }

    #[test]
    fn a_call_the_pace_cannot_let_through_before_its_deadline_is_refused_at_once_as_paced() {
        let t0 = Instant::now();
        // Two calls a second: the next turn is half a second after the first call.
        let mut s = state(t0, 8, Some(2.0));
        let b = (E, "b".to_owned());
        let deadline = Some(t0 + Duration::from_millis(100));
        let (key, paced) = behind_a_paced_call(&mut s, &b, deadline, t0);
        assert!(paced);
        match s.turn(&call(&b, deadline), key, (t0, paced), t0) {
            Turn::Refused { denied, next_turn } => {
                assert!(denied.paced && denied.outage.is_none());
                let next = next_turn.expect("it says how far its turn was");
                assert!(next > Duration::from_millis(100), "{next:?}");
            }
            _ => panic!("refused now, not at its deadline"),
        }
        assert!(s.backlogged, "demand the pace does not meet is on record");
        s.leave(E, key, t0);
        assert!(s.ways[&E].queue.is_empty());
    }

    #[test]
    fn a_waiting_call_with_time_left_is_told_when_its_turn_comes() {
        let t0 = Instant::now();
        let mut s = state(t0, 8, Some(2.0));
        let b = (E, "b".to_owned());
        let deadline = Some(t0 + Duration::from_secs(5));
        let (key, paced) = behind_a_paced_call(&mut s, &b, deadline, t0);
        let Turn::Wait(Some(at)) = s.turn(&call(&b, deadline), key, (t0, paced), t0) else {
            panic!("b waits for a known instant");
        };
        assert!(
            at > t0 && at <= t0 + Duration::from_millis(500),
            "{:?}",
            at - t0
        );
        let Turn::Go(g) = s.turn(&call(&b, deadline), key, (t0, paced), at) else {
            panic!("b goes at its turn");
        };
        assert_eq!(g.waited, Some(at - t0), "its wait was the pace's");
    }

    #[test]
    fn the_retry_budget_refuses_past_its_share_and_counts_what_it_refused() {
        let t0 = Instant::now();
        let mut s = state(t0, 8, None);
        let allowed = (0..100).take_while(|_| s.may_retry(E, t0)).count();
        assert!(allowed > 0 && allowed < 100, "{allowed}");
        assert!(!s.may_retry(E, t0));
        assert_eq!(s.ways[&E].retries_refused, 2);
    }
}
