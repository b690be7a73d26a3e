//! Sending statistics: what happened to each accepted (or refused) recipient, kept per account,
//! sending domain and UTC minute. Local "days" are cut at query time, so days of 23 or 25 hours
//! (daylight-saving changes) come out exact in any time zone.

use std::collections::BTreeMap;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Map, Value};

/// The fate of one message, as the statistics count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Delivered,
    Bounced,
    Deferred,
    Rejected,
    Complaint,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Delivered,
        Outcome::Bounced,
        Outcome::Deferred,
        Outcome::Rejected,
        Outcome::Complaint,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Bounced => "bounced",
            Self::Deferred => "deferred",
            Self::Rejected => "rejected",
            Self::Complaint => "complaint",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Outcome names, in the order the API lists them.
pub const OUTCOMES: [&str; 5] = ["delivered", "bounced", "deferred", "rejected", "complaint"];

/// Chances of an accepted message (not on the bounce domain) bouncing, being deferred or
/// drawing a complaint; the rest are delivered.
const BOUNCE_RATE: f64 = 0.02;
const DEFER_RATE: f64 = 0.03;
const COMPLAINT_RATE: f64 = 0.005;
/// Share of refused (suppressed) recipients in the seeded history.
const HISTORY_REJECT_RATE: f64 = 0.01;

/// Draws the outcome of one accepted message.
pub(crate) fn roll_accepted(rng: &mut StdRng) -> Outcome {
    let x: f64 = rng.random();
    if x < BOUNCE_RATE {
        Outcome::Bounced
    } else if x < BOUNCE_RATE + DEFER_RATE {
        Outcome::Deferred
    } else if x < BOUNCE_RATE + DEFER_RATE + COMPLAINT_RATE {
        Outcome::Complaint
    } else {
        Outcome::Delivered
    }
}

/// Counts per outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts([i64; 5]);

impl Counts {
    pub(crate) fn add(&mut self, outcome: Outcome, n: i64) {
        let slot = &mut self.0[outcome.index()];
        *slot = slot.saturating_add(n);
    }

    pub(crate) fn merge(&mut self, other: &Counts) {
        for outcome in Outcome::ALL {
            self.add(outcome, other.get(outcome));
        }
    }

    pub(crate) fn get(&self, outcome: Outcome) -> i64 {
        self.0[outcome.index()]
    }

    pub(crate) fn total(&self) -> i64 {
        self.0.iter().fold(0i64, |sum, n| sum.saturating_add(*n))
    }

    /// Outcome name -> count, every outcome present.
    pub(crate) fn to_map(self) -> BTreeMap<String, i64> {
        Outcome::ALL
            .into_iter()
            .map(|o| (o.as_str().to_owned(), self.get(o)))
            .collect()
    }

    /// `total` and one member per outcome, added to `members`.
    pub(crate) fn write_into(&self, members: &mut Map<String, Value>) {
        members.insert("total".to_owned(), Value::from(self.total()));
        for outcome in Outcome::ALL {
            members.insert(outcome.as_str().to_owned(), Value::from(self.get(outcome)));
        }
    }
}

/// How far back statistics are kept; older minutes are dropped when new ones are recorded.
/// Nine days so that every local day of the last eight is whole in every time zone.
pub(crate) const RETENTION: SignedDuration = SignedDuration::from_hours(9 * 24);

/// Which statistics a query adds up.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    /// `None`: every account.
    pub accounts: Option<Vec<i32>>,
    /// `None`: every domain; compared case-insensitively.
    pub domain: Option<String>,
}

impl Filter {
    fn matches(&self, account: i32, domain: &str) -> bool {
        self.accounts
            .as_ref()
            .is_none_or(|ids| ids.contains(&account))
            && self
                .domain
                .as_ref()
                .is_none_or(|wanted| wanted.eq_ignore_ascii_case(domain))
    }
}

/// Counts per (account, sending domain), per UTC minute.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Unix minute -> (account id, domain name) -> counts.
    minutes: BTreeMap<i64, BTreeMap<(i32, String), Counts>>,
}

fn minute_of(at: Timestamp) -> i64 {
    at.as_second().div_euclid(60)
}

/// The first minute at or after `at` (a local midnight may fall inside a minute only in zones
/// with second offsets, which no current zone has).
fn minute_ceil(at: Timestamp) -> i64 {
    let seconds = at.as_second();
    seconds.div_euclid(60) + i64::from(seconds.rem_euclid(60) != 0)
}

/// The instants `[start, end)` of local date `date` in `tz`.
pub(crate) fn day_bounds(tz: &TimeZone, date: Date) -> Option<(Timestamp, Timestamp)> {
    let start = date.to_zoned(tz.clone()).ok()?.timestamp();
    let end = date.tomorrow().ok()?.to_zoned(tz.clone()).ok()?.timestamp();
    Some((start, end))
}

