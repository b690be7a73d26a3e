//! Keeping a token's pacer across a restart: what its private state has learned and must still
//! honour, filled into the records of `DIR/pace.json` ([`crate::storage::pace`]), and taken
//! back from them before the first call, whatever has ended by then left out and the rest held
//! to the pacer's bounds. No clock, no lock, no I/O: the instants are passed in ([`Clocks`]).

use std::time::Duration;

use super::state::State;
use super::targets::MAX_TARGETS;
use crate::storage::pace::{
    Clocks, KeptBackoff, KeptEndpoint, KeptOutage, KeptPace, KeptPacer, millis,
};
use crate::upstream::endpoint::Endpoint;

/// What taking back a kept pacer did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resumed {
    /// Paces (the token's, endpoints') that start at their kept rate.
    pub rates: usize,
    /// Pauses still in force.
    pub pauses: usize,
    pub outages: usize,
    pub backoffs: usize,
    /// Entries left out: ended, of an endpoint this version lacks, or past the bounds.
    pub dropped: usize,
}

impl Resumed {
    /// Whether anything was taken back.
    pub fn any(&self) -> bool {
        self.rates + self.pauses + self.outages + self.backoffs > 0
    }
}

/// What the pace `c` keeps at `clocks.now`: its learned curve, and the end of a pause in force.
fn keep_pace(c: &super::control::Control, clocks: Clocks) -> KeptPace {
    KeptPace {
        curve: c.curve(),
        paused_until_ms: c.held_until(clocks.now).map(|at| clocks.unix(at)),
    }
}

/// Takes `kept` back into `c`; counts into `r`.
fn resume_pace(c: &mut super::control::Control, kept: &KeptPace, clocks: Clocks, r: &mut Resumed) {
    let until = kept
        .paused_until_ms
        .map(|ms| clocks.instant(ms))
        .filter(|u| *u > clocks.now);
    if until.is_some() {
        r.pauses += 1;
    } else if kept.paused_until_ms.is_some() {
        r.dropped += 1;
    }
    if c.resume(kept.curve, until, clocks.now) {
        r.rates += 1;
    } else if kept.curve.is_some() {
        r.dropped += 1;
    }
}

impl State {
    /// What this token's pacer has learned and must still honour at `clocks.now`.
    pub(super) fn keep(&self, clocks: Clocks) -> KeptPacer {
        let now = clocks.now;
        let endpoints = self
            .ways
            .iter()
            .map(|(e, w)| KeptEndpoint {
                endpoint: e.as_str().to_owned(),
                pace: keep_pace(&w.control, clocks),
                window_open: w.slow_start.window().is_none(),
                outage: w
                    .outage
                    .down()
                    .filter(|d| d.next_probe() > now && !d.probing())
                    .map(|d| KeptOutage {
                        since_ms: clocks.unix(d.since),
                        next_probe_ms: clocks.unix(d.next_probe()),
                        cooldown_ms: millis(d.cooldown),
                    }),
            })
            .filter(|k| !k.pace.is_empty() || k.window_open || k.outage.is_some())
            .collect();
        let mut backoffs: Vec<KeptBackoff> = self
            .targets
            .own_backoffs(now)
            .into_iter()
            .map(|(e, target, until, refused)| KeptBackoff {
                endpoint: e.as_str().to_owned(),
                target,
                until_ms: clocks.unix(until),
                refused,
            })
            .collect();
        backoffs.sort_by(|a, b| (&a.endpoint, &a.target).cmp(&(&b.endpoint, &b.target)));
        KeptPacer {
            token: keep_pace(&self.token, clocks),
            endpoints,
            backoffs,
        }
    }

    /// Takes back what an earlier process of this token kept, before any call: `known` are
    /// the endpoints this version calls (an endpoint not among them is left out, so at most
    /// those), at most as many back-offs as the token keeps records
    /// ([`MAX_TARGETS`]). What has ended by `clocks.now` is left out.
    pub(super) fn resume(
        &mut self,
        kept: &KeptPacer,
        known: &[Endpoint],
        clocks: Clocks,
    ) -> Resumed {
        let now = clocks.now;
        let mut r = Resumed::default();
        resume_pace(&mut self.token, &kept.token, clocks, &mut r);
        let find = |name: &str| known.iter().copied().find(|e| e.as_str() == name);
        for k in &kept.endpoints {
            let Some(e) = find(&k.endpoint).filter(|e| !self.ways.contains_key(e)) else {
                r.dropped += 1;
                continue;
            };
            let w = self.way(e, now);
            resume_pace(&mut w.control, &k.pace, clocks, &mut r);
            if k.window_open {
                w.slow_start.open();
            }
            if let Some(o) = k.outage {
                let next = clocks.instant(o.next_probe_ms);
                w.outage.restore(
                    clocks.instant(o.since_ms),
                    next,
                    Duration::from_millis(o.cooldown_ms),
                    now,
                );
                if w.outage.down().is_some() {
                    r.outages += 1;
                } else {
                    r.dropped += 1;
                }
            }
        }
        for b in kept.backoffs.iter().take(MAX_TARGETS) {
            let taken = find(&b.endpoint).is_some_and(|e| {
                self.targets.restore_own(
                    (e, b.target.clone()),
                    clocks.instant(b.until_ms),
                    b.refused,
                    now,
                )
            });
            if taken {
                r.backoffs += 1;
            } else {
                r.dropped += 1;
            }
        }
        r.dropped += kept.backoffs.len().saturating_sub(MAX_TARGETS);
        self.tick(now);
        r
    }
}

