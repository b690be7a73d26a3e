//! Whose limit a 429 is: one target's own, or the pace its endpoint or token shares. Plain state
//! driven by explicit instants, as [`super::control`].
//!
//! A shared limit (a token bucket on the token or on one endpoint) refuses whichever calls come
//! when it is empty: a target refused once goes through at its next turn as often as any other.
//! A limit of one target's own (an account under abuse protection, a proxy rule on one path)
//! refuses that target every time while its neighbours on the same endpoint succeed. So a 429 is
//! taken as the target's own once the target has been refused `k` times in a row (at least
//! twice) where a shared limit, refusing the endpoint's other calls at the share `p` it does now,
//! would have done so by chance at most once in a hundred (`p^k <= 0.01`). Until then it is
//! shared, and the pacer slows its endpoint or its token down. Such a target backs off alone:
//! `Retry-After` if the answer said, else doubling from a second, never longer than its values
//! live; its 429s are left out of the endpoint's share, so it never cuts anyone else's pace.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::upstream::error::Endpoint;

/// Targets with a 429 on record kept per token at most: keys come from the config, and past
/// this a new one is simply taken as shared, as before this module.
pub const MAX_TRACKED: usize = 100_000;
/// The first back-off of a target refused on its own, when the answer named no wait.
pub const MIN_TARGET_BACKOFF: Duration = Duration::from_secs(1);
/// The longest back-off of a target, whatever it was told (and never longer than its values
/// live, which the caller passes).
pub const MAX_TARGET_BACKOFF: Duration = Duration::from_secs(600);
/// A target not refused for this long is forgotten: a target that left the config leaves too.
pub const FORGET_AFTER: Duration = Duration::from_secs(1200);
/// The chance, at most, that a shared limit refused a target that many times in a row.
const OWN_EVIDENCE: f64 = 0.01;
/// Above this share of shared 429s no target is taken as refused on its own: a pace just over
/// a small burst's limit refuses every other call, and a call tried again at its next turn
/// lands on a refusal again and again, whoever it belongs to.
const MAX_SHARE_FOR_OWN: f64 = 0.3;
/// Answers of an endpoint its 429 share is taken over.
const HISTORY: u32 = 128;
/// Answers looked back over to tell a lone 429 from a burst of them.
const NEIGHBOURHOOD: u32 = 16;
/// Answers in a row, every one a shared 429, that make a burst however few targets they came
/// from.
const REFUSED_IN_A_ROW: u32 = 4;
/// Shared 429s among the last [`NEIGHBOURHOOD`] answers that make the next one part of a burst
/// (a quarter of them, with it): a limit that is spent, not one target's bad luck, nor the
/// first answers of a few broken targets among many.
const BURST: u32 = 3;

/// The last answers of an endpoint: every one (a 429 taken as shared is a 1), for the share
/// of calls a shared limit refuses; and the successes and first 429s of each target's streak
/// alone, for telling a burst of refusals from one target tried again and again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcomes {
    all: Ring,
    firsts: Ring,
}

impl Outcomes {
    pub fn success(&mut self) {
        self.all.push(false);
        self.firsts.push(false);
    }

    /// A 429 taken as shared; `first` when it began its target's streak.
    pub fn throttled(&mut self, first: bool) {
        self.all.push(true);
        if first {
            self.firsts.push(true);
        }
    }

    /// The share of recent answers refused by a shared limit, leaving out `mine` 429s of the
    /// target being judged (its streak so far), smoothed (Laplace) so that a short history
    /// says "unknown" (near one half) rather than "never".
    pub fn share_without(&self, mine: u32) -> f64 {
        let ones = self.all.ones(HISTORY);
        let mine = mine.min(ones);
        (f64::from(ones - mine) + 1.0) / (f64::from(self.all.len - mine) + 2.0)
    }

    /// Whether other targets' first 429s are among the last few answers, or every one of the
    /// last few answers was a 429 (an endpoint of one or two targets, all refused): refusals
    /// come in bursts when a shared limit is spent, alone when a single call was unlucky or a
    /// target's own.
    pub fn burst(&self) -> bool {
        self.firsts.ones(NEIGHBOURHOOD) >= BURST
            || (self.all.len >= REFUSED_IN_A_ROW
                && self.all.ones(REFUSED_IN_A_ROW) == REFUSED_IN_A_ROW)
    }
}

/// The last [`HISTORY`] outcomes, a bit each.
#[derive(Clone, Copy, Debug, Default)]
struct Ring {
    bits: u128,
    len: u32,
}

impl Ring {
    fn push(&mut self, one: bool) {
        self.bits = (self.bits << 1) | u128::from(one);
        self.len = (self.len + 1).min(HISTORY);
    }