impl Stats {
    pub(crate) fn record(
        &mut self,
        account: i32,
        domain: &str,
        at: Timestamp,
        outcome: Outcome,
        n: i64,
    ) {
        self.minutes
            .entry(minute_of(at))
            .or_default()
            .entry((account, domain.to_owned()))
            .or_default()
            .add(outcome, n);
    }

    /// Drops minutes older than [`RETENTION`] before `now`.
    pub(crate) fn prune(&mut self, now: Timestamp) {
        let oldest = minute_of(now) - RETENTION.as_secs() / 60;
        self.minutes = self.minutes.split_off(&oldest);
    }

    pub(crate) fn forget_account(&mut self, account: i32) {
        for buckets in self.minutes.values_mut() {
            buckets.retain(|(id, _), _| *id != account);
        }
        self.minutes.retain(|_, buckets| !buckets.is_empty());
    }

    /// Calls `visit` for every bucket in `[from, to)` that `filter` keeps.
    fn each(
        &self,
        filter: &Filter,
        from: Timestamp,
        to: Timestamp,
        mut visit: impl FnMut(i32, &str, &Counts),
    ) {
        let (first, end) = (minute_ceil(from), minute_ceil(to));
        if first >= end {
            return;
        }
        for buckets in self.minutes.range(first..end).map(|(_, b)| b) {
            for ((account, domain), counts) in buckets {
                if filter.matches(*account, domain) {
                    visit(*account, domain, counts);
                }
            }
        }
    }

    pub(crate) fn sum(&self, filter: &Filter, from: Timestamp, to: Timestamp) -> Counts {
        let mut total = Counts::default();
        self.each(filter, from, to, |_, _, counts| total.merge(counts));
        total
    }

    pub(crate) fn sum_by_account(
        &self,
        filter: &Filter,
        from: Timestamp,
        to: Timestamp,
    ) -> BTreeMap<i32, Counts> {
        let mut totals: BTreeMap<i32, Counts> = BTreeMap::new();
        self.each(filter, from, to, |account, _, counts| {
            totals.entry(account).or_default().merge(counts);
        });
        totals
    }

    /// Per lower-cased domain name.
    pub(crate) fn sum_by_domain(
        &self,
        filter: &Filter,
        from: Timestamp,
        to: Timestamp,
    ) -> BTreeMap<String, Counts> {
        let mut totals: BTreeMap<String, Counts> = BTreeMap::new();
        self.each(filter, from, to, |_, domain, counts| {
            totals
                .entry(domain.to_ascii_lowercase())
                .or_default()
                .merge(counts);
        });
        totals
    }

    /// The counts of local date `date` in `tz`.
    pub(crate) fn day(&self, filter: &Filter, tz: &TimeZone, date: Date) -> Counts {
        day_bounds(tz, date).map_or_else(Counts::default, |(from, to)| self.sum(filter, from, to))
    }
}

/// Messages a seeded account sends on a whole day: a few hundred to a few thousand.
const HISTORY_DAILY: std::ops::RangeInclusive<u32> = 300..=3000;

/// Relative sending activity by local hour: quiet at night, busy in office hours.
fn hour_weight(hour: i8) -> f64 {
    match hour {
        0..=5 => 0.15,
        6..=7 => 0.5,
        8..=18 => 1.0,
        19..=21 => 0.6,
        _ => 0.3,
    }
}

