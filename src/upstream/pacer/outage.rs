//! The outage state of one endpoint of a token: when its calls fail everywhere (5xx without
//! `Retry-After`, timeouts, refused or broken connections) and none succeeds, the endpoint is
//! paused as a whole rather than each target retried: one call asks after a cool-down that
//! doubles while it fails, and the first answer lifts the pause. Plain state driven by explicit
//! instants, as [`super::control`]: no clock, no lock, no I/O.
//!
//! Telling an outage from a few broken targets. A target's standing at the time of its call
//! says what its failure is evidence of:
//!
//! - a target whose last call succeeded ([`Standing::Good`]) failing now says the provider
//!   changed: [`FAILING_TARGETS`] of them failing, with no answer between, is an outage at once;
//! - a target never fetched yet ([`Standing::Unknown`], a cold start) says little on its own: a
//!   broken shard may come first in the queue. As many of them (with good ones) failing with no
//!   answer for [`UNKNOWN_SPAN`] is an outage; healthy targets answer well within it;
//! - a target already failing before ([`Standing::Bad`]: its circuit has failures on record)
//!   says nothing new, and never counts. While the endpoint is out, its calls are not even
//!   queued, so a probe is always a call that may answer.
//!
//! Any answer ends the count and lifts an outage, whatever its status: a 404, a 429 or a body
//! that cannot be read all show a provider that answers. Failures of calls sent before the
//! outage began, answering after it, change nothing (they belong to it).

use std::time::Duration;

use tokio::time::Instant;

use crate::upstream::cooldown::{CoolDown, instant_after};

/// Distinct targets failing one after another with no answer between that make an outage: at
/// once when their last calls had succeeded, once their failures span [`UNKNOWN_SPAN`] when
/// some were never fetched. Three: one broken target, or two, is a target's trouble, not the
/// endpoint's; what tells the two apart is the evidence each target's standing gives, and the
/// span, not a different count.
pub const FAILING_TARGETS: usize = 3;
/// How long failures of targets never fetched must go on with no answer before they are an
/// outage: at a cold start a broken shard may come first, and the healthy targets behind it
/// answer well within this.
pub const UNKNOWN_SPAN: Duration = Duration::from_secs(2);
/// The first cool-down of an outage before its probe.
pub const FIRST_COOLDOWN: Duration = Duration::from_secs(1);
/// The longest cool-down: an outage that ends is noticed within this (and within half the
/// shortest interval of the token's collectors, which the caller passes as a cap).
pub const MAX_COOLDOWN: Duration = Duration::from_secs(20);

/// What a target's call says of the endpoint, by what its last call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Its last call succeeded.
    Good,
    /// Never fetched yet.
    Unknown,
    /// Its last call failed already: a broken target, whatever the provider does.
    Bad,
}

/// What a failure or an answer changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    None,
    /// The endpoint went into an outage.
    Entered,
    /// The probe failed: the next one is later.
    ProbeFailed,
    /// An answer ended the outage.
    Lifted,
}

/// An outage in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Down {
    /// When it began.
    pub since: Instant,
    /// The cool-down before the next probe, and that probe once it is on its way.
    probe: CoolDown,
    /// How long that cool-down is: it doubles while the probes fail.
    pub cooldown: Duration,
}

impl Down {
    fn new(since: Instant, next_probe: Instant, cooldown: Duration) -> Self {
        Down {
            since,
            probe: CoolDown::until(next_probe, true),
            cooldown,
        }
    }

    /// When the next probe may go.
    pub fn next_probe(&self) -> Instant {
        self.probe.ends_at()
    }

    /// Whether its probe is on its way.
    pub fn probing(&self) -> bool {
        self.probe.asking()
    }
}

/// Failures since the last answer, and the outage they made.
#[derive(Clone, Debug, Default)]
pub struct Outage {
    /// Distinct failing targets since the last answer (hashes, at most [`FAILING_TARGETS`]
    /// kept), and of them those that were good (as many at most).
    failing: Vec<u64>,
    good: Vec<u64>,
    /// The first of those failures.
    first: Option<Instant>,
    /// The last answer: failures of calls sent before it are not counted.
    last_answer: Option<Instant>,
    down: Option<Down>,
}

impl Outage {
    /// The outage in force, if any.
    pub fn down(&self) -> Option<Down> {
        self.down
    }

