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

use std::time::Duration;

use tokio::time::Instant;

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

#[cfg(test)]
impl Outcomes {
    /// `ok` successes, then `throttled` first 429s.
    pub(super) fn of(ok: u32, throttled: u32) -> Outcomes {
        let mut h = Outcomes::default();
        for _ in 0..ok {
            h.success();
        }
        for _ in 0..throttled {
            h.throttled(true);
        }
        h
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
        // The low `n` bits (n is at most HISTORY, 128): none for n = 0, whose shift by 128
        // would overflow.
        let n = last.min(self.len);
        let mask = u128::MAX.checked_shr(128 - n).unwrap_or(0);
        (self.bits & mask).count_ones()
    }
}

/// What is known of one target's 429s: its part of the target's record ([`super::targets`]).
#[derive(Clone, Debug)]
pub(super) struct Streak {
    /// 429s in a row.
    count: u32,
    /// Taken as the target's own: kept until its next success.
    pub(super) own: bool,
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

impl Streak {
    /// A target's record of 429s, before its first is counted.
    pub(super) fn new(now: Instant) -> Streak {
        Streak {
            count: 0,
            own: false,
            until: None,
            told: None,
            last: now,
            undecided: None,
            counted: 0,
        }
    }

    /// A target an earlier process found refused on its own, taken back: it backs off until
    /// `until` (at most [`MAX_TARGET_BACKOFF`] from `now`), `count` 429s in a row on record.
    pub(super) fn restored(until: Instant, count: u32, now: Instant) -> Streak {
        Streak {
            count: count.max(2),
            own: true,
            until: Some(until.min(now.checked_add(MAX_TARGET_BACKOFF).unwrap_or(until))),
            ..Streak::new(now)
        }
    }

    /// Not refused for [`FORGET_AFTER`] and not backing off at `now`: forgotten at the next
    /// sweep.
    pub(super) fn stale(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| u <= now)
            && now.saturating_duration_since(self.last) >= FORGET_AFTER
    }

    /// How the target backs off, if it does at `now`.
    pub(super) fn backing_off(&self, now: Instant) -> Option<Backoff> {
        self.until
            .filter(|until| *until > now)
            .map(|until| Backoff {
                until,
                own: self.own,
                told: self.told,
            })
    }

    /// Backing off on its own at `now`: until when, and its 429s in a row (what the next
    /// back-off doubles from).
    pub(super) fn own_backoff(&self, now: Instant) -> Option<(Instant, u32)> {
        self.until
            .filter(|u| self.own && *u > now)
            .map(|u| (u, self.count))
    }

    /// When the call of its first undecided 429 went out, if it has one.
    pub(super) fn undecided(&self) -> Option<Instant> {
        self.undecided
    }

    /// A 429 of the target to a call sent at `sent_at`, with the `Retry-After` it carried;
    /// `history` is its endpoint's, `cap` how long the target's values live (its back-off
    /// never outlasts them). The streak may become the target's own ([`Streak::own`]).
    pub(super) fn throttled(
        &mut self,
        history: &Outcomes,
        now: Instant,
        sent_at: Instant,
        retry_after: Option<Duration>,
        cap: Duration,
    ) -> Scope {
        let cap = cap.min(MAX_TARGET_BACKOFF).max(MIN_TARGET_BACKOFF);
        let burst = history.burst();
        let s = self;
        s.count = s.count.saturating_add(1);
        s.last = now;
        s.told = retry_after;
        let p = history.share_without(s.counted);
        let k = i32::try_from(s.count).unwrap_or(i32::MAX);
        // Within a burst the limit is spent: a target refused again says nothing of its own.
        if !s.own && !burst && s.count >= 2 && p <= MAX_SHARE_FOR_OWN && p.powi(k) <= OWN_EVIDENCE {
            s.own = true;
            s.undecided = None;
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
}

/// A 429 of a target there is no room to keep a record of: a burst is shared as ever, a lone
/// 429 too (without its pause), as before targets were told apart.
pub(super) fn untracked(history: &Outcomes, retry_after: Option<Duration>) -> Scope {
    let burst = history.burst();
    Scope::Shared {
        pause: retry_after.filter(|_| burst),
        burst,
        first: true,
        counted: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
