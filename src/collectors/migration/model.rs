//! Migration statistics: the `aggregate` object, whose content is not documented. The keys the
//! simulator defines get first-class fields (in flat or nested spellings); every other numeric
//! leaf is kept under its dotted path, depth and count bounded.

use serde_json::Value;

use crate::upstream::decode::aggregate;
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::model::names::{bound_names, sanitize};
use crate::upstream::model::{
    MAX_EXACT, Model, ParseProblem, Unreadable, as_count, as_number, epoch, parse_timestamp,
};

/// Leaves deeper than this are not walked.
pub const MAX_DEPTH: usize = 4;
/// At most this many other numeric leaves are kept per migration.
pub const MAX_LEAVES: usize = 64;

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// Sanitised status name (`pending`, `running`, `completed`, ...).
    pub status: Option<String>,
    /// Accounts by state, `total` excluded.
    pub accounts: Vec<(String, f64)>,
    pub messages_total: Option<f64>,
    pub messages_migrated: Option<f64>,
    pub bytes_total: Option<f64>,
    pub bytes_migrated: Option<f64>,
    pub errors: Option<f64>,
    pub started: Option<f64>,
    pub updated: Option<f64>,
    /// Every other numeric leaf: (dotted path, value).
    pub other: Vec<(String, f64)>,
}

/// Spellings of each first-class figure, as dotted paths.
const MESSAGES_TOTAL: &[&str] = &["messages.total", "messages_total", "total_messages"];
const MESSAGES_MIGRATED: &[&str] = &[
    "messages.migrated",
    "messages_migrated",
    "migrated_messages",
];
const BYTES_TOTAL: &[&str] = &["bytes.total", "bytes_total", "size.total", "total_bytes"];
const BYTES_MIGRATED: &[&str] = &[
    "bytes.migrated",
    "bytes_migrated",
    "size.migrated",
    "migrated_bytes",
];
const ERRORS: &[&str] = &["errors", "errors.total", "errors.count", "error_count"];
const STARTED: &[&str] = &["started_at", "start_date"];
const UPDATED: &[&str] = &["updated_at", "last_update"];

/// Paths read as first-class figures (in any spelling) or labels: never repeated as
/// `aggregate` keys, even when their value could not be read.
const RESERVED: &[&[&str]] = &[
    MESSAGES_TOTAL,
    MESSAGES_MIGRATED,
    BYTES_TOTAL,
    BYTES_MIGRATED,
    ERRORS,
    STARTED,
    UPDATED,
    &["status", "state", "accounts", "finished_at"],
];

/// The value at a dotted path, unless null or an object (an object only holds the figure
/// further down, under another spelling).
fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(root, |v, key| v.get(key))
        .filter(|v| !v.is_null() && !v.is_object())
}

impl Record {
    /// Reads an `aggregate` object; `Err` only when it is not an object.
    pub fn from_aggregate(aggregate: &Value) -> Result<(Self, Vec<ParseProblem>), ParseProblem> {
        if !aggregate.is_object() {
            return Err(ParseProblem::new("aggregate", aggregate));
        }
        let mut problems = Vec::new();
        let messages_total = figure(aggregate, MESSAGES_TOTAL, &mut problems);
        let messages_migrated = figure(aggregate, MESSAGES_MIGRATED, &mut problems);
        let bytes_total = figure(aggregate, BYTES_TOTAL, &mut problems);
        let bytes_migrated = figure(aggregate, BYTES_MIGRATED, &mut problems);
        let errors = figure(aggregate, ERRORS, &mut problems);
        let started = stamp(aggregate, STARTED, &mut problems);
        let updated = stamp(aggregate, UPDATED, &mut problems);
        let status = status_name(aggregate, &mut problems);
        let accounts = account_counts(aggregate, &mut problems);
        let mut other = Vec::new();
        walk(aggregate, "", 0, &mut other);
        Ok((
            Record {
                status,
                accounts,
                messages_total,
                messages_migrated,
                bytes_total,
                bytes_migrated,
                errors,
                started,
                updated,
                other,
            },
            problems,
        ))
    }
}