    fn ones(&self, last: u32) -> u32 {
        let n = last.min(self.len);
        if n == 0 {
            return 0;
        }
        let mask = if n >= 128 {
            u128::MAX
        } else {
            (1u128 << n) - 1
        };
        (self.bits & mask).count_ones()
    }
}

/// What is known of one target's 429s.
#[derive(Clone, Debug)]
struct Streak {
    /// 429s in a row.
    count: u32,
    /// Taken as the target's own: kept until its next success.
    own: bool,
    /// No call of it before this.
    until: Option<Instant>,
    /// The `Retry-After` of its last 429, if it carried one.
    told: Option<Duration>,
    last: Instant,
}

/// A target's own wait, as [`Targets::backing_off`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub until: Instant,
    /// Taken as refused on its own (else it waits the `Retry-After` of a lone 429).
    pub own: bool,
    /// The `Retry-After` its last 429 carried.
    pub told: Option<Duration>,
}

/// The longest a `Retry-After` pauses an endpoint or a token when its 429 came alone, from a
/// target not yet known either way, on an endpoint with no target refused on its own: long
/// enough to honour a token's short pause in full, short enough that a broken account costs its
/// neighbours a few seconds, once.
pub const MAX_UNPROVEN_PAUSE: Duration = Duration::from_secs(5);

/// Whose a 429 is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The target's own: it backs off alone until this instant.
    Target(Instant),
    /// The endpoint's or the token's pace, which a `Retry-After` pauses for `pause` (in full
    /// in a burst of 429s; a lone one at most [`MAX_UNPROVEN_PAUSE`], and not at all once the
    /// endpoint has targets known to be refused on their own).
    /// `burst` when other recent calls were refused too: a pace never limited before is first
    /// cut by a burst, never by a lone 429. `first` when it is the first 429 of the target's
    /// streak: only such a 429 counts in the endpoint's share, so that one target tried again
    /// and again does not read as a limit that refuses many.
    Shared {
        pause: Option<Duration>,
        burst: bool,
        first: bool,
    },
}

/// How often, at most, the stale targets are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The targets of one token with 429s on record, keyed as their circuits are.
#[derive(Debug, Default)]
pub struct Targets {
    map: HashMap<(Endpoint, String), Streak>,
    /// Targets taken as refused on their own, per endpoint (a fixed set).
    own: HashMap<Endpoint, usize>,
    swept: Option<Instant>,
}

impl Targets {
    /// A success: the target's streak, and any back-off, end.
    pub fn succeeded(&mut self, key: &(Endpoint, String)) {
        if let Some(s) = self.map.remove(key) {
            self.unown(key.0, &s);
        }
    }

    fn unown(&mut self, endpoint: Endpoint, s: &Streak) {
        if s.own
            && let Some(n) = self.own.get_mut(&endpoint)
        {
            *n = n.saturating_sub(1);
        }
    }

    /// How `key` backs off, if it does at `now`.
    pub fn backing_off(&self, key: &(Endpoint, String), now: Instant) -> Option<Backoff> {
        let s = self.map.get(key)?;
        s.until.filter(|until| *until > now).map(|until| Backoff {
            until,
            own: s.own,
            told: s.told,
        })
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
            .map
            .iter()
            .filter(|(_, s)| s.own)
            .filter_map(|((e, t), s)| s.until.filter(|u| *u > now).map(|u| (*e, t.clone(), u)))
            .collect();
        all.sort_by_key(|(e, t, u)| (*u, *e, t.clone()));
        all.truncate(limit);
        all
    }

