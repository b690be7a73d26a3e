//! Whose limit a 429 is: one target's own, or the pace its endpoint or token shares. Plain state
//! driven by explicit instants, as [`super::control`].
//!
//! A shared limit (a token bucket on the token or on one endpoint) refuses whichever calls come
//! when it is empty: a target refused once goes through at its next turn as often as any other.
//! A limit of one target's own (an account under abuse protection, a proxy rule on one path)
//! refuses that target every time while its neighbours on the same endpoint succeed. So a 429 is
//! taken as the target's own once the target has been refused `k` times in a row (at least
//! twice) where a shared limit, refusing the endpoint's other calls at the share `p` it does now,
//! would have done so by chance at most once in a hundred (`p^k <= 0.01`). Such a target backs
//! off alone: `Retry-After` if the answer said, else doubling from a second, never longer than
//! its values live; its 429s are left out of the endpoint's share, so it never cuts anyone
//! else's pace.
//!
//! A target's first lone 429 is undecided: the target waits a moment on its own and its next
//! answer decides, while the pace it may belong to stops climbing. A success says the 429 was
//! the shared limit's, and the pacer cuts then (as for a call sent when the 429 was); refused
//! again and not yet its own, the 429 is shared and cuts a pace already limited, though not
//! one never limited (a broken target's second answer, before it is known as such). A burst
//! of first 429s (many targets refused at once: a limit that is spent), or a retry refused
//! while the endpoint refuses many calls, is shared at once and pauses for its `Retry-After`
//! in full.
//! So a tenth of a fleet refused on its own from a cold start does not slow the rest, and a
//! shared limit is still cut at its lone 429s, one answer later.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::upstream::endpoint::Endpoint;

