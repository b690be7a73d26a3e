//! Mail-tracing queries over the per-minute sending statistics: the dashboard and the daily
//! statistics of one account, computed at query time from checked queries.

use std::cmp::Ordering;

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde_json::{Map, Value, json};

use super::World;
use super::stats::Outcome::{Bounced, Complaint, Deferred, Delivered, Rejected};
use super::stats::{Counts, Filter, day_bounds};

/// Days listed by the daily statistics of an account (`type=account` or `single-domain`).
pub const DAILY_DAYS: i32 = 7;

/// Local days from `first` to `last`, both included.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Days {
    pub first: Date,
    pub last: Date,
}

/// A checked dashboard request: whose statistics, cut in which zone, over which days.
#[derive(Debug)]
pub(crate) struct DashboardQuery<'a> {
    pub filter: Filter,
    pub tz: TimeZone,
    /// The zone as the request named it, shown when the zone has no IANA name.
    pub zone_name: &'a str,
    pub daily: Days,
    pub overview: Days,
    pub top_accounts: Days,
    pub top_accounts_limit: i32,
    pub top5: Days,
    pub top5_limit: i32,
}

/// What the daily statistics of an account list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DailyView<'a> {
    /// The last [`DAILY_DAYS`] local days.
    Account,
    /// Today's totals of each sending domain.
    DomainsRank,
    /// The last [`DAILY_DAYS`] local days of one sending domain (any case).
    SingleDomain(&'a str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DailySort {
    Date,
    Total,
}

/// A daily statistics request naming something the account does not have; the message says what.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NotFound(pub String);

/// The local dates `[first, last]`, ascending.
fn dates(first: Date, last: Date) -> Vec<Date> {
    let mut out = Vec::new();
    let mut day = first;
    while day <= last {
        out.push(day);
        match day.tomorrow() {
            Ok(next) => day = next,
            Err(_) => break,
        }
    }
    out
}

/// The instants from the start of `first` to the end of `last`, in `tz`.
fn range_bounds(tz: &TimeZone, first: Date, last: Date) -> (Timestamp, Timestamp) {
    let start = day_bounds(tz, first).map_or(Timestamp::MAX, |(start, _)| start);
    let end = day_bounds(tz, last).map_or(Timestamp::MIN, |(_, end)| end);
    (start, end)
}

fn counts_object(counts: &Counts, leading: &[(&str, Value)]) -> Value {
    let mut members = Map::new();
    for (name, value) in leading {
        members.insert((*name).to_owned(), value.clone());
    }
    counts.write_into(&mut members);
    Value::Object(members)
}

/// Accounts ranked by total over `[from, to)`, descending, ties by id; zero totals left out.
fn ranking(
    world: &World,
    filter: &Filter,
    (from, to): (Timestamp, Timestamp),
    limit: i32,
    with_outcomes: bool,
) -> Vec<Value> {
    let mut totals: Vec<(i32, Counts)> = world
        .stats
        .sum_by_account(filter, from, to)
        .into_iter()
        .filter(|(id, counts)| counts.total() > 0 && world.accounts.contains_key(id))
        .collect();
    totals.sort_by(|(a_id, a), (b_id, b)| b.total().cmp(&a.total()).then(a_id.cmp(b_id)));
    totals
        .into_iter()
        .take(usize::try_from(limit).unwrap_or(0))
        .map(|(id, counts)| {
            let username = world.accounts.get(&id).map(|a| a.username.clone());
            let leading = [("account_id", json!(id)), ("username", json!(username))];
            if with_outcomes {
                counts_object(&counts, &leading)
            } else {
                let mut members: Map<String, Value> = leading
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect();
                members.insert("total".to_owned(), json!(counts.total()));
                Value::Object(members)
            }
        })
        .collect()
}

impl World {
    /// The one record of the dashboard answer.
    pub(crate) fn dashboard(&self, query: &DashboardQuery<'_>) -> Value {
        let DashboardQuery {
            filter, tz, daily, ..
        } = query;
        let daily_activity: Vec<Value> = dates(daily.first, daily.last)
            .into_iter()
            .map(|date| {
                let counts = self.stats.day(filter, tz, date);
                counts_object(&counts, &[("date", json!(date.to_string()))])
            })
            .collect();
        let (from, to) = range_bounds(tz, query.overview.first, query.overview.last);
        let sums = self.stats.sum(filter, from, to);
        let group = |name: &str, statuses: &[&str], count: i64| json!({"group": name, "statuses": statuses, "count": count});
        let status_groups = vec![
            group("delivered", &["delivered"], sums.get(Delivered)),
            group("pending", &["deferred"], sums.get(Deferred)),
            group(
                "failed",
                &["bounced", "rejected"],
                sums.get(Bounced).saturating_add(sums.get(Rejected)),
            ),
            group("complaint", &["complaint"], sums.get(Complaint)),
        ];
        json!({
            "timezone": tz.iana_name().unwrap_or(query.zone_name),
            "daily_activity": daily_activity,
            "overview": counts_object(&sums, &[]),
            "status_groups": status_groups,
            "top_accounts_by_delivery_account": ranking(
                self,
                filter,
                range_bounds(tz, query.top_accounts.first, query.top_accounts.last),
                query.top_accounts_limit,
                true,
            ),
            "top5_by_delivery_account": ranking(
                self,
                filter,
                range_bounds(tz, query.top5.first, query.top5.last),
                query.top5_limit,
                false,
            ),
        })
    }

