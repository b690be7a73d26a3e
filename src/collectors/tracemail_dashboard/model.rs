//! The dashboard record: today's and yesterday's activity, the overview, status groups and
//! the top accounts, each in any of the shapes the counts readers accept.

use jiff::civil::Date;
use serde_json::Value;

use crate::settings::date_format::DateFormat;
use crate::upstream::decode::{Fields, first_resource};
use crate::upstream::error::UpstreamError;
use crate::upstream::model::counts::{COUNT_KEYS, Counts, counts, days};
use crate::upstream::model::{Model, ParseProblem, Unreadable, as_count, as_number};

/// The members of the dashboard record [`read_dashboard`] reads; the decoder skips the others.
pub const DASHBOARD_FIELDS: Fields = Fields::Only {
    keep: &[
        "daily_activity",
        "overview",
        "status_groups",
        "top_accounts_by_delivery_account",
        "top5_by_delivery_account",
    ],
    lengths: &[],
};

/// What the dashboard says about today and yesterday.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Dashboard {
    pub current_day: Option<Counts>,
    pub previous_day: Option<Counts>,
    pub overview: Option<Counts>,
    pub status_groups: Option<Counts>,
    /// (account id, messages), largest first, at most `limit`.
    pub top_accounts: Vec<(String, f64)>,
}

/// Reads a dashboard record; `Err` only when it is not an object.
pub fn read_dashboard(
    record: &Value,
    format: &DateFormat,
    today: Date,
    limit: usize,
) -> Result<(Dashboard, Vec<ParseProblem>), ParseProblem> {
    let map = record
        .as_object()
        .ok_or_else(|| ParseProblem::new("resources[0]", record))?;
    let mut problems = Vec::new();
    let (current_day, previous_day) = match map.get("daily_activity") {
        Some(v) => days(v, "daily_activity", format, today, &mut problems),
        None => (None, None),
    };
    let overview = map
        .get("overview")
        .and_then(|v| counts(v, "overview", &mut problems));
    let status_groups = map
        .get("status_groups")
        .and_then(|v| counts(v, "status_groups", &mut problems));
    let mut top_accounts = Vec::new();
    for key in [
        "top_accounts_by_delivery_account",
        "top5_by_delivery_account",
    ] {
        if let Some(v) = map.get(key).filter(|v| !v.is_null()) {
            top_accounts = top_list(v, key, &mut problems);
            if !top_accounts.is_empty() {
                break;
            }
        }
    }
    top_accounts.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    // An account listed twice keeps its largest figure: one series per account.
    let mut seen = std::collections::HashSet::new();
    top_accounts.retain(|(id, _)| seen.insert(id.clone()));
    top_accounts.truncate(limit);
    Ok((
        Dashboard {
            current_day,
            previous_day,
            overview,
            status_groups,
            top_accounts,
        },
        problems,
    ))
}

/// Keys that may name the account in a top-list item.
const ACCOUNT_KEYS: &[&str] = &["account_id", "delivery_account_id", "account", "id"];

/// A top list: `[{account_id, total, ...}]` or `{"<id>": total}` or `{"<id>": {total}}`.
fn top_list(value: &Value, path: &str, problems: &mut Vec<ParseProblem>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let total_of = |v: &Value| match v {
        Value::Object(m) => COUNT_KEYS.iter().find_map(|k| m.get(*k)).and_then(as_count),
        other => as_count(other),
    };
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let id = item
                    .as_object()
                    .and_then(|m| ACCOUNT_KEYS.iter().find_map(|k| m.get(*k)))
                    .and_then(account_id);
                match (id, total_of(item)) {
                    (Some(id), Some(n)) => out.push((id, n)),
                    _ => problems.push(ParseProblem::new(format!("{path}[{i}]"), item)),
                }
            }
        }
        Value::Object(map) => {
            for (key, v) in map {
                match (account_id(&Value::String(key.clone())), total_of(v)) {
                    (Some(id), Some(n)) => out.push((id, n)),
                    _ => problems.push(ParseProblem::new(format!("{path}.{key}"), v)),
                }
            }
        }
        other => problems.push(ParseProblem::new(path, other)),
    }
    out
}

/// An account id as a label value: an int32, from a number or a numeric string.
fn account_id(v: &Value) -> Option<String> {
    let n = as_number(v)?;
    (n.fract() == 0.0 && n > 0.0 && n <= f64::from(i32::MAX)).then(|| (n as i64).to_string())
}

/// What reading a dashboard needs besides the answer.
#[derive(Clone, Debug)]
pub struct DashboardParams {
    pub date_format: DateFormat,
    /// Today in the configured zone: which day of `daily_activity` is today.
    pub today: Date,
    /// Top-list entries kept.
    pub limit: usize,
}

/// `POST /api/delivery/tracemail/dashboard`: the envelope around one dashboard record.
impl Model for Dashboard {
    type Decoded = Value;
    type Params = DashboardParams;

    fn decode(body: &[u8]) -> Result<Value, UpstreamError> {
        first_resource(body, DASHBOARD_FIELDS)
    }

    fn read(record: &Value, p: &DashboardParams) -> Result<(Self, Vec<ParseProblem>), Unreadable> {
        read_dashboard(record, &p.date_format, p.today, p.limit)
            .map_err(|problem| Unreadable::not_an_object("the dashboard record", problem))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn today() -> Date {
        Date::constant(2026, 11, 22)
    }

    fn c(pairs: &[(&str, f64)]) -> Option<Counts> {
        Some(pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect())
    }

    #[test]
    fn the_dashboard_accepts_days_keyed_by_date_and_groups_as_a_map() {
        let record = json!({
            "daily_activity": {"2026-11-22": {"delivered": 4}, "2026-11-21": {"delivered": 3}},
            "status_groups": {"failed": "2", "delivered": 4},
            "top_accounts_by_delivery_account": {"1002": {"total": 5}, "1001": 9},
        });
        let (d, p) = read_dashboard(&record, &DateFormat::default(), today(), 10).unwrap();
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(d.current_day, c(&[("delivered", 4.0)]));
        assert_eq!(d.previous_day, c(&[("delivered", 3.0)]));
        assert_eq!(
            d.status_groups.map(sorted),
            c(&[("delivered", 4.0), ("failed", 2.0)])
        );
        assert_eq!(
            d.top_accounts,
            vec![("1001".to_owned(), 9.0), ("1002".to_owned(), 5.0)]
        );
    }

    #[test]
    fn top_lists_are_cut_at_the_limit_largest_first() {
        let list: Vec<_> = (1..=30)
            .map(|i| json!({"account_id": i, "total": i}))
            .collect();
        let (d, _) = read_dashboard(
            &json!({"top_accounts_by_delivery_account": list}),
            &DateFormat::default(),
            today(),
            3,
        )
        .unwrap();
        assert_eq!(
            d.top_accounts
                .iter()
                .map(|(a, _)| a.as_str())
                .collect::<Vec<_>>(),
            ["30", "29", "28"]
        );
    }

    fn sorted(mut v: Counts) -> Counts {
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}