/// Targets with a 429 on record kept per token at most: keys come from the config, and past
/// this a new one is simply taken as shared, as before this module.
pub const MAX_TRACKED: usize = 100_000;
/// The first back-off of a target refused on its own, when the answer named no wait.
pub const MIN_TARGET_BACKOFF: Duration = Duration::from_secs(1);
/// How long a target whose 429 is undecided waits before it is tried again (longer if told):
/// a shared limit that refused it at a pace just over its rate has refilled by then, so its
/// next answer says whose the 429 was, not what the limit held at that same instant.
pub const UNDECIDED_WAIT: Duration = Duration::from_millis(250);
/// The longest a lone 429's `Retry-After` pauses its endpoint, tentatively (any success of a
/// call to the endpoint lifts it): long enough to honour a token's short pause in full when
/// nothing else is in flight to show it, short enough to cost little when a call does not come.
pub const MAX_LONE_PAUSE: Duration = Duration::from_secs(5);
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
/// The largest share of refused answers ([`Outcomes::share_without`]) of an endpoint taken as
/// going through: one refusal among the last [`NEIGHBOURHOOD`] reads 2/18, two 3/18.
const STEADY_SHARE: f64 = 0.125;
/// Answers of an endpoint its 429 share is taken over.
const HISTORY: u32 = 128;
/// Answers looked back over to tell a lone 429 from a burst of them.
const NEIGHBOURHOOD: u32 = 16;
/// Answers in a row, every one a shared 429, that make a burst however few targets they came
/// from.
const REFUSED_IN_A_ROW: u32 = 4;
/// First 429s among the last [`NEIGHBOURHOOD`] answers that make the next one part of a burst
/// (more than a third of them): a limit that is spent refuses most calls at once; broken
/// targets, a tenth of a fleet, come this close together by chance at about one of their 429s
/// in three hundred.
const BURST: u32 = 6;

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
    /// says "unknown" (near one half) rather than "never". The larger of that share over the
    /// last [`HISTORY`] answers and over the last [`NEIGHBOURHOOD`] (with the target's own in
    /// it): a limit refuses in clusters (a pace that climbed past it, a bucket spent), and a
    /// target tried again within one is refused again as often as the cluster's share says,
    /// not the longer history's.
    pub fn share_without(&self, mine: u32) -> f64 {
        let ones = self.all.ones(HISTORY);
        let mine = mine.min(ones);
        let long = (f64::from(ones - mine) + 1.0) / (f64::from(self.all.len - mine) + 2.0);
        let near = self.all.len.min(NEIGHBOURHOOD);
        let short = (f64::from(self.all.ones(NEIGHBOURHOOD)) + 1.0) / (f64::from(near) + 2.0);
        long.max(short)
    }

    /// Whether the endpoint's calls have been going through: a long enough history, and at
    /// most the last answer refused among the last [`NEIGHBOURHOOD`] (and as few over the
    /// whole history).
    pub fn steady(&self) -> bool {
        self.all.len >= 2 * NEIGHBOURHOOD && self.share_without(0) <= STEADY_SHARE
    }

    /// Whether at least half of the last `n` answers were refused (`n` answers at least on
    /// record): a limit spent, not a few targets refused on their own.
    pub fn mostly_refused(&self, n: u32) -> bool {
        self.all.len >= n && self.all.ones(n).saturating_mul(2) >= n
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
    /// When the call of its first undecided 429 went out, until its next answer decides.
    undecided: Option<Instant>,
    /// Of its 429s, those counted in its endpoint's [`Outcomes`]: its first, and those taken
    /// as shared (an undecided one tried again is not: its evidence is its own streak).
    counted: u32,
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

/// Whose a 429 is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The target's own: it backs off alone until this instant.
    Target(Instant),
    /// Not known yet: the target's next answer decides (see the module's documentation). It
    /// waits alone ([`UNDECIDED_WAIT`], or the `Retry-After` it was told); no one's pace is
    /// cut (a `Retry-After` pauses the endpoint only until a call of it succeeds: the pacer's
    /// business). A first 429, counted in its endpoint's [`Outcomes`].
    Undecided,
    /// The endpoint's or the token's pace, which a `Retry-After` pauses for `pause` (a limit
    /// shown to be spent: a `burst` of 429s, or a retry refused again while the endpoint
    /// refuses many). Else the target's retry refused again, not yet known as its own: a pace
    /// already limited is cut, one never limited is not (a broken target's second 429, before
    /// it is known as such), and it waits its own `Retry-After` alone. `first` when it is the
    /// first 429 of the target's streak; `counted` when it goes into the endpoint's
    /// [`Outcomes`] (a target tried again and again while its neighbours succeed, at the end
    /// of a run when they are done, must not read as an endpoint whose every call is refused).
    Shared {
        pause: Option<Duration>,
        burst: bool,
        first: bool,
        counted: bool,
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
    /// A success: the target's streak, and any back-off, end. Returns when the call of its
    /// undecided 429 went out, if it had one: that 429 was the shared limit's after all.
    pub fn succeeded(&mut self, key: &(Endpoint, String)) -> Option<Instant> {
        let s = self.map.remove(key)?;
        self.unown(key.0, &s);
        s.undecided
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

    /// A 429 of `key` to a call sent at `sent_at`, with the `Retry-After` it carried; `history`
    /// is its endpoint's, `cap` how long the target's values live (its back-off never outlasts
    /// them).
    pub fn throttled(
        &mut self,
        key: &(Endpoint, String),
        history: &Outcomes,
        now: Instant,
        sent_at: Instant,
        retry_after: Option<Duration>,
        cap: Duration,
    ) -> Scope {
        let cap = cap.min(MAX_TARGET_BACKOFF).max(MIN_TARGET_BACKOFF);
        let burst = history.burst();
        if !self.map.contains_key(key) && !self.room(now) {
            // Untracked: a burst is shared as ever, a lone 429 too (without its pause), as
            // before targets were told apart.
            return Scope::Shared {
                pause: retry_after.filter(|_| burst),
                burst,
                first: true,
                counted: true,
            };
        }
        let s = self.map.entry(key.clone()).or_insert(Streak {
            count: 0,
            own: false,
            until: None,
            told: None,
            last: now,
            undecided: None,
            counted: 0,
        });
        s.count = s.count.saturating_add(1);
        s.last = now;
        s.told = retry_after;
        let p = history.share_without(s.counted);
        let k = i32::try_from(s.count).unwrap_or(i32::MAX);
        // Within a burst the limit is spent: a target refused again says nothing of its own.
        if !s.own && !burst && s.count >= 2 && p <= MAX_SHARE_FOR_OWN && p.powi(k) <= OWN_EVIDENCE {
            s.own = true;
            s.undecided = None;
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
        let first = s.count == 1;
        if first && !burst {
            // Undecided: the call comes back after a wait of its own, and that answer decides.
            s.undecided = Some(sent_at);
            let wait = retry_after.unwrap_or(Duration::ZERO).max(UNDECIDED_WAIT);
            s.until = now.checked_add(wait.min(cap));
            s.counted += 1;
            return Scope::Undecided;
        }
        // Shared: refused in a burst, or refused again and not (yet) its own.
        s.undecided = None;
        // Refused again while the endpoint refuses many calls: a limit that is spent.
        let spent = burst || p > MAX_SHARE_FOR_OWN;
        s.until = if spent {
            None
        } else {
            retry_after.and_then(|w| now.checked_add(w.min(cap)))
        };
        if first || spent {
            s.counted += 1;
        }
        Scope::Shared {
            pause: retry_after.filter(|_| spent),
            burst: spent,
            first,
            counted: first || spent,
        }
    }

    /// Targets backing off on their own at `now`: endpoint, target, until when, and their
    /// 429s in a row (what the next back-off doubles from). At most [`MAX_TRACKED`], as the
    /// map holds.
    pub fn own_backoffs(&self, now: Instant) -> Vec<(Endpoint, String, Instant, u32)> {
        self.map
            .iter()
            .filter(|(_, s)| s.own)
            .filter_map(|((e, t), s)| {
                s.until
                    .filter(|u| *u > now)
                    .map(|u| (*e, t.clone(), u, s.count))
            })
            .collect()
    }

    /// Takes back a target an earlier process found refused on its own: it backs off until
    /// `until` (at most [`MAX_TARGET_BACKOFF`] from `now`), `count` 429s in a row on record.
    /// A back-off already over, a target already on record, or one past [`MAX_TRACKED`] is
    /// left out. Says whether it was taken.
    pub fn restore_own(
        &mut self,
        key: (Endpoint, String),
        until: Instant,
        count: u32,
        now: Instant,
    ) -> bool {
        if until <= now || self.map.contains_key(&key) || !self.room(now) {
            return false;
        }
        let until = until.min(now.checked_add(MAX_TARGET_BACKOFF).unwrap_or(until));
        *self.own.entry(key.0).or_insert(0) += 1;
        self.map.insert(
            key,
            Streak {
                count: count.max(2),
                own: true,
                until: Some(until),
                told: None,
                last: now,
                undecided: None,
                counted: 0,
            },
        );
        true
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
        let mut t = Targets::default();
        let now = Instant::now();
        let h = history(100, 0);
        assert_eq!(
            t.throttled(&key("7"), &h, now, now, None, CAP),
            Scope::Undecided,
            "one 429 says nothing yet"
        );
        assert_eq!(
            t.throttled(&key("7"), &h, now, now, None, CAP),
            Scope::Target(now + MIN_TARGET_BACKOFF)
        );
        assert_eq!(
            t.throttled(&key("7"), &h, now, now, None, CAP),
            Scope::Target(now + MIN_TARGET_BACKOFF * 2),
            "doubling"
        );
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
        let mut t = Targets::default();
        let sent = Instant::now();
        let now = sent + Duration::from_millis(50);
        let h = history(100, 0);
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
        let mut spent = history(100, 0);
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
        let mut t = Targets::default();
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
        let mut t = Targets::default();
        let now = Instant::now();
        let h = history(100, 0);
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
        let mut h2 = Outcomes::default();
        for _ in 0..100 {
            h2.success();
        }
        for _ in 0..40 {
            t.throttled(&key("8"), &h2, now, now, None, CAP);
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
        t.throttled(&key("gone"), &h, now, now, None, CAP);
        t.throttled(&key("gone"), &h, now, now, None, CAP);
        assert_eq!(t.own(E), 1);
        t.forget(now + FORGET_AFTER);
        assert_eq!(t.len(), 0);
        assert_eq!(t.own(E), 0, "a forgotten target is no longer counted");
        for i in 0..MAX_TRACKED {
            t.throttled(&key(&i.to_string()), &h, now, now, None, CAP);
        }
        assert_eq!(t.len(), MAX_TRACKED);
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
        assert_eq!(t.len(), MAX_TRACKED);
        t.throttled(&key("later"), &h, now + FORGET_AFTER, now, None, CAP);
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
        // No 429 among the last 128: the last sixteen's smoothing (1 / 18) is the floor.
        assert!((h.share_without(0) - 1.0 / 18.0).abs() < 1e-9);
        assert!(!h.burst());
        h.throttled(true);
        h.throttled(true);
        assert!(!h.burst(), "two among sixteen are not a burst");
        // One target tried again and again while its neighbours succeed: counted in the share,
        // not in a burst.
        for _ in 0..5 {
            h.throttled(false);
            h.success();
        }
        assert!(!h.burst());
        // Seven 429s among the last sixteen: the cluster's share, whoever they were.
        assert!((h.share_without(5) - 8.0 / 18.0).abs() < 1e-9);
        for _ in 0..3 {
            h.throttled(true);
            assert!(
                !h.burst(),
                "five first 429s among sixteen are not a burst yet"
            );
        }
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
