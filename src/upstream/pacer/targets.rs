//! The one record the pacer keeps of a target (an account, view, migration or mailbox of one
//! endpoint) that has something on record: its circuit breaker, when it has failed
//! ([`crate::upstream::breaker`], one circuit's rules), and its 429s in a row, when it has been
//! refused ([`super::shape`], whose a 429 is). Both live in one map with one bound, go together
//! when a reload removes their target, and leave when neither has anything to say: a success
//! ends both, and a streak of 429s not renewed for [`super::shape::FORGET_AFTER`] is forgotten.
//! Plain state driven by explicit instants, under the pacer's lock.
//!
//! Keys come from the config (configured targets, and those `/probe` and discovery add under
//! their own caps), never from upstream answers; past [`MAX_TARGETS`] records a new target is
//! simply not tracked: its failures open no circuit (its calls are let through) and its 429s
//! are taken as shared, as before targets were told apart.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::shape::{self, Backoff, Outcomes, Scope, Streak};
use crate::settings::BreakerPolicy;
use crate::upstream::breaker::{self, Breaker, Circuit, CircuitKey as TargetKey, Open};
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::FailureReason;

/// Targets with a record per token at most. A record is a few hundred bytes at most, so the
/// bound is about 200 MiB where nothing else would stop it; the config's own bounds on targets
/// stop it long before.
pub const MAX_TARGETS: usize = 1_000_000;
/// How often, at most, the stale streaks are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What is on record of one target.
#[derive(Debug, Default)]
pub(super) struct Record {
    /// Its 429s in a row, if it was refused.
    pub(super) streak: Option<Streak>,
    /// Its circuit, if a call of it failed in a way that says the call is broken.
    pub(super) breaker: Option<Breaker>,
}

impl Record {
    fn is_empty(&self) -> bool {
        self.streak.is_none() && self.breaker.is_none()
    }
}

/// The records of one token's targets.
#[derive(Debug)]
pub struct Targets {
    pub(super) map: HashMap<TargetKey, Record>,
    /// Targets taken as refused on their own, per endpoint (a fixed set).
    pub(super) own: HashMap<Endpoint, usize>,
    /// Open circuits per endpoint, kept in step with the records for the gauge.
    open: HashMap<Endpoint, usize>,
    swept: Option<Instant>,
    policy: BreakerPolicy,
    /// Records at most: [`MAX_TARGETS`] outside tests.
    capacity: usize,
}

impl Targets {
    pub fn new(policy: BreakerPolicy) -> Self {
        Targets::with_capacity(policy, MAX_TARGETS)
    }

    pub(super) fn with_capacity(policy: BreakerPolicy, capacity: usize) -> Self {
        Targets {
            map: HashMap::new(),
            own: HashMap::new(),
            open: HashMap::new(),
            swept: None,
            policy,
            capacity,
        }
    }

    /// Whether a call for `key` may go out now, as its circuit says. After the cool-down,
    /// exactly one probe is admitted.
    pub fn admit(&mut self, key: &TargetKey, now: Instant) -> Result<(), Open> {
        match self.map.get_mut(key).and_then(|r| r.breaker.as_mut()) {
            Some(b) => b.admit(now),
            None => Ok(()),
        }
    }

    /// An admitted call ended without an outcome (its future was dropped: deadline, shutdown,
    /// or a 429 or an outage, which are not the call's): a probe in flight is given up.
    pub fn abandon(&mut self, key: &TargetKey) {
        if let Some(b) = self.map.get_mut(key).and_then(|r| r.breaker.as_mut()) {
            b.abandon();
        }
    }

