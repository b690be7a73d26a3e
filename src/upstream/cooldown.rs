//! The one "cool down, then one call asks" of the upstream client. A target's open circuit
//! ([`super::breaker`]), an endpoint's outage ([`super::pacer::outage`]), a pause the provider
//! asked for and a lone 429's tentative pause ([`super::pacer::control`]) each hold calls back
//! until an instant, and each lets one call ask whether the provider is well again before the
//! others go: after the cool-down, the probe of a circuit or an outage and the call after a
//! pause, whose answer the others wait for; during it, the one call a tentative pause lets go
//! at its pace to say whose the pause is. Plain state driven by explicit instants and the
//! calls' sequence numbers: no clock, no lock, no I/O. Here too the arithmetic of instants the
//! client shares: an instant a wait from now that never panics ([`instant_after`]), and the
//! instant nothing waits for ([`far`]), both a day out at most.

use std::time::Duration;

use tokio::time::Instant;

/// No call has to ask after the cool-down (or the one that had to was answered).
const NOBODY: u64 = u64::MAX;
/// One call has to ask after the cool-down, and none has gone yet.
const WAITING: u64 = u64::MAX - 1;

/// A day: far enough that nothing waits for an instant this far away (every deadline, timeout,
/// pause and cool-down is bounded well below it), and near enough that the clock reaches it.
const A_DAY: Duration = Duration::from_secs(86_400);

/// `from` plus `by`, saturating rather than panicking: a day from `from` when `by` would take
/// the clock past its end (the config bounds every deadline and timeout far below that), and
/// `from` itself when even a day would. The fallback is computed only when it is needed:
/// `checked_add(by).unwrap_or(from + a_day)` evaluates the `+` first, and panics where it means
/// not to.
pub fn instant_after(from: Instant, by: Duration) -> Instant {
    from.checked_add(by)
        .or_else(|| from.checked_add(A_DAY))
        .unwrap_or(from)
}

/// An instant nothing waits for: [`A_DAY`] from `now`, as far as the clock goes.
pub fn far(now: Instant) -> Instant {
    instant_after(now, A_DAY)
}

/// Calls held back until an instant, and the one call that asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoolDown {
    until: Instant,
    /// Who asks after the cool-down: [`NOBODY`], [`WAITING`], or the sequence number of the
    /// call on its way (numbers, not an enum, keep a cool-down in 32 bytes: a refused call
    /// carries its endpoint's outage).
    after: u64,
    /// One call may go during the cool-down, at its pace.
    early: bool,
}

impl CoolDown {
    /// Calls held back for `wait` from `now` (past the end of the clock, as far as it goes: the
    /// callers bound `wait`, this only keeps the arithmetic from panicking); with `asks_after`,
    /// one call asks once it ends and the others wait for its answer.
    pub fn new(now: Instant, wait: Duration, asks_after: bool) -> Self {
        CoolDown::until(instant_after(now, wait), asks_after)
    }

    /// The same, until `until`.
    pub fn until(until: Instant, asks_after: bool) -> Self {
        CoolDown {
            until,
            after: if asks_after { WAITING } else { NOBODY },
            early: false,
        }
    }

    /// When the cool-down ends.
    pub fn ends_at(&self) -> Instant {
        self.until
    }

    /// Whether it is still cooling down at `now`.
    pub fn cooling(&self, now: Instant) -> bool {
        now < self.until
    }

    /// Whether the call asking after the cool-down is on its way.
    pub fn asking(&self) -> bool {
        self.after < WAITING
    }

    /// Whether call `seq` is the one asking after the cool-down.
    pub fn is_asking(&self, seq: u64) -> bool {
        self.asking() && self.after == seq
    }

    /// Lets one call go during the cool-down, or not.
    pub fn allow_early(&mut self, early: bool) {
        self.early = early;
    }

    /// Holds calls back until `until` if that is later.
    pub fn extend(&mut self, until: Instant) {
        self.until = self.until.max(until);
    }

    /// Ends the cool-down at `now` if it runs longer; the call that has to ask still does.
    pub fn lift(&mut self, now: Instant) {
        self.until = self.until.min(now);
        self.early = false;
    }