    /// The items of the daily statistics of account `id` at `now`, days cut in the account's own
    /// time zone, sorted by `sort` (ties by date or domain, ascending).
    pub(crate) fn daily(
        &self,
        id: i32,
        view: DailyView<'_>,
        sort: DailySort,
        ascending: bool,
        now: Timestamp,
    ) -> Result<Vec<Value>, NotFound> {
        let account = self
            .accounts
            .get(&id)
            .ok_or_else(|| NotFound(format!("Delivery account {id} not found")))?;
        let tz = account.time_zone();
        let today = now.to_zoned(tz.clone()).date();
        let mut filter = Filter {
            accounts: Some(vec![id]),
            domain: None,
        };

        let mut items = match view {
            DailyView::Account => self.daily_by_date(&filter, &tz, today),
            DailyView::SingleDomain(wanted) => {
                filter.domain = Some(own_domain(&account.domains, wanted, id)?);
                self.daily_by_date(&filter, &tz, today)
            }
            DailyView::DomainsRank => self.daily_by_domain(&account.domains, &filter, &tz, today),
        };
        sort_daily(&mut items, sort, ascending);
        Ok(items.into_iter().map(|(item, _, _)| item).collect())
    }

    /// One daily item for each of the last [`DAILY_DAYS`] local days up to `today`, counted
    /// under `filter`.
    fn daily_by_date(&self, filter: &Filter, tz: &TimeZone, today: Date) -> Vec<DailyItem> {
        let first = (1..DAILY_DAYS).fold(today, |d, _| d.yesterday().unwrap_or(d));
        dates(first, today)
            .into_iter()
            .map(|date| {
                let counts = self.stats.day(filter, tz, date);
                let key = date.to_string();
                (
                    counts_object(&counts, &[("date", json!(key))]),
                    counts.total(),
                    key,
                )
            })
            .collect()
    }

    /// One daily item for each of `domains` (the first spelling of each, in order) with its
    /// totals of `today`, counted under `filter`.
    fn daily_by_domain(
        &self,
        domains: &[String],
        filter: &Filter,
        tz: &TimeZone,
        today: Date,
    ) -> Vec<DailyItem> {
        let (from, to) = range_bounds(tz, today, today);
        let sums = self.stats.sum_by_domain(filter, from, to);
        let mut seen: Vec<String> = Vec::new();
        domains
            .iter()
            .filter(|name| {
                let key = name.to_ascii_lowercase();
                let fresh = !seen.contains(&key);
                seen.push(key);
                fresh
            })
            .map(|name| {
                let counts = sums
                    .get(&name.to_ascii_lowercase())
                    .copied()
                    .unwrap_or_default();
                let object = counts_object(&counts, &[("domain", json!(name))]);
                (object, counts.total(), name.to_ascii_lowercase())
            })
            .collect()
    }
}

/// A daily item being listed: its body, its total and its sort key (date or lowercase domain).
type DailyItem = (Value, i64, String);

/// The account's own spelling of sending domain `wanted`; not found when account `id` does not
/// send from it.
fn own_domain(domains: &[String], wanted: &str, id: i32) -> Result<String, NotFound> {
    domains
        .iter()
        .find(|d| d.eq_ignore_ascii_case(wanted))
        .cloned()
        .ok_or_else(|| {
            NotFound(format!(
                "domain {wanted:?} is not a sending domain of Delivery account {id}"
            ))
        })
}

/// Sorts daily items by `sort`, ties by date or domain, ascending.
fn sort_daily(items: &mut [DailyItem], sort: DailySort, ascending: bool) {
    let order = |ordering: Ordering| {
        if ascending {
            ordering
        } else {
            ordering.reverse()
        }
    };
    items.sort_by(|(_, a_total, a_key), (_, b_total, b_key)| match sort {
        DailySort::Date => order(a_key.cmp(b_key)),
        DailySort::Total => order(a_total.cmp(b_total)).then(a_key.cmp(b_key)),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_ranges_include_both_ends() {
        let first = jiff::civil::date(2026, 2, 27);
        let listed = dates(first, jiff::civil::date(2026, 3, 2));
        assert_eq!(listed.len(), 4);
        assert_eq!(listed[0], first);
        assert!(dates(jiff::civil::date(2026, 3, 2), first).is_empty());
    }
}