/// The first of a figure's spellings present in the aggregate, with the path it was found at.
fn first_spelling<'a>(
    aggregate: &'a Value,
    paths: &[&'static str],
) -> Option<(&'static str, &'a Value)> {
    paths
        .iter()
        .find_map(|p| lookup(aggregate, p).map(|v| (*p, v)))
}

/// A count under one of its spellings; an unreadable one is a problem named by its path.
fn figure(
    aggregate: &Value,
    paths: &[&'static str],
    problems: &mut Vec<ParseProblem>,
) -> Option<f64> {
    let (path, v) = first_spelling(aggregate, paths)?;
    match v {
        // An error list counts its entries.
        Value::Array(items) if paths == ERRORS => Some(items.len() as f64),
        _ => as_count(v).or_else(|| {
            problems.push(ParseProblem::new(format!("aggregate.{path}"), v));
            None
        }),
    }
}

/// A date under one of its spellings, as epoch seconds; an empty string is no date.
fn stamp(
    aggregate: &Value,
    paths: &[&'static str],
    problems: &mut Vec<ParseProblem>,
) -> Option<f64> {
    let (path, v) = first_spelling(aggregate, paths)?;
    let ts = match v {
        Value::String(s) if s.trim().is_empty() => return None,
        Value::String(s) => parse_timestamp(s),
        // An epoch number, bounded like any other date (milliseconds are recognised).
        other => as_number(other).and_then(epoch),
    };
    if ts.is_none() {
        problems.push(ParseProblem::new(format!("aggregate.{path}"), v));
    }
    ts
}

/// The sanitised `status` (or `state`).
fn status_name(aggregate: &Value, problems: &mut Vec<ParseProblem>) -> Option<String> {
    match aggregate.get("status").or_else(|| aggregate.get("state")) {
        Some(Value::String(s)) => Some(sanitize(s)),
        None | Some(Value::Null) => None,
        Some(other) => {
            problems.push(ParseProblem::new("aggregate.status", other));
            None
        }
    }
}

/// Accounts by state, from a map of counts or a list of `{state, count}` items.
fn account_counts(aggregate: &Value, problems: &mut Vec<ParseProblem>) -> Vec<(String, f64)> {
    match aggregate.get("accounts") {
        Some(Value::Object(map)) => bound_names(
            map.iter()
                .filter(|(k, _)| k.as_str() != "total")
                .filter_map(|(k, v)| match as_count(v) {
                    Some(n) => Some((k.clone(), n)),
                    None => {
                        problems.push(ParseProblem::new(format!("aggregate.accounts.{k}"), v));
                        None
                    }
                })
                .collect(),
        ),
        Some(Value::Array(items)) => bound_names(account_items(items, problems)),
        None | Some(Value::Null) => Vec::new(),
        Some(other) => {
            problems.push(ParseProblem::new("aggregate.accounts", other));
            Vec::new()
        }
    }
}

/// The accounts' list spelling: each item names its state and its count.
fn account_items(items: &[Value], problems: &mut Vec<ParseProblem>) -> Vec<(String, f64)> {
    let mut pairs = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let name = ["state", "status", "name"]
            .iter()
            .find_map(|k| item.get(*k))
            .and_then(Value::as_str);
        let n = ["count", "total", "value"]
            .iter()
            .find_map(|k| item.get(*k))
            .and_then(as_count);
        match (name, n) {
            (Some(name), Some(n)) => pairs.push((name.to_owned(), n)),
            _ => problems.push(ParseProblem::new(format!("aggregate.accounts[{i}]"), item)),
        }
    }
    pairs
}

/// Collects numeric leaves not under a [`RESERVED`] path, in
/// document order, up to [`MAX_DEPTH`] and [`MAX_LEAVES`].
fn walk(v: &Value, path: &str, depth: usize, out: &mut Vec<(String, f64)>) {
    if out.len() >= MAX_LEAVES || depth > MAX_DEPTH || RESERVED.iter().any(|r| r.contains(&path)) {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let key = sanitize(k);
                let p = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                walk(child, &p, depth + 1, out);
            }
        }
        Value::Number(_) if !path.is_empty() => {
            // Keys equal once sanitised keep the first: one series per key.
            if let Some(n) = as_number(v).filter(|x| x.abs() <= MAX_EXACT)
                && !out.iter().any(|(k, _)| k == path)
            {
                out.push((path.to_owned(), n));
            }
        }
        // Strings are read only where a figure is expected; arrays are not walked (their
        // indexes would make unstable keys).
        _ => {}
    }
}

