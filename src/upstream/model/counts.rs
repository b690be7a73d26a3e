//! Mail-tracing statistics: the dashboard record and the daily items. Their inner shapes are
//! not documented, so each reader accepts several: counts as a flat object, as a list of
//! `{status, count}` records, or nested one level deeper; numbers as strings; days as a list
//! or as an object keyed by date.

use jiff::civil::Date;
use serde_json::{Map, Value};

use super::names::bound_names;
use super::{MAX_EXACT, Model, ParseProblem, Unreadable, as_count, as_number};
use crate::config::DateFormat;
use crate::upstream::decode::{Fields, first_resource, resources};
use crate::upstream::error::UpstreamError;

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
const COUNT_KEYS: &[&str] = &["count", "total", "value", "messages", "n"];

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
fn days(
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
fn day_list(
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

/// What the dashboard says about today and yesterday.
#[derive(Clone, Debug, Default, PartialEq)]
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

/// Today's and yesterday's counts of one Delivery account.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DailyStats {
    pub current_day: Option<Counts>,
    pub previous_day: Option<Counts>,
}

/// Reads the items of `type=account`: one per day.
pub fn read_daily(
    items: &[Value],
    format: &DateFormat,
    today: Date,
) -> (DailyStats, Vec<ParseProblem>) {
    let mut problems = Vec::new();
    let yesterday = today.yesterday().ok();
    let (mut current_day, mut previous_day) = (None, None);
    // The items are read where they are: copying them into one array would double the memory.
    let mut take = |date: Date, counts: Option<Counts>| {
        if date == today {
            current_day = counts;
        } else if Some(date) == yesterday {
            previous_day = counts;
        }
    };
    day_list(items, "resources", format, &mut take, &mut problems);
    (
        DailyStats {
            current_day,
            previous_day,
        },
        problems,
    )
}

/// One sending domain's counts for today.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainCounts {
    pub domain: String,
    pub total: f64,
    pub counts: Counts,
}

/// Reads the items of `type=domains-rank` and keeps the `top` domains by total (ties by name),
/// whatever order they came in.
pub fn read_domains_rank(items: &[Value], top: usize) -> (Vec<DomainCounts>, Vec<ParseProblem>) {
    let mut problems = Vec::new();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("resources[{i}]");
        let domain = item
            .as_object()
            .and_then(|m| {
                ["domain", "domain_name", "name"]
                    .iter()
                    .find_map(|k| m.get(*k))
            })
            .and_then(Value::as_str)
            .map(domain_label)
            .filter(|d| !d.is_empty());
        let Some(domain) = domain else {
            problems.push(ParseProblem::new(format!("{at}.domain"), item));
            continue;
        };
        let Some(counts) = counts(item, &at, &mut problems) else {
            continue;
        };
        let total = match item.get("total").and_then(as_count) {
            Some(total) => Some(total),
            None => counts
                .iter()
                .try_fold(0.0, |sum, (_, n)| checked_sum(sum, *n)),
        };
        // Two items naming one domain (after lower-casing) are one domain: sum them.
        let existing = out.iter().position(|d: &DomainCounts| d.domain == domain);
        let total = match (existing, total) {
            (Some(i), Some(t)) => checked_sum(out[i].total, t),
            (None, t) => t,
            (Some(_), None) => None,
        };
        let Some(total) = total else {
            // A total beyond exact range is no count: the domain is left out, not made up.
            problems.push(ParseProblem::new(
                format!("{at}.total"),
                item.get("total").unwrap_or(&Value::Null),
            ));
            if let Some(i) = existing {
                out.remove(i);
            }
            continue;
        };
        match existing {
            Some(i) => {
                let d = &mut out[i];
                d.total = total;
                d.counts = bound_names(d.counts.iter().cloned().chain(counts).collect());
            }
            None => out.push(DomainCounts {
                domain,
                total,
                counts,
            }),
        }
    }
    out.sort_by(|a, b| {
        b.total
            .total_cmp(&a.total)
            .then_with(|| a.domain.cmp(&b.domain))
    });
    out.truncate(top);
    (out, problems)
}

/// `a + b`, unless the sum leaves the range where a count is exact.
fn checked_sum(a: f64, b: f64) -> Option<f64> {
    Some(a + b).filter(|s| (0.0..=MAX_EXACT).contains(s))
}