#[cfg(test)]
mod tests {
    //! Keeping and taking back a token's learned state, at chosen instants: no runtime, no clock.

    use std::collections::BTreeMap;

    use tokio::time::Instant;

    use super::*;
    use crate::settings::BreakerPolicy;
    use crate::storage::pace::learned_endpoint;
    use crate::upstream::pacer::control::{Control, MAX_PAUSE};
    use crate::upstream::pacer::outage::Standing;
    use crate::upstream::pacer::shape::{MAX_TARGET_BACKOFF, Outcomes, Scope};
    use crate::upstream::pacer::targets::Targets;

    const E: Endpoint = Endpoint::new("delivery_account");
    const KNOWN: [Endpoint; 1] = [E];
    /// 2027-01-15, in Unix milliseconds: the wall clock of these tests' first process.
    const WALL: u64 = 1_800_000_000_000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn fresh(now: Instant) -> State {
        State::new(now, 8, None, BTreeMap::new())
    }

    /// A pace that learned from 20 successes over a second and then a 429 asking for `pause`.
    fn learned(t0: Instant, pause: Option<Duration>) -> Control {
        let mut c = Control::new(t0, None);
        for i in 0..20 {
            let at = t0 + ms(50 * i);
            c.tick(at, true, true);
            c.admitted(at, i);
            c.succeeded(at);
        }
        let at = t0 + ms(1000);
        c.tick(at, true, true);
        c.throttled(at, at, pause, false);
        c
    }

    /// A token whose own pace and one endpoint's were learned, paused by the token's 429
    /// (30 s), the endpoint out of service (its probe 1 s away, window open) and one target
    /// refused on its own (1 s back-off), all at one instant, and what it keeps then (the wall
    /// clock reading [`WALL`]).
    fn taught(t0: Instant) -> (State, KeptPacer) {
        let mut s = fresh(t0);
        s.token = learned(t0, Some(Duration::from_secs(30)));
        let at = t0 + ms(1000);
        let w = s.way(E, t0);
        w.control = learned(t0, None);
        w.slow_start.open();
        for (seq, target) in (1..=3).zip([11, 12, 13]) {
            w.outage
                .failed(at, at, target, Standing::Good, seq, Duration::from_secs(60));
        }
        assert!(w.outage.down().is_some());
        let neighbours = Outcomes::of(100, 0);
        let key = (E, "1001".to_owned());
        let cap = Duration::from_secs(300);
        s.targets.throttled(&key, &neighbours, at, at, None, cap);
        let own = s.targets.throttled(&key, &neighbours, at, at, None, cap);
        assert!(matches!(own, Scope::Target(_)), "{own:?}");
        let kept = s.keep(clocks_at(at, WALL));
        (s, kept)
    }

    /// The monotonic clock at `now` read with the wall clock at `unix_ms`.
    fn clocks_at(now: Instant, unix_ms: u64) -> Clocks {
        Clocks { now, unix_ms }
    }

    /// What a resume took back: rates, pauses, outages, back-offs, and what it dropped.
    fn counts(r: Resumed) -> [usize; 5] {
        [r.rates, r.pauses, r.outages, r.backoffs, r.dropped]
    }

    fn close(a: Option<f64>, b: Option<f64>) -> bool {
        a.zip(b)
            .is_some_and(|(a, b)| (a - b).abs() <= 1e-9 * a.abs().max(1.0))
    }

