//! Mail-tracing queries over the per-minute sending statistics: local date ranges, outcome
//! objects and account rankings, from which the tracemail answers are built.

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde_json::{Map, Value, json};

use super::World;
use super::stats::{Counts, Filter, day_bounds};

/// The local dates `[first, last]`, ascending.
pub(crate) fn dates(first: Date, last: Date) -> Vec<Date> {
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
pub(crate) fn range_bounds(tz: &TimeZone, first: Date, last: Date) -> (Timestamp, Timestamp) {
    let start = day_bounds(tz, first).map_or(Timestamp::MAX, |(start, _)| start);
    let end = day_bounds(tz, last).map_or(Timestamp::MIN, |(_, end)| end);
    (start, end)
}

pub(crate) fn counts_object(counts: &Counts, leading: &[(&str, Value)]) -> Value {
    let mut members = Map::new();
    for (name, value) in leading {
        members.insert((*name).to_owned(), value.clone());
    }
    counts.write_into(&mut members);
    Value::Object(members)
}

/// Accounts ranked by total over `[from, to)`, descending, ties by id; zero totals left out.
pub(crate) fn ranking(
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
