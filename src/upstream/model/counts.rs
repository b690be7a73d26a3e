//! Counts by name as the mail-tracing endpoints write them, read by both mail-tracing collectors.
//! Their inner shapes are not documented, so each reader accepts several: counts as a flat
//! object, as a list of `{status, count}` records, or nested one level deeper; numbers as
//! strings; days as a list or as an object keyed by date.

use jiff::civil::Date;
use serde_json::{Map, Value};

use super::names::bound_names;
use super::{ParseProblem, as_count};
use crate::settings::date_format::DateFormat;

/// Counts by name (status, group), sanitised and bounded.
pub type Counts = Vec<(String, f64)>;

/// Keys that describe a record rather than count something.
const META_KEYS: &[&str] = &[
    "date",
    "day",
    "start_date",
    "end_date",
    "total",
    "timezone",
    "account_id",
    "account",
    "id",
    "username",
    "name",
    "domain",
    "domain_name",
    "group",
    "label",
    "statuses",
    "description",
    "rate",
    "percentage",
];
/// Keys under which counts may be nested one level deeper.
const NESTED_KEYS: &[&str] = &[
    "statuses",
    "counts",
    "by_status",
    "stats",
    "status",
    "outcomes",
];
/// Keys naming an item in a list of `{name, count}` records.
const NAME_KEYS: &[&str] = &["status", "group", "name", "key", "type", "label"];
/// Keys holding the count in such a record.
pub const COUNT_KEYS: &[&str] = &["count", "total", "value", "messages", "n"];

/// Reads counts by name from any of the accepted shapes; `None` (with a problem) when the
/// value has none of them.
pub fn counts(value: &Value, path: &str, problems: &mut Vec<ParseProblem>) -> Option<Counts> {
    let pairs = match value {
        Value::Object(map) => object_counts(map, path, problems, 0)?,
        Value::Array(items) => list_counts(items, path, problems)?,
        Value::Null => return None,
        other => {
            problems.push(ParseProblem::new(path, other));
            return None;
        }
    };
    Some(bound_names(pairs))
}

fn object_counts(
    map: &Map<String, Value>,
    path: &str,
    problems: &mut Vec<ParseProblem>,
    depth: u8,
) -> Option<Counts> {
    // Counts nested under a known key, e.g. {"date": ..., "statuses": {...}}.
    if depth == 0 {
        for key in NESTED_KEYS {
            match map.get(*key) {
                Some(Value::Object(inner)) => {
                    return object_counts(inner, &format!("{path}.{key}"), problems, 1);
                }
                Some(Value::Array(items)) => {
                    return list_counts(items, &format!("{path}.{key}"), problems);
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for (key, v) in map {
        if META_KEYS.contains(&key.as_str()) || v.is_null() {
            continue;
        }
        let child = format!("{path}.{key}");
        match v {
            // {"delivered": {"count": 5}}: the count one level down.
            Value::Object(inner) => match COUNT_KEYS
                .iter()
                .find_map(|k| inner.get(*k))
                .and_then(as_count)
            {
                Some(n) => out.push((key.clone(), n)),
                None => problems.push(ParseProblem::new(child, v)),
            },
            _ => match as_count(v) {
                Some(n) => out.push((key.clone(), n)),
                None => problems.push(ParseProblem::new(child, v)),
            },
        }
    }
    Some(out)
}

fn list_counts(items: &[Value], path: &str, problems: &mut Vec<ParseProblem>) -> Option<Counts> {
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let Some(map) = item.as_object() else {
            problems.push(ParseProblem::new(at, item));
            continue;
        };
        let name = NAME_KEYS
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str));
        let count = COUNT_KEYS
            .iter()
            .find_map(|k| map.get(*k))
            .and_then(as_count);
        match (name, count) {
            (Some(n), Some(c)) => out.push((n.to_owned(), c)),
            _ => problems.push(ParseProblem::new(at, item)),
        }
    }
    Some(out)
}

/// Days of statistics: `[{date, ...counts}]` or `{"<date>": {...counts}}`. Returns the counts
/// of `today` and `yesterday`, each `None` when that day is absent.
pub fn days(
    value: &Value,
    path: &str,
    format: &DateFormat,
    today: Date,
    problems: &mut Vec<ParseProblem>,
) -> (Option<Counts>, Option<Counts>) {
    let yesterday = today.yesterday().ok();
    let mut current = None;
    let mut previous = None;
    let mut take = |date: Date, counts: Option<Counts>| {
        if date == today {
            current = counts;
        } else if Some(date) == yesterday {
            previous = counts;
        }
    };
    match value {
        Value::Array(items) => day_list(items, path, format, &mut take, problems),
        Value::Object(map) => {
            for (key, item) in map {
                match format.read(key) {
                    Some(date) => take(date, counts(item, &format!("{path}.{key}"), problems)),
                    None => problems.push(ParseProblem::new(format!("{path}.{key}"), item)),
                }
            }
        }
        Value::Null => {}
        other => problems.push(ParseProblem::new(path, other)),
    }
    (current, previous)
}

/// Days as a list of `{date, ...counts}` items, each handed to `take` with its date.
pub fn day_list(
    items: &[Value],
    path: &str,
    format: &DateFormat,
    take: &mut impl FnMut(Date, Option<Counts>),
    problems: &mut Vec<ParseProblem>,
) {
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let date_value = item
            .as_object()
            .and_then(|m| ["date", "day", "start_date"].iter().find_map(|k| m.get(*k)));
        match date_value
            .and_then(Value::as_str)
            .and_then(|d| format.read(d))
        {
            Some(date) => take(date, counts(item, &at, problems)),
            None => problems.push(ParseProblem::new(
                format!("{at}.date"),
                date_value.unwrap_or(item),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(pairs: &[(&str, f64)]) -> Option<Counts> {
        Some(pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect())
    }

    #[test]
    fn counts_come_from_flat_listed_or_nested_shapes() {
        let mut p = Vec::new();
        let want = c(&[("bounced", 2.0), ("delivered", 5.0)]);
        for shape in [
            json!({"delivered": 5, "bounced": "2", "total": 7}),
            json!([{"status": "delivered", "count": 5}, {"status": "bounced", "count": "2"}]),
            json!({"date": "d", "statuses": {"delivered": 5, "bounced": 2}}),
            json!({"delivered": {"count": 5}, "bounced": {"value": 2}}),
        ] {
            assert_eq!(counts(&shape, "x", &mut p).map(sorted), want, "{shape}");
        }
        assert!(p.is_empty(), "{p:?}");
    }

    fn sorted(mut v: Counts) -> Counts {
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    #[test]
    fn an_unreadable_count_is_a_problem_and_left_out() {
        let mut p = Vec::new();
        let got = counts(
            &json!({"delivered": 5, "bounced": "many", "deferred": [1]}),
            "overview",
            &mut p,
        );
        assert_eq!(got, c(&[("delivered", 5.0)]));
        let paths: Vec<_> = p.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["overview.bounced", "overview.deferred"]);
    }
}