/// `GET /api/migrations/{code}/stats`: the `aggregate` member of the answer.
impl Model for Record {
    type Decoded = Value;
    type Params = ();

    fn decode(body: &[u8]) -> Result<Value, UpstreamError> {
        match aggregate(body)? {
            // An empty aggregate says nothing: keep the last values rather than none.
            Some(Value::Object(map)) if map.is_empty() => Err(UpstreamError::new(
                FailureReason::Decode,
                "aggregate is empty",
            )),
            Some(a) => Ok(a),
            None => Err(UpstreamError::new(
                FailureReason::Decode,
                "no aggregate object in the body",
            )),
        }
    }

    fn read(aggregate: &Value, _: &()) -> Result<(Self, Vec<ParseProblem>), Unreadable> {
        Self::from_aggregate(aggregate).map_err(|p| Unreadable::not_an_object("aggregate", p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(v: &Value) -> (Record, Vec<ParseProblem>) {
        Record::from_aggregate(v).unwrap()
    }

    #[test]
    fn first_class_figures_are_read_in_nested_or_flat_spellings() {
        let nested = json!({"status": "Running", "accounts": {"total": 3, "completed": 2, "failed": 1},
            "messages": {"total": 100, "migrated": "40"}, "bytes": {"total": 1000, "migrated": 400}, "errors": 2});
        let flat = json!({"status": "running", "accounts": [{"state": "completed", "count": 2}, {"state": "failed", "count": 1}],
            "messages_total": 100, "messages_migrated": 40, "bytes_total": "1000", "bytes_migrated": 400, "errors": [{"x": 1}, {"x": 2}]});
        for v in [nested, flat] {
            let (m, p) = record(&v);
            assert!(p.is_empty(), "{p:?}");
            assert_eq!(m.status.as_deref(), Some("running"));
            assert_eq!(m.messages_total, Some(100.0));
            assert_eq!(m.messages_migrated, Some(40.0));
            assert_eq!(m.bytes_total, Some(1000.0));
            assert_eq!(m.bytes_migrated, Some(400.0));
            assert_eq!(m.errors, Some(2.0));
            let mut accounts = m.accounts.clone();
            accounts.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(
                accounts,
                vec![("completed".to_owned(), 2.0), ("failed".to_owned(), 1.0)]
            );
            assert!(m.other.is_empty(), "{:?}", m.other);
        }
    }

    #[test]
    fn other_numeric_leaves_keep_their_dotted_path_within_bounds() {
        let v = json!({"throughput": {"messages_per_minute": 250}, "deep": {"a": {"b": {"c": {"d": 1}}}}, "Odd Key": 3});
        let (m, _) = record(&v);
        assert_eq!(
            m.other,
            vec![
                ("odd_key".to_owned(), 3.0),
                ("throughput.messages_per_minute".to_owned(), 250.0)
            ]
        );
        let many: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i:03}"), json!(i))).collect();
        let (m, _) = record(&json!({ "many": many }));
        assert_eq!(m.other.len(), MAX_LEAVES);
    }

    #[test]
    fn a_figure_of_the_wrong_shape_is_a_problem_not_a_zero() {
        let (m, p) = record(&json!({"messages": {"total": "lots"}, "started_at": "yesterday"}));
        assert_eq!(m.messages_total, None);
        assert_eq!(m.started, None);
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn epoch_numbers_are_dates_only_within_the_calendar() {
        let (m, p) = record(&json!({"started_at": 1_795_334_400_000_u64, "updated_at": 1e300}));
        assert_eq!(m.started, Some(1_795_334_400.0), "milliseconds");
        assert_eq!(m.updated, None);
        assert_eq!(p.len(), 1);
        let (m, _) = record(&json!({"started_at": -5}));
        assert_eq!(m.started, None);
    }
}