    #[test]
    fn what_a_token_learned_comes_back_whole_after_a_restart_through_json() {
        let (s, kept) = taught(Instant::now());
        let text = serde_json::to_string(&kept).unwrap();
        let read: KeptPacer = serde_json::from_str(&text).unwrap();
        assert_eq!(read, kept);
        // The next process starts half a second later, its monotonic clock elsewhere.
        let later = Instant::now() + ms(5_000);
        let clocks = clocks_at(later, WALL + 500);
        let mut next = fresh(later);
        let resumed = next.resume(&read, &KNOWN, clocks);
        assert_eq!(counts(resumed), [2, 1, 1, 1, 0]);
        // At the learned rate at once, not above it, and no slow start.
        assert!(s.token.rate().is_some());
        assert!(
            close(next.token.rate(), s.token.rate()),
            "{:?}",
            next.token.rate()
        );
        let (was, now) = (&s.ways[&E], &next.ways[&E]);
        assert!(close(now.control.rate(), was.control.rate()));
        assert_eq!(now.slow_start.window(), None);
        // The token's pause ends when it did: 29.5 s from the restart.
        let resumes = next.token.resumes_at(later).unwrap();
        let left = resumes.saturating_duration_since(later);
        assert!(left > ms(29_490) && left <= ms(29_500), "{left:?}");
        // The outage goes on, its probe half a second away; the target backs off alone.
        let down = next.down(E).unwrap();
        assert_eq!(down.next_probe().saturating_duration_since(later), ms(500));
        let backoff = next
            .targets
            .backing_off(&(E, "1001".to_owned()), later)
            .unwrap();
        assert!(backoff.own);
        assert_eq!(backoff.until.saturating_duration_since(later), ms(500));
        assert_eq!(next.targets.own(E), 1);
        // Kept again, it says the same.
        let again = next.keep(clocks);
        assert_eq!(again.backoffs, kept.backoffs);
        assert_eq!(again.endpoints[0].outage, kept.endpoints[0].outage);
        assert_eq!(again.token.paused_until_ms, kept.token.paused_until_ms);
    }

    #[test]
    fn what_has_ended_by_the_restart_is_dropped_and_the_paces_stay() {
        let (s, kept) = taught(Instant::now());
        // 40 s later: the pause (30 s), the probe (1 s) and the back-off (1 s) are over.
        let later = Instant::now();
        let mut next = fresh(later);
        let resumed = next.resume(&kept, &KNOWN, clocks_at(later, WALL + 40_000));
        assert_eq!(counts(resumed), [2, 0, 0, 0, 3]);
        assert!(!next.token.paused(later));
        assert!(next.down(E).is_none());
        assert_eq!(next.targets.own(E), 0);
        assert!(close(next.token.rate(), s.token.rate()));
    }

    #[test]
    fn a_kept_state_is_held_to_the_bounds_whatever_the_file_says() {
        let now = Instant::now();
        let clocks = clocks_at(now, WALL);
        let day = WALL + 86_400_000;
        let endpoint = |name: &str, rate| learned_endpoint(name, rate, None);
        let backoff = |endpoint: &str, target: &str| KeptBackoff {
            endpoint: endpoint.to_owned(),
            target: target.to_owned(),
            until_ms: day,
            refused: 9,
        };
        let kept = KeptPacer {
            // A pause a day away is held to MAX_PAUSE; an unlimited rate is no rate.
            token: learned_endpoint("the token's", 1e9, Some(day)).pace,
            endpoints: vec![
                endpoint("delivery_account", 7.0),
                // Twice the same endpoint: the first stands.
                endpoint("delivery_account", 70.0),
                // An endpoint this version does not call.
                endpoint("no_such_endpoint", 7.0),
            ],
            backoffs: vec![
                // A back-off a day away is held to MAX_TARGET_BACKOFF.
                backoff("delivery_account", "1001"),
                backoff("no_such_endpoint", "1002"),
            ],
        };
        let mut s = fresh(now);
        let resumed = s.resume(&kept, &KNOWN, clocks);
        assert_eq!(counts(resumed), [1, 1, 0, 1, 4]);
        assert_eq!(s.ways.len(), 1);
        assert!(close(s.ways[&E].control.rate(), Some(7.0)));
        assert_eq!(s.token.rate(), None);
        assert_eq!(s.token.resumes_at(now), now.checked_add(MAX_PAUSE));
        let b = s.targets.backing_off(&(E, "1001".to_owned()), now).unwrap();
        assert_eq!(b.until, now + MAX_TARGET_BACKOFF);
    }

    #[test]
    fn no_more_back_offs_are_taken_back_than_a_token_tracks() {
        // The token's records, bounded here at a few hundred, at MAX_TARGETS outside tests.
        const ROOM: usize = 300;
        let now = Instant::now();
        let clocks = clocks_at(now, WALL);
        let kept = KeptPacer {
            backoffs: (0..=ROOM)
                .map(|i| KeptBackoff {
                    endpoint: E.as_str().to_owned(),
                    target: i.to_string(),
                    until_ms: WALL + 60_000,
                    refused: 2,
                })
                .collect(),
            ..KeptPacer::default()
        };
        let mut s = fresh(now);
        s.targets = Targets::with_capacity(BreakerPolicy::default(), ROOM);
        let resumed = s.resume(&kept, &KNOWN, clocks);
        assert_eq!(resumed.backoffs, ROOM);
        assert_eq!(resumed.dropped, 1);
        assert_eq!(s.targets.own(E), ROOM);
    }

    #[test]
    fn a_pace_that_learned_nothing_keeps_nothing() {
        let now = Instant::now();
        let s = fresh(now);
        let kept = s.keep(clocks_at(now, WALL));
        assert!(kept.is_empty(), "{kept:?}");
    }
}
