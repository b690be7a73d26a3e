//! The daily statistics of one Delivery account: `type=account` (one item per day) and
//! `type=domains-rank` (one item per sending domain).

use jiff::civil::Date;
use serde_json::Value;

use crate::settings::date_format::DateFormat;
use crate::upstream::decode::{Fields, resources};
use crate::upstream::error::UpstreamError;
use crate::upstream::model::counts::{Counts, counts, day_list};
use crate::upstream::model::names::bound_names;
use crate::upstream::model::{MAX_EXACT, Model, ParseProblem, Unreadable, as_count};

/// Today's and yesterday's counts of one Delivery account.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
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
            .map(crate::upstream::model::names::domain_label)
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
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