    /// Records the outcome of an admitted call in its circuit; returns how many circuits of
    /// the endpoint are open now.
    pub fn record(
        &mut self,
        key: &TargetKey,
        outcome: Result<(), FailureReason>,
        now: Instant,
    ) -> usize {
        let endpoint = key.0;
        if breaker::counts(outcome, self.policy) {
            if self.map.contains_key(key) || self.room(now) {
                let b = self
                    .map
                    .entry(key.clone())
                    .or_default()
                    .breaker
                    .get_or_insert_with(Breaker::default);
                let was = b.is_open();
                b.failed(self.policy, now);
                let is = b.is_open();
                step(&mut self.open, endpoint, was, is);
            }
        } else if let Some(r) = self.map.get_mut(key)
            && let Some(b) = r.breaker.take()
        {
            // Any answer that is not a sign of a broken call closes the circuit.
            step(&mut self.open, endpoint, b.is_open(), false);
            self.tidy(key);
        }
        self.open_circuits(endpoint)
    }

    /// The circuit of `key` as it stands.
    pub fn circuit(&self, key: &TargetKey) -> Circuit {
        match self.map.get(key).and_then(|r| r.breaker) {
            Some(b) => b.told(self.policy),
            None => Circuit {
                off: self.policy.failures == 0,
                ..Circuit::default()
            },
        }
    }

    /// Open circuits of `endpoint`.
    pub fn open_circuits(&self, endpoint: Endpoint) -> usize {
        self.open.get(&endpoint).copied().unwrap_or(0)
    }

    /// Takes a reloaded breaker policy and forgets the targets `keep` no longer names (a reload
    /// removed them), circuits and 429s alike; the others keep their state. Returns the open
    /// circuits per endpoint that has had one.
    pub fn reconfigure(
        &mut self,
        policy: BreakerPolicy,
        keep: impl Fn(&TargetKey) -> bool,
    ) -> Vec<(Endpoint, usize)> {
        self.policy = policy;
        let (own, open) = (&mut self.own, &mut self.open);
        self.map.retain(|k, r| {
            let kept = keep(k);
            if !kept {
                step(own, k.0, r.streak.as_ref().is_some_and(|s| s.own), false);
                step(open, k.0, r.breaker.is_some_and(|b| b.is_open()), false);
            }
            kept
        });
        self.open.iter().map(|(e, n)| (*e, *n)).collect()
    }

    fn streak(&self, key: &TargetKey) -> Option<&Streak> {
        self.map.get(key)?.streak.as_ref()
    }

    /// A success: the target's streak of 429s, and any back-off, end. Returns when the call of
    /// its undecided 429 went out, if it had one: that 429 was the shared limit's after all.
    pub fn succeeded(&mut self, key: &TargetKey) -> Option<Instant> {
        let s = self.map.get_mut(key)?.streak.take()?;
        step(&mut self.own, key.0, s.own, false);
        self.tidy(key);
        s.undecided()
    }

    /// How `key` backs off, if it does at `now`.
    pub fn backing_off(&self, key: &TargetKey, now: Instant) -> Option<Backoff> {
        self.streak(key)?.backing_off(now)
    }

    /// Targets of `endpoint` taken as refused on their own (until their next success).
    pub fn own(&self, endpoint: Endpoint) -> usize {
        self.own.get(&endpoint).copied().unwrap_or(0)
    }

    /// At most `limit` targets backing off on their own at `now`, with their endpoint and when
    /// their back-off ends, soonest first.
    #[cfg(test)]
    pub fn list_own(&self, now: Instant, limit: usize) -> Vec<(Endpoint, String, Instant)> {
        let mut all: Vec<_> = self
            .own_backoffs(now)
            .into_iter()
            .map(|(e, t, u, _)| (e, t, u))
            .collect();
        all.sort_by_key(|(e, t, u)| (*u, *e, t.clone()));
        all.truncate(limit);
        all
    }

    /// A 429 of `key` to a call sent at `sent_at` ([`Streak::throttled`] says whose it is);
    /// past the bound, [`shape::untracked`].
    pub fn throttled(
        &mut self,
        key: &TargetKey,
        history: &Outcomes,
        now: Instant,
        sent_at: Instant,
        retry_after: Option<Duration>,
        cap: Duration,
    ) -> Scope {
        if !self.map.contains_key(key) && !self.room(now) {
            return shape::untracked(history, retry_after);
        }
        let s = self
            .map
            .entry(key.clone())
            .or_default()
            .streak
            .get_or_insert_with(|| Streak::new(now));
        let was = s.own;
        let scope = s.throttled(history, now, sent_at, retry_after, cap);
        step(&mut self.own, key.0, was, s.own);
        scope
    }