    /// Takes back an outage an earlier process was in: out since `since`, its next probe at
    /// `next_probe` after a cool-down of `cooldown` (at most [`MAX_COOLDOWN`], and the probe
    /// at most that far from `now`). A probe already due is left out: the outage's pause is
    /// over, and the first answer would lift it anyway.
    pub fn restore(
        &mut self,
        since: Instant,
        next_probe: Instant,
        cooldown: Duration,
        now: Instant,
    ) {
        if next_probe <= now || self.down.is_some() {
            return;
        }
        let cooldown = cooldown.clamp(FIRST_COOLDOWN, MAX_COOLDOWN);
        let latest = now.checked_add(MAX_COOLDOWN).unwrap_or(now);
        self.down = Some(Down::new(since.min(now), next_probe.min(latest), cooldown));
    }

    /// A call of target `target` (a hash of its key), of standing `standing`, sent at
    /// `sent_at`, failed at `now` with no answer (a 5xx without `Retry-After`, a timeout, a
    /// refused or broken connection). `cap` bounds the cool-down (the token's shortest
    /// interval); `seq` is the call's sequence number.
    pub fn failed(
        &mut self,
        now: Instant,
        sent_at: Instant,
        target: u64,
        standing: Standing,
        seq: u64,
        cap: Duration,
    ) -> Change {
        if let Some(d) = &mut self.down {
            if !d.probe.is_asking(seq) {
                return Change::None;
            }
            d.cooldown = d
                .cooldown
                .saturating_mul(2)
                .min(MAX_COOLDOWN)
                .min(cap.max(FIRST_COOLDOWN));
            d.probe.again(now, d.cooldown);
            return Change::ProbeFailed;
        }
        if standing == Standing::Bad || self.last_answer.is_some_and(|a| sent_at < a) {
            return Change::None;
        }
        let first = *self.first.get_or_insert(now);
        if !self.failing.contains(&target) && self.failing.len() < FAILING_TARGETS {
            self.failing.push(target);
        }
        if standing == Standing::Good
            && !self.good.contains(&target)
            && self.good.len() < FAILING_TARGETS
        {
            self.good.push(target);
        }
        let spanned = now.saturating_duration_since(first) >= UNKNOWN_SPAN;
        if self.failing.len() >= FAILING_TARGETS && (self.good.len() >= FAILING_TARGETS || spanned)
        {
            let first_probe = instant_after(now, FIRST_COOLDOWN);
            self.down = Some(Down::new(now, first_probe, FIRST_COOLDOWN));
            self.forget();
            return Change::Entered;
        }
        Change::None
    }

    /// A call sent at `sent_at` was answered at `now` (a success, or any status that is not a
    /// failure of the kind [`Outage::failed`] counts).
    pub fn answered(&mut self, now: Instant) -> Change {
        self.forget();
        self.last_answer = Some(now);
        if self.down.take().is_some() {
            return Change::Lifted;
        }
        Change::None
    }

    fn forget(&mut self) {
        self.failing.clear();
        self.good.clear();
        self.first = None;
    }

    /// When a call may go as far as the outage says: `None` while the endpoint is healthy; the
    /// next probe's time while it is out and no probe is in flight; `far` while one is.
    pub fn ready_at(&self, far: Instant) -> Option<Instant> {
        self.down.and_then(|d| d.probe.ready_at(far))
    }

    /// Call `seq` goes out at `now` as the probe, if the endpoint is out.
    pub fn admitted(&mut self, now: Instant, seq: u64) {
        if let Some(d) = &mut self.down {
            d.probe.ask(now, seq);
        }
    }