    /// A 429 of `key`, with the `Retry-After` it carried; `history` is its endpoint's, `cap`
    /// how long the target's values live (its back-off never outlasts them).
    pub fn throttled(
        &mut self,
        key: &(Endpoint, String),
        history: &Outcomes,
        now: Instant,
        retry_after: Option<Duration>,
        cap: Duration,
    ) -> Scope {
        let cap = cap.min(MAX_TARGET_BACKOFF).max(MIN_TARGET_BACKOFF);
        let burst = history.burst();
        let known_own = self.own(key.0) > 0;
        if !self.map.contains_key(key) && !self.room(now) {
            return Scope::Shared {
                pause: shared_pause(retry_after, burst, !known_own),
                burst,
                first: true,
            };
        }
        let s = self.map.entry(key.clone()).or_insert(Streak {
            count: 0,
            own: false,
            until: None,
            told: None,
            last: now,
        });
        s.count = s.count.saturating_add(1);
        s.last = now;
        s.told = retry_after;
        let p = history.share_without(s.count - 1);
        let k = i32::try_from(s.count).unwrap_or(i32::MAX);
        if !s.own && s.count >= 2 && p <= MAX_SHARE_FOR_OWN && p.powi(k) <= OWN_EVIDENCE {
            s.own = true;
            *self.own.entry(key.0).or_insert(0) += 1;
        }
        if s.own {
            let doubling = MIN_TARGET_BACKOFF
                .saturating_mul(2u32.saturating_pow(s.count.saturating_sub(2).min(16)));
            let wait = retry_after.unwrap_or(doubling).min(cap);
            let until = now.checked_add(wait).unwrap_or(now);
            s.until = Some(until);
            return Scope::Target(until);
        }
        // Not known as its own yet: the call comes back at its next turn of the shared pace,
        // after the wait it was told when the 429 was a lone one (in a burst, the shared scope
        // pauses for everyone instead).
        s.until = retry_after
            .filter(|_| !burst)
            .and_then(|w| now.checked_add(w.min(cap)));
        let first = s.count == 1;
        Scope::Shared {
            pause: shared_pause(retry_after, burst, !known_own),
            burst,
            first,
        }
    }

    /// Whether one more target may be tracked: forgets the stale ones when full.
    fn room(&mut self, now: Instant) -> bool {
        if self.map.len() < MAX_TRACKED {
            return true;
        }
        self.forget(now);
        self.map.len() < MAX_TRACKED
    }

    /// Keeps only the targets `keep` says are still polled (a reload removed the others).
    pub fn retain(&mut self, keep: impl Fn(&(Endpoint, String)) -> bool) {
        let mut gone = Vec::new();
        self.map.retain(|k, s| {
            let kept = keep(k);
            if !kept && s.own {
                gone.push(k.0);
            }
            kept
        });
        self.unown_all(gone);
    }