    /// Targets backing off on their own at `now`: endpoint, target, until when, and their
    /// 429s in a row. At most as many as the records.
    pub fn own_backoffs(&self, now: Instant) -> Vec<(Endpoint, String, Instant, u32)> {
        self.map
            .iter()
            .filter_map(|((e, t), r)| {
                let (until, count) = r.streak.as_ref()?.own_backoff(now)?;
                Some((*e, t.clone(), until, count))
            })
            .collect()
    }

    /// Takes back a target an earlier process found refused on its own
    /// ([`Streak::restored`]). A back-off already over, a target with 429s already on record,
    /// or one past [`MAX_TARGETS`] is left out. Says whether it was taken.
    pub fn restore_own(
        &mut self,
        key: TargetKey,
        until: Instant,
        count: u32,
        now: Instant,
    ) -> bool {
        if until <= now
            || self.streak(&key).is_some()
            || (!self.map.contains_key(&key) && !self.room(now))
        {
            return false;
        }
        step(&mut self.own, key.0, false, true);
        self.map.entry(key).or_default().streak = Some(Streak::restored(until, count, now));
        true
    }

    /// Whether one more target may be tracked: forgets the stale streaks when full.
    pub(super) fn room(&mut self, now: Instant) -> bool {
        if self.map.len() < self.capacity {
            return true;
        }
        self.forget(now);
        self.map.len() < self.capacity
    }

    /// [`Targets::forget`], at most once per [`SWEEP_EVERY`]: cheap to call on every answer.
    pub fn forget_now(&mut self, now: Instant) {
        if self
            .swept
            .is_none_or(|at| now.saturating_duration_since(at) >= SWEEP_EVERY)
        {
            self.forget(now);
        }
    }

    /// Forgets the streaks not refused for [`super::shape::FORGET_AFTER`] and not backing off;
    /// a record leaves with its streak unless its circuit has a failure on record.
    pub fn forget(&mut self, now: Instant) {
        self.swept = Some(now);
        let own = &mut self.own;
        self.map.retain(|k, r| {
            if let Some(s) = &r.streak
                && s.stale(now)
            {
                step(own, k.0, s.own, false);
                r.streak = None;
            }
            !r.is_empty()
        });
    }

    /// Ends the record of `key` when nothing is left on it.
    pub(super) fn tidy(&mut self, key: &TargetKey) {
        if self.map.get(key).is_some_and(Record::is_empty) {
            self.map.remove(key);
        }
    }

