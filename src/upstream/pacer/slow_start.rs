//! How many calls of one endpoint may be in flight while its limit is not known yet: a window
//! that starts small and grows with what succeeds, as TCP's congestion window does. Plain state,
//! as [`super::control`]: no clock, no lock, no I/O.
//!
//! Without it a cold start sends `api.concurrency` calls at once and as fast as they are
//! answered, and a provider with a token bucket refuses most of them before the first 429 can
//! teach the pacer anything: 600 accounts on a bucket of 60/s saw 1,436 refusals in their first
//! three seconds. With it, the endpoint starts at [`INITIAL`] calls in flight and each success
//! lets one more go (the window doubles every round trip, as the AWS SDKs' adaptive mode grows
//! from the measured send rate); the first refusals shared by several targets halve the window
//! at once, whatever is already queued behind them, and from there it grows by one call per
//! window of successes. Once the window reaches the connection slots, or the pace the pacer
//! learned from the refusals ([`super::control`]) rests on what went through, it no longer
//! limits anything and the endpoint is open: from then on that pace holds calls back. A healthy provider without limits loses a few round trips at the
//! start (a window of 64 is open after four).
//!
//! The window starts again from [`INITIAL`] when an outage of the endpoint ends
//! ([`super::outage`]): a provider coming back is asked gently, not by every waiting call at once.

use tokio::time::Instant;

/// Calls in flight at a cold start (TCP's initial window is ten segments; ours is a few calls, as
/// each call is a whole request).
pub const INITIAL: f64 = 4.0;

#[derive(Clone, Debug)]
pub struct SlowStart {
    /// Calls that may be in flight; `None` once open.
    window: Option<f64>,
    /// Below this the window doubles per round trip; above it, one call per window.
    threshold: f64,
    /// The last cut: refusals of calls sent before it belong to it.
    last_cut: Option<Instant>,
}

impl Default for SlowStart {
    fn default() -> Self {
        SlowStart {
            window: Some(INITIAL),
            threshold: f64::INFINITY,
            last_cut: None,
        }
    }
}

impl SlowStart {
    /// Whether another call may go with `in_flight` of the endpoint's calls in flight.
    pub fn room(&self, in_flight: usize) -> bool {
        self.window.is_none_or(|w| (in_flight as f64) < w.floor())
    }

    /// The window, `None` once open.
    pub fn window(&self) -> Option<f64> {
        self.window
    }

    /// A call succeeded; `slots` is the token's connection slots, at which the window opens.
    pub fn succeeded(&mut self, slots: usize) {
        let Some(w) = &mut self.window else {
            return;
        };
        // At the connection slots it limits nothing more: open.
        *w += if *w < self.threshold { 1.0 } else { 1.0 / *w };
        if *w >= slots as f64 {
            self.window = None;
        }
    }

    /// A call sent at `sent_at` was refused at `now` by a limit that is not its target's own.
    /// Returns whether the window was cut.
    pub fn refused(&mut self, now: Instant, sent_at: Instant) -> bool {
        let Some(w) = &mut self.window else {
            return false;
        };
        if self.last_cut.is_some_and(|c| sent_at < c) {
            return false;
        }
        *w = (*w / 2.0).max(1.0);
        self.threshold = *w;
        self.last_cut = Some(now);
        true
    }

    /// The pacer learned the endpoint's pace from its refusals: the window limits nothing more.
    pub fn open(&mut self) {
        self.window = None;
    }

    /// The endpoint came back from an outage: it starts again from [`INITIAL`].
    pub fn restart(&mut self) {
        *self = SlowStart::default();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_window_doubles_per_round_trip_of_successes_and_opens_at_the_connection_slots() {
        let mut s = SlowStart::default();
        assert!(s.room(3) && !s.room(4));
        let mut trips = 0;
        while s.window().is_some() {
            let w = s.window().unwrap().floor() as usize;
            for _ in 0..w {
                s.succeeded(64);
            }
            trips += 1;
        }
        assert_eq!(trips, 4, "4 -> 8 -> 16 -> 32 -> 64: open");
        assert!(s.room(10_000));
    }

    #[test]
    fn the_first_refusal_halves_the_window_once_per_event_and_growth_is_then_one_call_per_window() {
        let t0 = Instant::now();
        let mut s = SlowStart::default();
        for _ in 0..12 {
            s.succeeded(64);
        }
        assert_eq!(s.window(), Some(16.0));
        let t1 = t0 + Duration::from_millis(200);
        assert!(s.refused(t1, t0));
        assert_eq!(s.window(), Some(8.0));
        // The other calls already on their way when it was cut belong to the same event.
        assert!(!s.refused(t1 + Duration::from_millis(10), t0));
        assert_eq!(s.window(), Some(8.0));
        for _ in 0..8 {
            s.succeeded(64);
        }
        let w = s.window().unwrap();
        assert!(w > 8.9 && w < 9.1, "{w}");
        // Refused again, by a call sent after the cut: halved again, never below one call.
        for i in 0..10 {
            let at = t1 + Duration::from_millis(100 * (i + 1));
            s.refused(at, at);
        }
        assert_eq!(s.window(), Some(1.0));
        assert!(s.room(0) && !s.room(1));
    }

    #[test]
    fn an_open_window_ignores_refusals_and_a_restart_closes_it_again() {
        let t0 = Instant::now();
        let mut s = SlowStart::default();
        s.open();
        assert_eq!(s.window(), None);
        assert!(!s.refused(t0, t0));
        s.restart();
        assert_eq!(s.window(), Some(INITIAL));
    }
}
