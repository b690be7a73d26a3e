//! The counters of an account's messages by outcome, carried from one run to the next and
//! derived from the daily figures, which drop to zero at midnight.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::civil::Date;

use super::DailyData;
use crate::upstream::model::counts::Counts;
use crate::upstream::model::names::MAX_NAMES;

/// Statuses one account's counters keep at most: twice what one day's figures may hold, so a
/// status that appears on a later day still gets its counter, and an upstream that invents new
/// names every day cannot grow them without bound.
pub const MAX_COUNTED_STATUSES: usize = 2 * MAX_NAMES;

/// Monotonic counters of an account's messages by outcome, derived from the daily figures
/// (today so far, and yesterday's final), which drop to zero at midnight. Each run adds what
/// the figures grew by since the run before; at the rollover, the last minutes of the day before
/// are taken from its final figure (now `previous_day`), so nothing sent before midnight is lost;
/// a late revision of a closed day is added when it grows, and never subtracted. The counters
/// start at zero when the account is first fetched (`created`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DayCounters {
    /// The day whose figures `seen_today` holds.
    day: Date,
    /// The counters, by outcome.
    pub totals: BTreeMap<String, f64>,
    /// The largest figure of `day` counted, by outcome.
    seen_today: BTreeMap<String, f64>,
    /// The largest figure of the day before `day` counted, by outcome.
    seen_yesterday: BTreeMap<String, f64>,
    /// When the counters started from zero (OpenMetrics `_created`).
    pub created: Timestamp,
}

impl DayCounters {
    /// The counters after a run that fetched `data`: those of the run before carried on, or new
    /// ones at zero from the figures of this run.
    pub fn carry(previous: Option<&DayCounters>, data: &DailyData, now: Timestamp) -> DayCounters {
        match previous {
            Some(p) => {
                let mut next = p.clone();
                next.advance(data);
                next
            }
            None => DayCounters::start(data, now),
        }
    }

    /// Zero counters, with today's and yesterday's figures as the baseline.
    fn start(data: &DailyData, now: Timestamp) -> DayCounters {
        let mut c = DayCounters {
            day: data.today,
            totals: BTreeMap::new(),
            seen_today: BTreeMap::new(),
            seen_yesterday: BTreeMap::new(),
            created: now,
        };
        for (status, _) in figures(&data.stats.current_day)
            .iter()
            .chain(figures(&data.stats.previous_day).iter())
        {
            if c.totals.len() < MAX_COUNTED_STATUSES {
                c.totals.entry(status.clone()).or_insert(0.0);
            }
        }
        c.seen_today = baseline(&data.stats.current_day);
        c.seen_yesterday = baseline(&data.stats.previous_day);
        c
    }

    fn advance(&mut self, data: &DailyData) {
        let today = data.today;
        if today < self.day {
            // The clock went back: figures of a day already passed are not counted again.
            return;
        }
        if today > self.day {
            let just_after = self.day.tomorrow().ok() == Some(today);
            // The day we were counting is now yesterday, and its final figure comes as
            // `previous_day`; after a longer gap the day before today was never seen at all.
            self.seen_yesterday = if just_after {
                std::mem::take(&mut self.seen_today)
            } else {
                BTreeMap::new()
            };
            self.seen_today.clear();
            self.day = today;
        }
        let yesterday = std::mem::take(&mut self.seen_yesterday);
        self.seen_yesterday = self.count(yesterday, &data.stats.previous_day);
        let current = std::mem::take(&mut self.seen_today);
        self.seen_today = self.count(current, &data.stats.current_day);
    }

    /// Adds to the counters what each figure grew by over `seen`; returns the new `seen`.
    fn count(
        &mut self,
        mut seen: BTreeMap<String, f64>,
        figures_now: &Option<Counts>,
    ) -> BTreeMap<String, f64> {
        for (status, n) in figures(figures_now) {
            let before = seen.get(status).copied().unwrap_or(0.0);
            if *n <= before {
                // A revision down is not a negative count.
                continue;
            }
            let known = self.totals.contains_key(status);
            if !known && self.totals.len() >= MAX_COUNTED_STATUSES {
                continue;
            }
            *self.totals.entry(status.clone()).or_insert(0.0) += n - before;
            seen.insert(status.clone(), *n);
        }
        seen
    }
}