    fn unown_all(&mut self, gone: Vec<Endpoint>) {
        for e in gone {
            if let Some(n) = self.own.get_mut(&e) {
                *n = n.saturating_sub(1);
            }
        }
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

    /// Forgets the targets not refused for [`FORGET_AFTER`] and not backing off.
    pub fn forget(&mut self, now: Instant) {
        self.swept = Some(now);
        let mut gone = Vec::new();
        self.map.retain(|k, s| {
            let kept = s.until.is_some_and(|u| u > now)
                || now.saturating_duration_since(s.last) < FORGET_AFTER;
            if !kept && s.own {
                gone.push(k.0);
            }
            kept
        });
        self.unown_all(gone);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// How long a shared 429's `Retry-After` pauses its scope: in full in a `burst`, else at most
/// [`MAX_UNPROVEN_PAUSE`] when `unproven` (no target of the endpoint known to be refused on its
/// own), else not at all.
fn shared_pause(retry_after: Option<Duration>, burst: bool, unproven: bool) -> Option<Duration> {
    match retry_after {
        Some(w) if burst => Some(w),
        Some(w) if unproven => Some(w.min(MAX_UNPROVEN_PAUSE)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: Endpoint = Endpoint::new("delivery_account");
    const CAP: Duration = Duration::from_secs(300);

    fn key(t: &str) -> (Endpoint, String) {
        (E, t.to_owned())
    }

    fn history(ok: u32, throttled: u32) -> Outcomes {
        let mut h = Outcomes::default();
        for _ in 0..ok {
            h.success();
        }
        for _ in 0..throttled {
            h.throttled(true);
        }
        h
    }

    #[test]
    fn a_target_refused_twice_while_its_neighbours_succeed_is_refused_on_its_own() {
        let mut t = Targets::default();
        let now = Instant::now();
        let h = history(100, 0);
        assert_eq!(
            t.throttled(&key("7"), &h, now, None, CAP),
            Scope::Shared {
                pause: None,
                burst: false,
                first: true
            },
            "one 429 says nothing yet"
        );
        assert_eq!(
            t.throttled(&key("7"), &h, now, None, CAP),
            Scope::Target(now + MIN_TARGET_BACKOFF)
        );
        assert_eq!(
            t.throttled(&key("7"), &h, now, None, CAP),
            Scope::Target(now + MIN_TARGET_BACKOFF * 2),
            "doubling"
        );
        assert_eq!(t.own(E), 1);
        assert!(t.backing_off(&key("7"), now).is_some_and(|b| b.own));
        assert_eq!(t.list_own(now, 10).len(), 1);
        t.succeeded(&key("7"));
        assert_eq!(t.own(E), 0);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn while_a_shared_limit_refuses_many_calls_a_streak_must_be_long_to_be_the_targets_own() {
        let mut t = Targets::default();
        let now = Instant::now();
        // A quarter of the endpoint's calls refused: 0.25^k <= 0.01 takes four in a row.
        let h = history(96, 32);
        for _ in 0..3 {
            assert!(matches!(
                t.throttled(&key("7"), &h, now, None, CAP),
                Scope::Shared { .. }
            ));
        }
        assert!(matches!(
            t.throttled(&key("7"), &h, now, None, CAP),
            Scope::Target(_)
        ));
        // Half of them: never, however long the streak (nor at the start, when nothing is
        // known and the share reads one half).
        let h = history(64, 64);
        for _ in 0..20 {
            assert!(matches!(
                t.throttled(&key("8"), &h, now, None, CAP),
                Scope::Shared { .. }
            ));
        }
        assert!((Outcomes::default().share_without(0) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_back_off_follows_retry_after_and_never_outlives_the_values() {
        let mut t = Targets::default();
        let now = Instant::now();
        let h = history(100, 0);
        let ra = Some(Duration::from_secs(30));
        assert_eq!(
            t.throttled(&key("7"), &h, now, ra, CAP),
            Scope::Shared {
                pause: Some(MAX_UNPROVEN_PAUSE),
                burst: false,
                first: true
            },
            "a first lone 429 pauses its scope briefly"
        );
        assert_eq!(
            t.backing_off(&key("7"), now)
                .map(|b| (b.until, b.own, b.told)),
            Some((now + Duration::from_secs(30), false, ra)),
            "a lone 429 waits its Retry-After itself"
        );
        let huge = Some(Duration::from_secs(86_400));
        assert_eq!(
            t.throttled(&key("7"), &h, now, huge, Duration::from_secs(60)),
            Scope::Target(now + Duration::from_secs(60))
        );
        assert_eq!(
            t.throttled(&key("7"), &h, now, huge, Duration::from_secs(86_400)),
            Scope::Target(now + MAX_TARGET_BACKOFF)
        );
        let mut h2 = Outcomes::default();
        for _ in 0..100 {
            h2.success();
        }
        for _ in 0..40 {
            t.throttled(&key("8"), &h2, now, None, CAP);
        }
        assert!(
            t.backing_off(&key("8"), now).unwrap().until <= now + CAP,
            "doubling is capped"
        );
    }

    #[test]
    fn stale_targets_are_forgotten_and_the_map_is_bounded() {
        let mut t = Targets::default();
        let now = Instant::now();
        let h = history(100, 0);
        t.throttled(&key("gone"), &h, now, None, CAP);
        t.throttled(&key("gone"), &h, now, None, CAP);
        assert_eq!(t.own(E), 1);
        t.forget(now + FORGET_AFTER);
        assert_eq!(t.len(), 0);
        assert_eq!(t.own(E), 0, "a forgotten target is no longer counted");
        for i in 0..MAX_TRACKED {
            t.throttled(&key(&i.to_string()), &h, now, None, CAP);
        }
        assert_eq!(t.len(), MAX_TRACKED);
        assert_eq!(
            t.throttled(&key("one more"), &h, now, None, CAP),
            Scope::Shared {
                pause: None,
                burst: false,
                first: true
            },
            "past the bound a 429 is taken as shared"
        );
        assert_eq!(t.len(), MAX_TRACKED);
        t.throttled(&key("later"), &h, now + FORGET_AFTER, None, CAP);
        assert_eq!(t.len(), 1, "full: the stale ones made room");
    }

    #[test]
    fn the_share_counts_only_the_last_answers_and_a_burst_only_first_429s() {
        let mut h = Outcomes::default();
        for _ in 0..200 {
            h.throttled(true);
        }
        for _ in 0..128 {
            h.success();
        }
        assert!(h.share_without(0) < 0.01);
        assert!(!h.burst());
        h.throttled(true);
        h.throttled(true);
        assert!(!h.burst(), "two among sixteen are not a burst yet");
        // One target tried again and again while its neighbours succeed: counted in the share,
        // not in a burst.
        for _ in 0..5 {
            h.throttled(false);
            h.success();
        }
        assert!(!h.burst());
        assert!(h.share_without(0) > h.share_without(5));
        h.throttled(true);
        assert!(h.burst());
        assert!((Outcomes::default().share_without(0) - 0.5).abs() < 1e-9);
        // Two targets, every answer a 429: a burst all the same.
        let mut two = Outcomes::default();
        two.success();
        for first in [true, true, false] {
            two.throttled(first);
            assert!(!two.burst());
        }
        two.throttled(false);
        assert!(two.burst());
    }
}
