//! The simulator's clock: every date the simulator emits is read from here, so tests can move time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// A settable clock.
///
/// By default it follows the wall clock plus an offset (zero at start), so dates keep moving in a
/// demo. [`SimClock::set`] and [`SimClock::advance`] move the offset and keep the clock ticking;
/// [`SimClock::freeze`] stops it at one instant for tests that need exact dates.
///
/// Clones share one clock (like clones of the simulator share one state), so a test can hand a
/// clone to whatever must follow the simulator's time.
#[derive(Clone, Debug)]
pub struct SimClock {
    mode: Arc<Mutex<Mode>>,
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Wall clock plus this offset.
    Offset(SignedDuration),
    /// Stopped at this instant until set or advanced.
    Frozen(Timestamp),
}

impl Default for SimClock {
    fn default() -> Self {
        Self::new()
    }
}

impl SimClock {
    /// A clock that follows the wall clock.
    pub fn new() -> Self {
        Self {
            mode: Arc::new(Mutex::new(Mode::Offset(SignedDuration::ZERO))),
        }
    }

    /// A clock stopped at `at`.
    pub fn frozen(at: Timestamp) -> Self {
        Self {
            mode: Arc::new(Mutex::new(Mode::Frozen(at))),
        }
    }

    /// The simulator's current instant.
    pub fn now(&self) -> Timestamp {
        match *self.lock() {
            Mode::Offset(offset) => shift(Timestamp::now(), offset),
            Mode::Frozen(at) => at,
        }
    }

    /// Makes `now()` return `ts`; a running clock keeps running from there, a frozen one stays
    /// frozen at `ts`.
    pub fn set(&self, ts: Timestamp) {
        let mut mode = self.lock();
        *mode = match *mode {
            Mode::Offset(_) => Mode::Offset(ts.duration_since(Timestamp::now())),
            Mode::Frozen(_) => Mode::Frozen(ts),
        };
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let step = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        let mut mode = self.lock();
        *mode = match *mode {
            Mode::Offset(offset) => Mode::Offset(offset.saturating_add(step)),
            Mode::Frozen(at) => Mode::Frozen(shift(at, step)),
        };
    }

    /// Stops the clock at `ts`.
    pub fn freeze(&self, ts: Timestamp) {
        *self.lock() = Mode::Frozen(ts);
    }

    /// Lets a frozen clock run again from where it stands.
    pub fn resume(&self) {
        let mut mode = self.lock();
        if let Mode::Frozen(at) = *mode {
            *mode = Mode::Offset(at.duration_since(Timestamp::now()));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mode> {
        self.mode.lock().expect("simulator clock mutex poisoned")
    }
}

/// Adds a signed duration, clamping at the ends of jiff's range instead of failing: a test that
/// moves the clock absurdly far should see an extreme date, not a panic.
pub(crate) fn shift(ts: Timestamp, by: SignedDuration) -> Timestamp {
    ts.checked_add(by).unwrap_or(if by.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// Formats an instant the way every simulated date/time field is sent: `YYYY-MM-DD HH:MM:SS`, UTC.
pub fn format_datetime(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%d %H:%M:%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("valid timestamp")
    }

    #[test]
    fn a_frozen_clock_stays_put_until_advanced() {
        let clock = SimClock::frozen(ts("2025-03-01T23:59:59Z"));
        assert_eq!(clock.now(), ts("2025-03-01T23:59:59Z"));
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.now(), ts("2025-03-02T00:00:01Z"));
        clock.set(ts("2030-01-01T00:00:00Z"));
        assert_eq!(clock.now(), ts("2030-01-01T00:00:00Z"));
    }

    #[test]
    fn a_set_running_clock_keeps_running_from_the_new_instant() {
        let clock = SimClock::new();
        clock.set(ts("2001-01-01T00:00:00Z"));
        let now = clock.now();
        assert!(now >= ts("2001-01-01T00:00:00Z"));
        assert!(now < ts("2001-01-01T00:01:00Z"));
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now() >= ts("2001-01-01T01:00:00Z"));
    }

    #[test]
    fn clones_share_one_clock() {
        let clock = SimClock::frozen(ts("2025-03-01T00:00:00Z"));
        let follower = clock.clone();
        clock.advance(Duration::from_secs(60));
        assert_eq!(follower.now(), ts("2025-03-01T00:01:00Z"));
    }

    #[test]
    fn dates_are_formatted_in_utc_without_a_t() {
        assert_eq!(
            format_datetime(ts("2025-06-30T21:05:09+02:00")),
            "2025-06-30 19:05:09"
        );
    }
}