    /// Records on file.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Keeps a per-endpoint count in step with one record going from `was` to `is`.
pub(super) fn step(counts: &mut HashMap<Endpoint, usize>, endpoint: Endpoint, was: bool, is: bool) {
    match (was, is) {
        (false, true) => *counts.entry(endpoint).or_insert(0) += 1,
        (true, false) => {
            if let Some(n) = counts.get_mut(&endpoint) {
                *n = n.saturating_sub(1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::pacer::shape::{FORGET_AFTER, MAX_TARGET_BACKOFF, MIN_TARGET_BACKOFF};

    const POLICY: BreakerPolicy = BreakerPolicy {
        failures: 3,
        cooldown: Duration::from_secs(60),
    };
    const CAP: Duration = Duration::from_secs(300);

    fn key(target: &str) -> TargetKey {
        (Endpoint::new("delivery_account"), target.to_owned())
    }

    /// Three failed calls: the circuit of `target` opens at `t`.
    fn trip(b: &mut Targets, target: &str, t: Instant) {
        for _ in 0..3 {
            b.admit(&key(target), t).unwrap();
            b.record(&key(target), Err(FailureReason::ServerError), t);
        }
    }

    /// Refused twice while the endpoint's other calls go through: its own.
    fn refuse(b: &mut Targets, target: &str, t: Instant) {
        let h = Outcomes::of(100, 0);
        b.throttled(&key(target), &h, t, t, None, CAP);
        b.throttled(&key(target), &h, t, t, None, CAP);
    }

    #[test]
    fn a_broken_target_never_opens_the_circuit_of_another() {
        let mut b = Targets::new(POLICY);
        let t = Instant::now();
        trip(&mut b, "broken", t);
        assert_eq!(b.admit(&key("broken"), t), Err(Open));
        assert!(b.admit(&key("healthy"), t).is_ok());
        assert_eq!(b.record(&key("healthy"), Ok(()), t), 1);
        assert!(
            b.admit(&(Endpoint::new("tracemail_daily"), "broken".to_owned()), t)
                .is_ok(),
            "the same id on another endpoint is another circuit"
        );
    }

    #[test]
    fn a_success_closes_the_circuit_and_a_closed_one_keeps_no_entry() {
        let mut b = Targets::new(POLICY);
        let t = Instant::now();
        trip(&mut b, "1", t);
        let later = t + Duration::from_secs(61);
        assert!(b.admit(&key("1"), later).is_ok(), "the probe");
        assert_eq!(b.record(&key("1"), Ok(()), later), 0);
        assert!(b.admit(&key("1"), later).is_ok());
        assert_eq!(b.len(), 0);
        for _ in 0..10 {
            b.record(&key("2"), Err(FailureReason::NotFound), t);
        }
        assert_eq!(b.len(), 0, "a failure of the target's own keeps nothing");
    }

    #[test]
    fn circuits_on_record_are_bounded_and_a_closed_one_keeps_no_entry() {
        let mut b = Targets::with_capacity(POLICY, 4);
        let t = Instant::now();
        for i in 0..10 {
            b.record(&key(&i.to_string()), Err(FailureReason::Timeout), t);
        }
        assert_eq!(b.len(), 4, "past the bound a failing target is not tracked");
        b.record(&key("0"), Ok(()), t);
        assert_eq!(b.len(), 3);
        assert!(
            b.admit(&key("9"), t).is_ok(),
            "an untracked target is let through"
        );
    }

    #[test]
    fn a_reload_keeps_the_state_of_configured_targets_and_forgets_the_rest() {
        let mut b = Targets::new(POLICY);
        let t = Instant::now();
        trip(&mut b, "kept", t);
        trip(&mut b, "gone", t);
        refuse(&mut b, "gone too", t);
        assert_eq!(b.own(key("x").0), 1);
        let open = b.reconfigure(POLICY, |k| k.1 == "kept");
        assert_eq!(open, vec![(Endpoint::new("delivery_account"), 1)]);
        assert!(b.admit(&key("kept"), t).is_err(), "still open");
        assert!(b.admit(&key("gone"), t).is_ok());
        assert_eq!(b.own(key("x").0), 0, "its 429s went with it");
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn one_record_holds_a_targets_circuit_and_its_429s_and_each_leaves_on_its_own_terms() {
        let mut b = Targets::with_capacity(POLICY, 2);
        let t = Instant::now();
        trip(&mut b, "1", t);
        refuse(&mut b, "1", t);
        assert_eq!(b.len(), 1, "one record for both");
        assert!(b.backing_off(&key("1"), t).is_some_and(|o| o.own));
        assert!(b.circuit(&key("1")).open);
        // Its streak goes stale: the record stays for its circuit.
        b.forget(t + FORGET_AFTER + CAP);
        assert_eq!(b.own(key("1").0), 0);
        assert_eq!(b.len(), 1);
        assert!(b.circuit(&key("1")).open);
        // Refused again, then answered: the pacer ends its streak, and the client, recording
        // the answer in its circuit, closes that; the record leaves with the last of them.
        refuse(&mut b, "1", t);
        assert!(b.succeeded(&key("1")).is_none());
        assert_eq!(b.len(), 1);
        assert_eq!(b.record(&key("1"), Ok(()), t), 0);
        assert_eq!(b.len(), 0);
        // One bound for both: two records, then neither a circuit nor a streak is kept.
        trip(&mut b, "2", t);
        refuse(&mut b, "3", t);
        b.record(&key("4"), Err(FailureReason::Timeout), t);
        refuse(&mut b, "5", t);
        assert_eq!(b.len(), 2);
        assert_eq!(b.circuit(&key("4")).consecutive, 0);
        assert!(b.backing_off(&key("5"), t).is_none());
    }

    const E: Endpoint = Endpoint::new("delivery_account");

    /// `ok` successes and `throttled` first 429s, the 429s spread evenly among them.
    fn spread(ok: u32, throttled: u32) -> Outcomes {
        let mut h = Outcomes::default();
        let every = (ok + throttled) / throttled.max(1);
        for i in 0..ok + throttled {
            if i % every == every - 1 {
                h.throttled(true);
            } else {
                h.success();
            }
        }
        h
    }

    #[test]
    fn a_target_refused_twice_while_its_neighbours_succeed_is_refused_on_its_own() {
        let mut t = Targets::new(POLICY);
        let now = Instant::now();
        let h = Outcomes::of(100, 0);
        for (scope, why) in [
            (Scope::Undecided, "one 429 says nothing yet"),
            (
                Scope::Target(now + MIN_TARGET_BACKOFF),
                "refused again: its own",
            ),
            (Scope::Target(now + MIN_TARGET_BACKOFF * 2), "doubling"),
        ] {
            let throttled = t.throttled(&key("7"), &h, now, now, None, CAP);
            assert_eq!(throttled, scope, "{why}");
        }
        assert_eq!(t.own(E), 1);
        assert!(t.backing_off(&key("7"), now).is_some_and(|b| b.own));
        assert_eq!(t.list_own(now, 10).len(), 1);
        assert_eq!(
            t.succeeded(&key("7")),
            None,
            "its own 429s are nobody's cut"
        );
        assert_eq!(t.own(E), 0);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_lone_429_is_decided_by_the_targets_next_answer_and_a_burst_at_once() {
        let mut t = Targets::new(POLICY);
        let sent = Instant::now();
        let now = sent + Duration::from_millis(50);
        let h = Outcomes::of(100, 0);
        let ra = Some(Duration::from_secs(1));
        assert_eq!(
            t.throttled(&key("7"), &h, now, sent, ra, CAP),
            Scope::Undecided
        );
        assert_eq!(
            t.backing_off(&key("7"), now).map(|b| (b.until, b.own)),
            Some((now + Duration::from_secs(1), false)),
            "a lone 429 waits its Retry-After alone"
        );
        assert_eq!(
            t.succeeded(&key("7")),
            Some(sent),
            "its retry went through: the 429 was the shared limit's, cut as of its call"
        );
        assert_eq!(t.succeeded(&key("7")), None, "decided once");
        // Refused again while the endpoint refuses many: shared, its pause for everyone.
        let many = spread(90, 40);
        assert!(!many.burst());
        assert_eq!(
            t.throttled(&key("8"), &many, now, sent, ra, CAP),
            Scope::Undecided
        );
        assert_eq!(
            t.throttled(&key("8"), &many, now, sent, ra, CAP),
            Scope::Shared {
                pause: ra,
                burst: true,
                first: false,
                counted: true
            }
        );
        assert_eq!(t.succeeded(&key("8")), None, "already charged");
        // Six first 429s among the last sixteen answers: a spent limit, shared at once.
        let mut spent = Outcomes::of(100, 0);
        for _ in 0..6 {
            spent.throttled(true);
        }
        assert_eq!(
            t.throttled(&key("9"), &spent, now, sent, ra, CAP),
            Scope::Shared {
                pause: ra,
                burst: true,
                first: true,
                counted: true
            }
        );
        assert_eq!(
            t.backing_off(&key("9"), now),
            None,
            "the scope waits instead"
        );
    }

    #[test]
    fn while_a_shared_limit_refuses_many_calls_a_streak_must_be_long_to_be_the_targets_own() {
        let mut t = Targets::new(POLICY);
        let now = Instant::now();
        // A quarter of the endpoint's calls refused: 0.25^k <= 0.01 takes four in a row.
        let h = spread(96, 32);
        assert_eq!(
            t.throttled(&key("7"), &h, now, now, None, CAP),
            Scope::Undecided
        );
        for _ in 0..2 {
            assert_eq!(
                t.throttled(&key("7"), &h, now, now, None, CAP),
                Scope::Shared {
                    pause: None,
                    burst: false,
                    first: false,
                    counted: false
                },
                "refused again, not yet its own: shared, not counted"
            );
        }
        assert!(matches!(
            t.throttled(&key("7"), &h, now, now, None, CAP),
            Scope::Target(_)
        ));
        // Half of them: never, however long the streak (nor at the start, when nothing is
        // known and the share reads one half).
        let h = spread(64, 64);
        for _ in 0..20 {
            assert!(matches!(
                t.throttled(&key("8"), &h, now, now, None, CAP),
                Scope::Shared { .. }
            ));
        }
        assert!((Outcomes::default().share_without(0) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_back_off_follows_retry_after_and_never_outlives_the_values() {
        let mut t = Targets::new(POLICY);
        let now = Instant::now();
        let h = Outcomes::of(100, 0);
        let ra = Some(Duration::from_secs(30));
        assert_eq!(
            t.throttled(&key("7"), &h, now, now, ra, CAP),
            Scope::Undecided,
            "a first lone 429 pauses no one else"
        );
        assert_eq!(
            t.backing_off(&key("7"), now)
                .map(|b| (b.until, b.own, b.told)),
            Some((now + Duration::from_secs(30), false, ra)),
            "a lone 429 waits its Retry-After itself"
        );
        let huge = Some(Duration::from_secs(86_400));
        assert_eq!(
            t.throttled(&key("7"), &h, now, now, huge, Duration::from_secs(60)),
            Scope::Target(now + Duration::from_secs(60))
        );
        assert_eq!(
            t.throttled(&key("7"), &h, now, now, huge, Duration::from_secs(86_400)),
            Scope::Target(now + MAX_TARGET_BACKOFF)
        );
        for _ in 0..40 {
            t.throttled(&key("8"), &h, now, now, None, CAP);
        }
        assert!(
            t.backing_off(&key("8"), now).unwrap().until <= now + CAP,
            "doubling is capped"
        );
    }

    #[test]
    fn stale_targets_are_forgotten_and_the_map_is_bounded() {
        let mut t = Targets::new(POLICY);
        let now = Instant::now();
        let h = Outcomes::of(100, 0);
        refuse(&mut t, "gone", now);
        assert_eq!(t.own(E), 1);
        t.forget(now + FORGET_AFTER);
        assert_eq!(t.len(), 0);
        assert_eq!(t.own(E), 0, "a forgotten target is no longer counted");
        let mut t = Targets::with_capacity(POLICY, 1000);
        for i in 0..1000 {
            t.throttled(&key(&i.to_string()), &h, now, now, None, CAP);
        }
        assert_eq!(t.len(), 1000);
        assert_eq!(
            t.throttled(&key("one more"), &h, now, now, None, CAP),
            Scope::Shared {
                pause: None,
                burst: false,
                first: true,
                counted: true
            },
            "past the bound a 429 is taken as shared"
        );
        assert_eq!(t.len(), 1000);
        t.throttled(&key("later"), &h, now + FORGET_AFTER, now, None, CAP);
        assert_eq!(t.len(), 1, "full: the stale ones made room");
    }
}
