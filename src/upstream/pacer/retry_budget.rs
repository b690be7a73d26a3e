//! The retry budget of one endpoint of a token: retries of failed calls (a 5xx, a timeout, a
//! refused connection) are at most [`RATIO`] of the first attempts over the last [`WINDOW`],
//! plus a floor of [`FLOOR`] per window. Plain state driven by explicit instants, as
//! [`super::control`]: no clock, no lock, no I/O.
//!
//! Why these numbers. A retry that the provider answers as it answered the first attempt only
//! adds load to a service that is already failing, and every exporter pointed at it does the
//! same: without a budget, `api.max_retries` of 2 triples what a fleet asks of a provider that
//! is down. The anchors:
//!
//! - the Google SRE book ("Handling Overload") allows a client at most 10 % retries of its
//!   requests and at most 3 attempts per request;
//! - Finagle's `RetryBudget` and Envoy's `retry_budget` allow 20 %, Finagle over 10 s with a
//!   floor of 10 retries a second (a floor sized for RPC servers doing thousands of calls);
//! - the AWS SDKs' standard mode spends a quota of 500 tokens, 5 per retry, refilled by
//!   successes.
//!
//! We take the SRE book's 10 %, the tighter of the two shares: our calls are reads that the next
//! run makes again anyway, and a value stays served until its `max_age`, so a refused retry costs
//! at most one interval of freshness, never a lost value. The window is Finagle's 10 s: long
//! enough to cover a collector run's burst of first attempts, short enough that a budget earned
//! before an outage is spent within seconds of it. The floor is small ([`FLOOR`], half a retry a
//! second): a tenant of one account whose call failed once still gets its retry, and a broken
//! target beside a few healthy ones keeps its `api.max_retries`, while a fleet of thousands is
//! held to its share. The attempts per request stay bounded by `api.max_retries` as before.
//!
//! A 429 (or another "come back later") is not retried through this budget: the call waits for
//! the pace the pacer learned from it, which is the provider's own answer to how much it takes.

use std::time::Duration;

use tokio::time::Instant;

use super::window::Window;

/// The share of first attempts that may be retried.
pub const RATIO: f64 = 0.1;
/// The sliding window first attempts and retries are counted over.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Retries allowed per window whatever the first attempts: a lone broken target keeps its retry.
pub const FLOOR: u32 = 5;
/// The kinds of event the window counts.
#[derive(Clone, Copy)]
enum Kind {
    First,
    Retry,
}

/// The window, over [`WINDOW`]: ten slots of a second (a test holds the two together).
type Counts = Window<2, 1_000>;

/// First attempts and retries over the last [`WINDOW`] ([`super::window`]).
#[derive(Clone, Debug)]
pub struct RetryBudget {
    window: Counts,
}

impl RetryBudget {
    pub fn new(origin: Instant) -> Self {
        RetryBudget {
            window: Window::new(origin),
        }
    }

    /// First attempts and retries counted over the window ending at `now`.
    fn totals(&self, now: Instant) -> (u32, u32) {
        let [firsts, retries] = self.window.totals(now);
        (firsts, retries)
    }

    /// A first attempt went out: it earns [`RATIO`] of a retry.
    pub fn sent(&mut self, now: Instant) {
        self.window.add(now, Kind::First as usize);
    }

    /// Retries the window allows at `now`: the floor plus the share of first attempts.
    pub fn allowance(&self, now: Instant) -> u32 {
        let (firsts, _) = self.totals(now);
        FLOOR.saturating_add((f64::from(firsts) * RATIO) as u32)
    }

    /// Whether a retry may go at `now`; if so it is counted.
    pub fn try_retry(&mut self, now: Instant) -> bool {
        let (_, retries) = self.totals(now);
        if retries >= self.allowance(now) {
            return false;
        }
        self.window.add(now, Kind::Retry as usize);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::cooldown::at;

    #[test]
    fn the_window_counts_over_the_documented_span() {
        assert_eq!(Counts::span(), WINDOW);
    }

    #[test]
    fn a_lone_broken_target_keeps_its_retries_within_the_floor() {
        let t0 = Instant::now();
        let mut b = RetryBudget::new(t0);
        b.sent(t0);
        assert!(b.try_retry(at(t0, 100)));
        assert!(b.try_retry(at(t0, 400)));
        let left = (0..).take_while(|_| b.try_retry(at(t0, 400))).count();
        assert_eq!(left, FLOOR as usize - 2);
    }

    #[test]
    fn retries_are_held_to_a_tenth_of_first_attempts_plus_the_floor() {
        let t0 = Instant::now();
        let mut b = RetryBudget::new(t0);
        // A run of 600 first attempts within two seconds, every one failing.
        for i in 0..600 {
            b.sent(at(t0, i * 3));
        }
        let granted = (0..1_200)
            .filter(|i| b.try_retry(at(t0, 1_800 + i)))
            .count();
        assert_eq!(
            granted,
            60 + FLOOR as usize,
            "10 % of 600 first attempts plus the floor"
        );
    }

    #[test]
    fn the_budget_earned_before_an_outage_is_spent_within_the_window_and_then_refills_only_with_first_attempts()
     {
        let t0 = Instant::now();
        let mut b = RetryBudget::new(t0);
        for i in 0..100 {
            b.sent(at(t0, i * 10));
        }
        while b.try_retry(at(t0, 1_500)) {}
        // Past the window, the first attempts that earned it have left: the floor alone.
        let later = at(t0, 1_500) + WINDOW;
        assert_eq!(b.allowance(later), FLOOR);
        let granted = (0..100)
            .filter(|&i| b.try_retry(later + Duration::from_millis(i)))
            .count();
        assert_eq!(granted, FLOOR as usize);
    }

    #[test]
    fn over_any_window_retries_never_exceed_the_share_plus_the_floor() {
        // A steady fleet: 30 first attempts a second for a minute, every call failing and
        // asking for two retries.
        let t0 = Instant::now();
        let mut b = RetryBudget::new(t0);
        let mut retries = Vec::new();
        for ms in (0..60_000u64).step_by(33) {
            let now = at(t0, ms);
            b.sent(now);
            for _ in 0..2 {
                if b.try_retry(now) {
                    retries.push(ms);
                }
            }
        }
        // Retries in any 10 s window: at most 10 % of ~300 first attempts plus the floor.
        for start in (0..50_000u64).step_by(500) {
            let n = retries
                .iter()
                .filter(|&&ms| ms >= start && ms < start + 10_000)
                .count();
            assert!(
                n <= 31 + FLOOR as usize,
                "{n} retries in the window from {start} ms"
            );
        }
        let share = retries.len() as f64 / (60_000.0 / 33.0);
        assert!(
            share <= RATIO + 0.03,
            "retries were {share:.3} of first attempts"
        );
    }

    #[test]
    fn an_instant_before_the_origin_or_far_after_it_does_not_panic() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let mut b = RetryBudget::new(t0);
        b.sent(Instant::now());
        assert!(b.try_retry(Instant::now()));
        let far = t0 + Duration::from_secs(10 * 365 * 86_400);
        b.sent(far);
        assert!(b.try_retry(far));
    }
}