    /// Call `seq` ended without an outcome (its deadline came, it was dropped): if it was the
    /// probe, another may go now.
    pub fn abandoned(&mut self, seq: u64) {
        if let Some(d) = &mut self.down {
            d.probe.abandoned(seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::cooldown::at as ms;

    const CAP: Duration = Duration::from_secs(60);

    #[test]
    fn three_good_targets_failing_with_no_answer_between_are_an_outage_at_once() {
        let t0 = Instant::now();
        let mut o = Outage::default();
        for (at, target, seq, change) in [
            (10, 1, 1, Change::None),
            // The same target again is not a second witness.
            (20, 1, 2, Change::None),
            (30, 2, 3, Change::None),
            (40, 3, 4, Change::Entered),
        ] {
            let failed = o.failed(ms(t0, at), t0, target, Standing::Good, seq, CAP);
            assert_eq!(failed, change, "failure {seq}");
        }
        let d = o.down().unwrap();
        assert_eq!(d.since, ms(t0, 40));
        assert_eq!(d.next_probe(), ms(t0, 40) + FIRST_COOLDOWN);
    }

    #[test]
    fn an_answer_between_failures_starts_the_count_again() {
        let t0 = Instant::now();
        let mut o = Outage::default();
        o.failed(ms(t0, 10), t0, 1, Standing::Good, 1, CAP);
        o.failed(ms(t0, 20), t0, 2, Standing::Good, 2, CAP);
        o.answered(ms(t0, 30));
        assert_eq!(
            o.failed(ms(t0, 40), ms(t0, 35), 3, Standing::Good, 3, CAP),
            Change::None
        );
        assert!(o.down().is_none());
    }

    #[test]
    fn failures_of_calls_sent_before_the_last_answer_are_not_counted() {
        let t0 = Instant::now();
        let mut o = Outage::default();
        o.answered(ms(t0, 100));
        for t in 1..10 {
            assert_eq!(
                o.failed(ms(t0, 100 + t), ms(t0, 50), t, Standing::Good, t, CAP),
                Change::None
            );
        }
    }

    #[test]
    fn broken_targets_never_make_an_outage_however_many_fail() {
        let t0 = Instant::now();
        let mut o = Outage::default();
        for t in 0..1_000 {
            o.failed(ms(t0, t * 10), t0, t, Standing::Bad, t, CAP);
        }
        assert!(o.down().is_none());
    }

    #[test]
    fn targets_never_fetched_make_an_outage_only_when_no_answer_comes_for_the_span() {
        let t0 = Instant::now();
        let mut o = Outage::default();
        // A broken shard first in the queue at a cold start: many failures at once...
        for t in 0..30 {
            assert_eq!(
                o.failed(ms(t0, 50 + t), t0, t, Standing::Unknown, t, CAP),
                Change::None
            );
        }
        // ...and the healthy ones behind it answer.
        o.answered(ms(t0, 120));
        assert!(o.down().is_none());
        // A provider that is down: failures go on past the span with no answer.
        let t1 = ms(t0, 1_000);
        for (i, t) in (100..110).enumerate() {
            let at = t1 + Duration::from_millis(300 * i as u64);
            let change = o.failed(at, at, t, Standing::Unknown, t, CAP);
            let expect = if at.duration_since(t1) >= UNKNOWN_SPAN {
                Change::Entered
            } else {
                Change::None
            };
            assert_eq!(change, expect, "failure {i}");
            if change == Change::Entered {
                break;
            }
        }
        assert!(o.down().is_some());
    }

    #[test]
    fn one_probe_goes_at_a_time_its_failure_doubles_the_cool_down_up_to_the_cap_and_an_answer_lifts_it()
     {
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(86_400);
        let mut o = Outage::default();
        for t in 1..=3 {
            o.failed(t0, t0, t, Standing::Good, t, CAP);
        }
        let mut now = t0;
        let mut cooldowns = Vec::new();
        for seq in 10..20 {
            let d = o.down().unwrap();
            assert_eq!(o.ready_at(far), Some(d.next_probe()));
            now = d.next_probe();
            o.admitted(now, seq);
            assert_eq!(o.ready_at(far), Some(far), "a probe is in flight");
            // Another call's failure is not the probe's.
            assert_eq!(
                o.failed(now, now, 99, Standing::Good, 99, CAP),
                Change::None
            );
            let answered = now + Duration::from_millis(50);
            let failed = o.failed(answered, now, 5, Standing::Good, seq, CAP);
            assert_eq!(failed, Change::ProbeFailed);
            cooldowns.push(o.down().unwrap().cooldown.as_secs());
        }
        assert_eq!(cooldowns, [2, 4, 8, 16, 20, 20, 20, 20, 20, 20]);
        // A probe dropped without an answer lets another go at once.
        let d = o.down().unwrap();
        o.admitted(d.next_probe(), 50);
        o.abandoned(50);
        assert_eq!(o.ready_at(far), Some(d.next_probe()));
        assert_eq!(o.answered(now + Duration::from_secs(300)), Change::Lifted);
        assert_eq!(o.ready_at(far), None);
    }

    #[test]
    fn the_cool_down_never_outgrows_the_cap_the_caller_gives() {
        let t0 = Instant::now();
        let mut o = Outage::default();
        let cap = Duration::from_secs(5);
        for t in 1..=3 {
            o.failed(t0, t0, t, Standing::Good, t, cap);
        }
        for seq in 10..16 {
            let at = o.down().unwrap().next_probe();
            o.admitted(at, seq);
            o.failed(at, at, 1, Standing::Good, seq, cap);
        }
        assert_eq!(o.down().unwrap().cooldown, cap);
    }
}