/// A domain name as a label value: lower case, letters, digits, dots and dashes, at most 253.
fn domain_label(name: &str) -> String {
    name.trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .take(253)
        .collect::<String>()
        .to_ascii_lowercase()
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

/// What reading the daily statistics needs besides the answer.
#[derive(Clone, Debug)]
pub struct DailyParams {
    pub date_format: DateFormat,
    /// Today in the configured zone.
    pub today: Date,
}

/// `GET /api/delivery/tracemail/daily/{account}?type=account`: one item per day.
impl Model for DailyStats {
    type Decoded = Vec<Value>;
    type Params = DailyParams;

    fn decode(body: &[u8]) -> Result<Vec<Value>, UpstreamError> {
        resources(body, Fields::All)
    }

    fn read(days: &Vec<Value>, p: &DailyParams) -> Result<(Self, Vec<ParseProblem>), Unreadable> {
        // The operation answers the account's recent days, zero days included: none at all is
        // not an answer we can read (and must not blank today's figures).
        if days.is_empty() {
            return Err(Unreadable {
                problem: None,
                detail: "resources is empty: no days in the answer".to_owned(),
            });
        }
        Ok(read_daily(days, &p.date_format, p.today))
    }
}

/// Today's top sending domains of one account, largest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainsRank(pub Vec<DomainCounts>);

/// `GET /api/delivery/tracemail/daily/{account}?type=domains-rank`: one item per domain. The
/// parameter is how many domains are kept.
impl Model for DomainsRank {
    type Decoded = Vec<Value>;
    type Params = usize;

    fn decode(body: &[u8]) -> Result<Vec<Value>, UpstreamError> {
        resources(body, Fields::All)
    }

    fn read(items: &Vec<Value>, top: &usize) -> Result<(Self, Vec<ParseProblem>), Unreadable> {
        let (domains, problems) = read_domains_rank(items, *top);
        Ok((DomainsRank(domains), problems))
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
    fn counts_come_from_flat_listed_or_nested_shapes() {
        let mut p = Vec::new();
        let want = c(&[("bounced", 2.0), ("delivered", 5.0)]);
        assert_eq!(
            counts(
                &json!({"delivered": 5, "bounced": "2", "total": 7}),
                "x",
                &mut p
            )
            .map(sorted),
            want
        );
        assert_eq!(
            counts(
                &json!([{"status": "delivered", "count": 5}, {"status": "bounced", "count": "2"}]),
                "x",
                &mut p
            )
            .map(sorted),
            want
        );
        assert_eq!(
            counts(
                &json!({"date": "d", "statuses": {"delivered": 5, "bounced": 2}}),
                "x",
                &mut p
            )
            .map(sorted),
            want
        );
        assert_eq!(
            counts(
                &json!({"delivered": {"count": 5}, "bounced": {"value": 2}}),
                "x",
                &mut p
            )
            .map(sorted),
            want
        );
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

    #[test]
    fn days_are_matched_by_date_in_the_configured_format() {
        let f = DateFormat::parse("DD/MM/YYYY").unwrap();
        let (d, p) = read_daily(
            &[
                json!({"date": "21/11/2026", "delivered": 1}),
                json!({"date": "22/11/2026", "delivered": 2}),
                json!({"date": "20/11/2026", "delivered": 9}),
            ],
            &f,
            today(),
        );
        assert!(p.is_empty());
        assert_eq!(d.current_day, c(&[("delivered", 2.0)]));
        assert_eq!(d.previous_day, c(&[("delivered", 1.0)]));
        // ISO dates and date-times are understood whatever the configured format.
        let (d, _) = read_daily(
            &[json!({"date": "2026-11-22T00:00:00+01:00", "delivered": 3})],
            &f,
            today(),
        );
        assert_eq!(d.current_day, c(&[("delivered", 3.0)]));
    }

    #[test]
    fn a_missing_day_gives_no_counts_rather_than_zeros() {
        let (d, _) = read_daily(
            &[json!({"date": "2026-11-22", "delivered": 2})],
            &DateFormat::default(),
            today(),
        );
        assert_eq!(d.previous_day, None);
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

    #[test]
    fn domains_are_ranked_by_total_and_capped() {
        let items: Vec<_> = (0..30)
            .map(|i| json!({"domain": format!("D{i}.Example"), "total": i, "delivered": i}))
            .collect();
        let (d, _) = read_domains_rank(&items, 20);
        assert_eq!(d.len(), 20);
        assert_eq!(d[0].domain, "d29.example");
        assert_eq!(d[19].domain, "d10.example");
    }

    #[test]
    fn domain_totals_beyond_exact_range_are_left_out_not_overflowed() {
        let huge = MAX_EXACT;
        let items = vec![
            json!({"domain": "a.example", "delivered": huge, "bounced": huge}),
            json!({"domain": "b.example", "total": huge}),
            json!({"domain": "B.example", "total": huge}),
            json!({"domain": "c.example", "delivered": 3}),
        ];
        let (d, p) = read_domains_rank(&items, 10);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].domain, "c.example");
        assert_eq!(d[0].total, 3.0);
        let paths: Vec<_> = p.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["resources[0].total", "resources[2].total"]);
    }
}
