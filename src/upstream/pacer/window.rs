//! The pacer's one sliding window of counts: events of `K` kinds counted over the last
//! [`SLOTS`] slots of a fixed length, driven by explicit instants (no clock, no lock). The control counts the
//! successes of the last second in it ([`super::control`]), the retry budget the first attempts
//! and retries of the last ten seconds ([`super::retry_budget`]).
//!
//! A slot is reused when its turn comes round again: an event older than the span is forgotten
//! without a sweep, and the window is a fixed array however many events it counts.

use std::time::Duration;

use tokio::time::Instant;

/// Slots a window is counted in: a tenth of its span each, so that what it says moves in tenths.
pub const SLOTS: usize = 10;

/// Counts of `K` kinds of event over the last [`SLOTS`] slots of `SLOT_MS` milliseconds. The
/// slot's length is part of the type, not a field: ten thousand tenants keep a few windows each.
#[derive(Clone, Debug)]
pub struct Window<const K: usize, const SLOT_MS: u64> {
    origin: Instant,
    /// Each slot's turn (its index since `origin`; `u64::MAX`, which no instant maps to, for
    /// none yet) and its counts.
    slots: [(u64, [u32; K]); SLOTS],
}

impl<const K: usize, const SLOT_MS: u64> Window<K, SLOT_MS> {
    /// The span the window counts over: [`SLOTS`] slots.
    pub const fn span() -> Duration {
        Duration::from_millis(SLOT_MS * SLOTS as u64)
    }

    /// An empty window, its slots counted from `origin`.
    pub fn new(origin: Instant) -> Self {
        Window {
            origin,
            slots: [(u64::MAX, [0; K]); SLOTS],
        }
    }

    /// The turn of the slot `now` falls in; saturates below `u64::MAX` at the end of time.
    fn turn(&self, now: Instant) -> u64 {
        let since =
            now.saturating_duration_since(self.origin).as_millis() / u128::from(SLOT_MS.max(1));
        u64::try_from(since)
            .unwrap_or(u64::MAX - 1)
            .min(u64::MAX - 1)
    }

    /// Counts one event of `kind` at `now`.
    pub fn add(&mut self, now: Instant, kind: usize) {
        let turn = self.turn(now);
        let slot = &mut self.slots[(turn % SLOTS as u64) as usize];
        if slot.0 != turn {
            *slot = (turn, [0; K]);
        }
        slot.1[kind] = slot.1[kind].saturating_add(1);
    }

    /// Each kind's events over the span ending at `now`.
    pub fn totals(&self, now: Instant) -> [u32; K] {
        let turn = self.turn(now);
        let mut totals = [0u32; K];
        for (at, counts) in &self.slots {
            if *at <= turn && at.saturating_add(SLOTS as u64) > turn {
                for (total, n) in totals.iter_mut().zip(counts) {
                    *total = total.saturating_add(*n);
                }
            }
        }
        totals
    }

    /// Forgets every event counted so far.
    pub fn forget(&mut self) {
        self.slots = [(u64::MAX, [0; K]); SLOTS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::cooldown::at;

    #[test]
    fn events_count_for_the_span_and_are_forgotten_slot_by_slot_after_it() {
        let t0 = Instant::now();
        let mut w = Window::<2, 100>::new(t0);
        assert_eq!(Window::<2, 100>::span(), Duration::from_secs(1));
        w.add(t0, 0);
        w.add(at(t0, 50), 0);
        w.add(at(t0, 150), 1);
        assert_eq!(w.totals(at(t0, 150)), [2, 1]);
        // The first slot (0-100 ms) leaves the span at 1 s, the second at 1.1 s.
        assert_eq!(w.totals(at(t0, 999)), [2, 1]);
        assert_eq!(w.totals(at(t0, 1_000)), [0, 1]);
        assert_eq!(w.totals(at(t0, 1_100)), [0, 0]);
        // A slot whose turn comes round again starts from nothing.
        w.add(at(t0, 1_050), 0);
        assert_eq!(w.totals(at(t0, 1_050)), [1, 1]);
        w.forget();
        assert_eq!(w.totals(at(t0, 1_050)), [0, 0]);
    }

    #[test]
    fn an_instant_before_the_origin_counts_in_the_first_slot_and_a_century_later_in_its_own() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let mut w = Window::<1, 1_000>::new(t0);
        w.add(Instant::now(), 0);
        assert_eq!(w.totals(t0), [1]);
        let later = t0 + Duration::from_secs(100 * 365 * 86_400);
        w.add(later, 0);
        assert_eq!(w.totals(later), [1]);
    }
}