    /// When the next call may go as far as the cool-down says: `far` while the call asking
    /// after it is on its way, `None` while one may still go during it, else its end.
    pub fn ready_at(&self, far: Instant) -> Option<Instant> {
        if self.asking() {
            Some(far)
        } else if self.early {
            None
        } else {
            Some(self.until)
        }
    }

    /// Call `seq` goes at `now` if the cool-down lets it: during it, as the one early call;
    /// after it, as the one that asks if one has to and none has gone, or freely. Says whether
    /// it may go.
    pub fn ask(&mut self, now: Instant, seq: u64) -> bool {
        let early = std::mem::take(&mut self.early);
        if self.asking() {
            return false;
        }
        if self.cooling(now) {
            return early;
        }
        if self.after == WAITING {
            self.after = seq;
        }
        true
    }

    /// A call went while nothing would let it ask (a spent quota held the scope): the early
    /// call is used up all the same.
    pub fn skip_early(&mut self) {
        self.early = false;
    }

    /// Call `seq` ended without an answer (its deadline, its future dropped): if it was asking,
    /// another asks. A probe must not stay on its way forever, or the cool-down never ends.
    pub fn abandoned(&mut self, seq: u64) {
        if self.is_asking(seq) {
            self.after = WAITING;
        }
    }

    /// Call `seq` ended, answered or not: if it was asking, the others go.
    pub fn answered(&mut self, seq: u64) {
        if self.is_asking(seq) {
            self.after = NOBODY;
        }
    }

    /// The answer was another "not yet": cool down again for `wait` from `now`, and one call
    /// asks after it.
    pub fn again(&mut self, now: Instant, wait: Duration) {
        self.until = instant_after(now, wait);
        self.after = WAITING;
        self.early = false;
    }
}

/// `ms` milliseconds after `t0`: the instants of the tests of these plain states.
#[cfg(test)]
pub(crate) fn at(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_the_cool_down_one_call_asks_and_the_others_wait_for_its_answer() {
        let t0 = Instant::now();
        let far = at(t0, 1_000_000);
        let mut c = CoolDown::new(t0, Duration::from_secs(1), true);
        assert_eq!(c.ready_at(far), Some(at(t0, 1_000)));
        assert!(!c.ask(at(t0, 999), 1), "cooling");
        assert!(c.ask(at(t0, 1_000), 2), "the probe");
        assert!(c.is_asking(2) && c.asking());
        assert_eq!(c.ready_at(far), Some(far));
        assert!(!c.ask(at(t0, 1_001), 3), "waits for the probe");
        // Abandoned: another asks.
        c.abandoned(2);
        assert!(c.ask(at(t0, 1_002), 4));
        // Another "not yet": cool down again, one asks after.
        c.again(at(t0, 1_100), Duration::from_secs(2));
        assert!(!c.asking() && c.cooling(at(t0, 3_099)));
        assert!(c.ask(at(t0, 3_100), 5));
        // Answered: every call goes.
        c.answered(5);
        assert!(c.ask(at(t0, 3_101), 6) && c.ask(at(t0, 3_102), 7));
        assert!(!c.asking());
    }

    #[test]
    fn a_cool_down_without_an_asking_call_ends_for_all_and_one_may_go_early() {
        let t0 = Instant::now();
        let far = at(t0, 1_000_000);
        let mut c = CoolDown::new(t0, Duration::from_secs(1), false);
        assert!(!c.ask(at(t0, 10), 1));
        c.allow_early(true);
        assert_eq!(c.ready_at(far), None, "one may go now");
        assert!(c.ask(at(t0, 20), 2), "the early one");
        assert!(!c.ask(at(t0, 30), 3), "only one");
        assert_eq!(c.ready_at(far), Some(at(t0, 1_000)));
        c.extend(at(t0, 500));
        assert_eq!(c.ends_at(), at(t0, 1_000), "never shortened by extend");
        c.lift(at(t0, 40));
        assert!(
            c.ask(at(t0, 40), 4) && c.ask(at(t0, 41), 5),
            "lifted: all go"
        );
    }

    #[test]
    fn a_cool_down_past_the_end_of_the_clock_does_not_panic() {
        let t0 = Instant::now();
        let c = CoolDown::new(t0, Duration::MAX, true);
        assert!(c.cooling(at(t0, 1_000)));
    }
}