fn figures(counts: &Option<Counts>) -> &[(String, f64)] {
    counts.as_deref().unwrap_or(&[])
}

fn baseline(counts: &Option<Counts>) -> BTreeMap<String, f64> {
    figures(counts)
        .iter()
        .filter(|(_, n)| n.is_finite() && *n >= 0.0)
        .map(|(s, n)| (s.clone(), *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::model::DailyStats;
    use super::*;

    fn data(today: &str, current: &[(&str, f64)], previous: &[(&str, f64)]) -> DailyData {
        let counts =
            |c: &[(&str, f64)]| Some(c.iter().map(|(s, n)| ((*s).to_owned(), *n)).collect());
        DailyData {
            stats: DailyStats {
                current_day: counts(current),
                previous_day: counts(previous),
            },
            domains: Vec::new(),
            today: today.parse().unwrap(),
            counters: None,
        }
    }

    fn total(c: &DayCounters, status: &str) -> f64 {
        c.totals.get(status).copied().unwrap_or(0.0)
    }

    const T0: Timestamp = Timestamp::constant(1_800_000_000, 0);

    #[test]
    fn a_day_counts_what_its_figures_grow_by_and_the_rollover_keeps_the_last_minutes() {
        // Started mid-day: what was sent before is the baseline, not counted.
        let mut c = DayCounters::carry(None, &data("2026-03-07", &[("delivered", 10.0)], &[]), T0);
        assert_eq!(total(&c, "delivered"), 0.0);
        assert_eq!(c.created, T0);
        let d = "delivered";
        // Each run: today, today's figures, yesterday's, and the delivered and bounced counted.
        for (today, current, previous, counted) in [
            (
                "2026-03-07",
                &[(d, 14.0), ("bounced", 1.0)][..],
                &[][..],
                (4.0, 1.0),
            ),
            // After midnight: 3 more were sent before it (final 17) and 2 since.
            (
                "2026-03-08",
                &[(d, 2.0)],
                &[(d, 17.0), ("bounced", 1.0)],
                (9.0, 1.0),
            ),
            // A late revision of the closed day up is counted; down, or the same, is not.
            (
                "2026-03-08",
                &[(d, 2.0)],
                &[(d, 18.0), ("bounced", 0.0)],
                (10.0, 1.0),
            ),
            // Today's figure revised down: no decrease.
            ("2026-03-08", &[(d, 1.0)], &[(d, 18.0)], (10.0, 1.0)),
            ("2026-03-08", &[(d, 3.0)], &[(d, 18.0)], (11.0, 1.0)),
        ] {
            c = DayCounters::carry(Some(&c), &data(today, current, previous), T0);
            let got = (total(&c, d), total(&c, "bounced"));
            assert_eq!(got, counted, "{today} {current:?} {previous:?}");
        }
        assert_eq!(c.created, T0, "carried on, not restarted");
    }

    #[test]
    fn a_gap_counts_the_unseen_day_whole_and_a_clock_going_back_counts_nothing() {
        let d = "delivered";
        let c = DayCounters::carry(None, &data("2026-03-07", &[(d, 5.0)], &[]), T0);
        // Two days later: the whole of the 8th (previous_day) and today so far.
        let c = DayCounters::carry(Some(&c), &data("2026-03-09", &[(d, 4.0)], &[(d, 30.0)]), T0);
        assert_eq!(total(&c, d), 34.0);
        let c = DayCounters::carry(
            Some(&c),
            &data("2026-03-08", &[(d, 99.0)], &[(d, 99.0)]),
            T0,
        );
        assert_eq!(total(&c, d), 34.0);
    }

    #[test]
    fn the_statuses_counted_are_bounded() {
        let many: Vec<(String, f64)> = (0..3 * MAX_COUNTED_STATUSES)
            .map(|i| (format!("s{i}"), 1.0))
            .collect();
        let mut c = DayCounters::carry(None, &data("2026-03-07", &[], &[]), T0);
        for day in ["2026-03-07", "2026-03-08", "2026-03-09"] {
            let mut d = data(day, &[], &[]);
            d.stats.current_day = Some(many.clone());
            c = DayCounters::carry(Some(&c), &d, T0);
        }
        assert_eq!(c.totals.len(), MAX_COUNTED_STATUSES);
    }
}
