//! A collector's loop that panics is started again, not lost. A panic in one target's fetch
//! stays in that target's task (the run reports the target failed); a panic in the loop itself
//! (its scheduling, its hand-over to the publisher, its learning from a run) used to end the
//! collector's task for good, its targets going stale with nothing saying why. [`restarting`]
//! catches it, has it counted (`mailhost_collector_restarts_total`, the landing page) and
//! starts a fresh loop after a back-off ([`InARow`]). A fresh loop begins as the process does
//! after a restart with `--storage.path`: what the snapshot holds is kept, and targets fetched
//! less than an interval ago wait for their next tick, so a restart costs no call their values
//! do not need.
//!
//! Readiness is not affected: `/-/ready` says the exporter can serve (the exporter-toolkit's and
//! Prometheus' meaning), and it serves every other collector, and this one's values until
//! `max_age`, throughout. A collector whose loop panicked before its first run ended does not
//! hold readiness back either (see [`crate::engine::snapshot::Snapshot::ready`]).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The first wait before a panicked loop is started again. Each panic in a row doubles it (with
/// the jitter of [`crate::upstream::backoff`]), up to the collector's interval: a loop that
/// panics at every run is started again about once an interval, the pace its runs had.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// Panics of one collector's loop in a row, which set the wait before the next start. A loop
/// that lived at least as long as the longest wait before it panicked starts the count again: a
/// rare panic waits [`FIRST_BACKOFF`], not what the panics of last week had grown it to.
#[derive(Debug, Default)]
pub struct InARow(u32);

impl InARow {
    /// A loop that had `lived` since it started panicked: the wait before the next one starts,
    /// at most `longest` (the collector's interval) and at least half of [`FIRST_BACKOFF`].
    pub fn wait(&mut self, lived: Duration, longest: Duration) -> Duration {
        let longest = longest.max(FIRST_BACKOFF);
        if lived >= longest {
            self.0 = 0;
        }
        let wait = crate::upstream::backoff(FIRST_BACKOFF, longest, self.0);
        self.0 = self.0.saturating_add(1);
        wait
    }
}

/// Runs the loop `start` makes until it returns (its collector was stopped). When it panics,
/// `panicked` is told the wait (it counts the restart and says so in the log), and after the
/// wait a fresh loop from `start` runs. `longest` is the longest wait, read at each panic (the
/// collector's interval, which a reload may change). Returns at once when `stop` is cancelled
/// while it waits: shutdown and reloads stop a collector as promptly as before.
pub async fn restarting<L, P>(
    stop: &CancellationToken,
    longest: impl Fn() -> Duration,
    mut start: impl FnMut() -> L,
    mut panicked: impl FnMut(Duration) -> P,
) where
    L: Future<Output = ()>,
    P: Future<Output = ()>,
{
    let mut in_a_row = InARow::default();
    loop {
        let began = Instant::now();
        // The loop is dropped after a panic, never polled again: whatever it held half-changed
        // goes with it (what it shares, the store and the pacer, takes over poisoned locks).
        if AssertUnwindSafe(start()).catch_unwind().await.is_ok() || stop.is_cancelled() {
            return;
        }
        let wait = in_a_row.wait(began.elapsed(), longest());
        panicked(wait).await;
        tokio::select! {
            _ = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn panics_in_a_row_double_the_wait_up_to_the_longest_and_a_long_life_starts_again() {
        let longest = Duration::from_secs(10);
        let mut in_a_row = InARow::default();
        let ceilings = [1, 2, 4, 8, 10, 10].map(Duration::from_secs);
        for ceiling in ceilings {
            let wait = in_a_row.wait(Duration::ZERO, longest);
            assert!(
                wait >= ceiling / 2 && wait <= ceiling,
                "{wait:?} for {ceiling:?}"
            );
        }
        // A loop that lived an interval before it panicked waits as a first panic does.
        let wait = in_a_row.wait(longest, longest);
        assert!(
            wait >= FIRST_BACKOFF / 2 && wait <= FIRST_BACKOFF,
            "{wait:?}"
        );
        // An interval shorter than the first wait does not shorten it below half of it.
        let wait = InARow::default().wait(Duration::ZERO, Duration::from_millis(10));
        assert!(wait >= FIRST_BACKOFF / 2, "{wait:?}");
        // So many panics in a row neither overflow nor pass the longest wait.
        let mut in_a_row = InARow(u32::MAX - 1);
        for _ in 0..3 {
            assert!(in_a_row.wait(Duration::ZERO, longest) <= longest);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_that_panics_is_started_again_after_the_wait_and_one_that_ends_is_not() {
        let stop = CancellationToken::new();
        let starts = AtomicUsize::new(0);
        let mut told = Vec::new();
        let began = Instant::now();
        restarting(
            &stop,
            || Duration::from_secs(60),
            || {
                let n = starts.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::task::yield_now().await;
                    assert!(n >= 2, "injected panic of loop {n}");
                }
            },
            |wait| {
                told.push(wait);
                std::future::ready(())
            },
        )
        .await;
        assert_eq!(
            starts.load(Ordering::SeqCst),
            3,
            "two panics, then a loop that ended"
        );
        assert_eq!(told.len(), 2);
        // Two waits, the second doubled, and nothing else took time on the paused clock (but
        // the timer's rounding of each wait up to its millisecond).
        assert!(told[0] >= Duration::from_millis(500) && told[0] <= Duration::from_secs(1));
        assert!(told[1] >= Duration::from_secs(1) && told[1] <= Duration::from_secs(2));
        let (waited, elapsed) = (told[0] + told[1], began.elapsed());
        assert!(
            elapsed >= waited && elapsed <= waited + Duration::from_millis(2),
            "{elapsed:?} for waits of {told:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_during_the_wait_ends_it_at_once_and_starts_no_loop() {
        let stop = CancellationToken::new();
        let starts = AtomicUsize::new(0);
        let cancel = stop.clone();
        let began = Instant::now();
        restarting(
            &stop,
            || Duration::from_secs(3600),
            || {
                starts.fetch_add(1, Ordering::SeqCst);
                async { panic!("injected panic") }
            },
            |_| {
                // Shutdown comes while the loop waits to start again.
                cancel.cancel();
                std::future::ready(())
            },
        )
        .await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        assert_eq!(began.elapsed(), Duration::ZERO);
    }
}