/// Synthetic statistics for one account over yesterday and today up to `now`, in `tz`: a daily
/// volume drawn from [`HISTORY_DAILY`] (today within 10% of yesterday), spread over each day by
/// [`hour_weight`] and over `domains`, each message with the usual outcome model plus a few
/// refused recipients. Today's messages after `now` are left out, so today is "so far".
pub(crate) fn seed_history(
    stats: &mut Stats,
    rng: &mut StdRng,
    account: i32,
    domains: &[String],
    tz: &TimeZone,
    now: Timestamp,
) {
    if domains.is_empty() {
        return;
    }
    let today = now.to_zoned(tz.clone()).date();
    let Ok(yesterday) = today.yesterday() else {
        return;
    };
    let daily = f64::from(rng.random_range(HISTORY_DAILY));
    for (date, volume) in [
        (yesterday, daily),
        (today, daily * rng.random_range(0.9..1.1)),
    ] {
        let Some((start, end)) = day_bounds(tz, date) else {
            continue;
        };
        let span = end.as_second() - start.as_second();
        let mut drawn = 0.0;
        while drawn < volume {
            let Ok(at) = Timestamp::from_second(start.as_second() + rng.random_range(0..span))
            else {
                continue;
            };
            if rng.random::<f64>() >= hour_weight(at.to_zoned(tz.clone()).hour()) {
                continue;
            }
            drawn += 1.0;
            let domain = &domains[rng.random_range(0..domains.len())];
            let outcome = if rng.random_bool(HISTORY_REJECT_RATE) {
                Outcome::Rejected
            } else {
                roll_accepted(rng)
            };
            if at < now {
                stats.record(account, domain, at, outcome, 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn the_outcome_model_is_mostly_delivered_and_reproducible() {
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..10_000)
                .map(|_| roll_accepted(&mut rng))
                .collect::<Vec<_>>()
        };
        let outcomes = draw(5);
        assert_eq!(outcomes, draw(5));
        let delivered = outcomes
            .iter()
            .filter(|o| **o == Outcome::Delivered)
            .count();
        assert!((9_300..9_700).contains(&delivered), "{delivered}");
        for rare in [Outcome::Bounced, Outcome::Deferred, Outcome::Complaint] {
            assert!(outcomes.contains(&rare), "{rare:?}");
        }
        assert!(!outcomes.contains(&Outcome::Rejected));
    }

    #[test]
    fn a_dst_end_day_in_rome_has_25_hours_and_a_dst_start_day_23() {
        let rome = TimeZone::get("Europe/Rome").expect("zone");
        let (start, end) = day_bounds(&rome, jiff::civil::date(2026, 10, 25)).expect("day");
        assert_eq!(start, ts("2026-10-24T22:00:00Z"));
        assert_eq!(end.duration_since(start), SignedDuration::from_hours(25));
        let (start, end) = day_bounds(&rome, jiff::civil::date(2026, 3, 29)).expect("day");
        assert_eq!(end.duration_since(start), SignedDuration::from_hours(23));
    }

    #[test]
    fn old_minutes_are_pruned_and_recent_ones_kept() {
        let mut stats = Stats::default();
        let now = ts("2026-05-10T12:00:00Z");
        stats.record(
            1,
            "a.example",
            ts("2026-05-01T11:59:00Z"),
            Outcome::Delivered,
            4,
        );
        stats.record(
            1,
            "a.example",
            ts("2026-05-02T12:01:00Z"),
            Outcome::Bounced,
            2,
        );
        stats.prune(now);
        let all = stats.sum(&Filter::default(), Timestamp::MIN, now);
        assert_eq!(all.get(Outcome::Delivered), 0);
        assert_eq!(all.get(Outcome::Bounced), 2);
    }

    #[test]
    fn filters_pick_accounts_and_domains_case_insensitively() {
        let mut stats = Stats::default();
        let at = ts("2026-05-10T12:00:00Z");
        stats.record(1, "Shop.example", at, Outcome::Delivered, 3);
        stats.record(1, "news.example", at, Outcome::Delivered, 5);
        stats.record(2, "shop.example", at, Outcome::Complaint, 7);
        let end = ts("2026-05-10T12:01:00Z");
        let shop = Filter {
            accounts: None,
            domain: Some("SHOP.EXAMPLE".into()),
        };
        assert_eq!(stats.sum(&shop, at, end).total(), 10);
        let one = Filter {
            accounts: Some(vec![1]),
            domain: None,
        };
        assert_eq!(stats.sum(&one, at, end).total(), 8);
        assert_eq!(stats.sum(&one, end, end).total(), 0);
        assert_eq!(
            stats.sum_by_domain(&Filter::default(), at, end)["shop.example"].total(),
            10
        );
    }

    #[test]
    fn seeded_history_is_deterministic_and_a_few_hundred_to_thousands_a_day() {
        let rome = TimeZone::get("Europe/Rome").expect("zone");
        let now = ts("2026-11-22T15:00:00Z");
        let run = || {
            let mut stats = Stats::default();
            let mut rng = StdRng::seed_from_u64(9);
            let domains = vec!["a.example".to_owned(), "b.example".to_owned()];
            seed_history(&mut stats, &mut rng, 1, &domains, &rome, now);
            let yesterday = stats.day(&Filter::default(), &rome, jiff::civil::date(2026, 11, 21));
            let today = stats.day(&Filter::default(), &rome, jiff::civil::date(2026, 11, 22));
            (yesterday, today)
        };
        let (yesterday, today) = run();
        assert_eq!((yesterday, today), run());
        assert!((300..=3001).contains(&yesterday.total()), "{yesterday:?}");
        assert!(today.total() > 0 && today.total() < yesterday.total() * 2);
        assert!(yesterday.get(Outcome::Delivered) > yesterday.total() / 2);
    }
}
