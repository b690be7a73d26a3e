//! Handlers of mail-tracing statistics: the dashboard (`POST /api/delivery/tracemail/dashboard`)
//! and the daily statistics of one account (`GET /api/delivery/tracemail/daily/{account}`): the
//! request checks here, the figures computed by `world::tracemail` at query time.

use std::cmp::Ordering;

use axum::Json;
use axum::extract::State;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde_json::{Map, Value, json};

use super::envelope::envelope;
use super::error::ApiError;
use super::extract::{Fields, Management, OptionalJsonObject, QueryPairs, TracemailAccount};
use crate::Simulator;
use crate::world::stats::Filter;
use crate::world::stats::Outcome::{Bounced, Complaint, Deferred, Delivered, Rejected};
use crate::world::tracemail::{counts_object, dates, range_bounds, ranking};

/// Longest date range a dashboard section accepts, in days (both ends included).
pub const DASHBOARD_MAX_DAYS: i32 = 31;
/// Bounds of the `limit` members of the dashboard body.
pub const DASHBOARD_MAX_LIMIT: i32 = 1000;
/// `limit` of `top_accounts` when absent.
pub const TOP_ACCOUNTS_DEFAULT_LIMIT: i32 = 10;
/// The most entries `top5` ever lists.
pub const TOP5_MAX: i32 = 5;
/// Days listed by the daily statistics of an account (`type=account` or `single-domain`).
pub const DAILY_DAYS: i32 = 7;

const AUDIENCES: [&str; 3] = ["all", "active", "top"];
const TRAFFIC: [&str; 3] = ["transactional", "marketing", "mixed"];

/// Reads `YYYY-MM-DD` or `DD/MM/YYYY`.
pub(crate) fn parse_date(value: &str) -> Option<Date> {
    let value = value.trim();
    if let Some((day, rest)) = value.split_once('/') {
        let (month, year) = rest.split_once('/')?;
        let all_digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
        if !(all_digits(day, 2) && all_digits(month, 2) && all_digits(year, 4)) {
            return None;
        }
        return Date::new(year.parse().ok()?, month.parse().ok()?, day.parse().ok()?).ok();
    }
    let bytes = value.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    value.parse().ok()
}

/// One dated section of the dashboard body, validated.
struct Section {
    first: Date,
    last: Date,
    limit: Option<i32>,
}

fn section(body: &Map<String, Value>, name: &str, today: Date) -> Result<Section, ApiError> {
    let Some(object) = body.get(name).filter(|v| !v.is_null()) else {
        return Ok(Section {
            first: today,
            last: today,
            limit: None,
        });
    };
    let object = object
        .as_object()
        .ok_or_else(|| ApiError::BadRequest(format!("`{name}` must be an object")))?;
    let fields = Fields(object);
    let date = |member: &str| -> Result<Option<Date>, ApiError> {
        fields
            .string(member)
            .map_err(|_| ApiError::BadRequest(format!("`{name}.{member}` must be a string")))?
            .map(|value| {
                parse_date(value).ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "`{name}.{member}` must be a date written YYYY-MM-DD or DD/MM/YYYY, got {value:?}"
                    ))
                })
            })
            .transpose()
    };
    let (first, last) = match (date("start_date")?, date("end_date")?) {
        (Some(first), Some(last)) => (first, last),
        (Some(first), None) => (first, first.max(today)),
        (None, Some(last)) => (last.min(today), last),
        (None, None) => (today, today),
    };
    if last < first {
        return Err(ApiError::BadRequest(format!(
            "`{name}.end_date` ({last}) is before `{name}.start_date` ({first})"
        )));
    }
    let days = first
        .until(last)
        .map(|span| span.get_days())
        .unwrap_or(i32::MAX);
    if days >= DASHBOARD_MAX_DAYS {
        return Err(ApiError::BadRequest(format!(
            "`{name}` covers {} days; at most {DASHBOARD_MAX_DAYS} are accepted",
            days.saturating_add(1)
        )));
    }
    let limit = fields
        .int32("limit")
        .map_err(|_| ApiError::BadRequest(format!("`{name}.limit` must be an int32 integer")))?;
    if let Some(limit) = limit
        && !(1..=DASHBOARD_MAX_LIMIT).contains(&limit)
    {
        return Err(ApiError::BadRequest(format!(
            "`{name}.limit` must be between 1 and {DASHBOARD_MAX_LIMIT}, got {limit}"
        )));
    }
    for (member, allowed) in [("audience", &AUDIENCES), ("traffic", &TRAFFIC)] {
        if let Some(value) = fields
            .string(member)
            .map_err(|_| ApiError::BadRequest(format!("`{name}.{member}` must be a string")))?
            && !allowed.contains(&value)
        {
            return Err(ApiError::BadRequest(format!(
                "`{name}.{member}` must be one of {}, got {value:?}",
                allowed.join(", ")
            )));
        }
    }
    Ok(Section { first, last, limit })
}

/// `POST /api/delivery/tracemail/dashboard`. Checks: body (400 if not an object), `account`
/// (400 if not an id), scope (403), account existence (404), then the other members (400).
pub(crate) async fn dashboard(
    State(sim): State<Simulator>,
    auth: Management,
    OptionalJsonObject(body): OptionalJsonObject,
) -> Result<Json<Value>, ApiError> {
    let fields = Fields(&body);
    let account = fields
        .string("account")?
        .map(|value| {
            value.trim().parse::<i32>().map_err(|_| {
                ApiError::BadRequest(format!(
                    "`account` must be a Delivery account id (an int32 in a string), got {value:?}"
                ))
            })
        })
        .transpose()?;
    if let Some(id) = account {
        auth.check_account(id)?;
    }
    let now = sim.clock().now();
    let world = sim.world();
    if let Some(id) = account
        && !world.accounts.contains_key(&id)
    {
        return Err(ApiError::NotFound(format!(
            "Delivery account {id} not found"
        )));
    }
    let domain = fields.string("domain")?.map(|d| d.trim().to_owned());
    let zone_name = fields.string("timezone")?.unwrap_or("UTC");
    let tz = TimeZone::get(zone_name).map_err(|_| {
        ApiError::BadRequest(format!(
            "`timezone` must be an IANA time zone name (e.g. \"Europe/Rome\"), got {zone_name:?}"
        ))
    })?;
    let today = now.to_zoned(tz.clone()).date();
    let daily = section(&body, "daily_activity", today)?;
    let overview = section(&body, "overview", today)?;
    let top_accounts = section(&body, "top_accounts", today)?;
    let top5 = section(&body, "top5", today)?;

    let filter = Filter {
        accounts: match (account, auth.scope()) {
            (Some(id), _) => Some(vec![id]),
            (None, Some(scope)) => Some(scope.to_vec()),
            (None, None) => None,
        },
        domain,
    };
    let daily_activity: Vec<Value> = dates(daily.first, daily.last)
        .into_iter()
        .map(|date| {
            let counts = world.stats.day(&filter, &tz, date);
            counts_object(&counts, &[("date", json!(date.to_string()))])
        })
        .collect();
    let (from, to) = range_bounds(&tz, overview.first, overview.last);
    let sums = world.stats.sum(&filter, from, to);
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
    let top_limit = top_accounts.limit.unwrap_or(TOP_ACCOUNTS_DEFAULT_LIMIT);
    let top5_limit = top5.limit.unwrap_or(TOP5_MAX).min(TOP5_MAX);
    let record = json!({
        "timezone": tz.iana_name().unwrap_or(zone_name),
        "daily_activity": daily_activity,
        "overview": counts_object(&sums, &[]),
        "status_groups": status_groups,
        "top_accounts_by_delivery_account": ranking(
            &world,
            &filter,
            range_bounds(&tz, top_accounts.first, top_accounts.last),
            top_limit,
            true,
        ),
        "top5_by_delivery_account": ranking(
            &world,
            &filter,
            range_bounds(&tz, top5.first, top5.last),
            top5_limit,
            false,
        ),
    });
    Ok(envelope(vec![record]))
}

/// The `type` of a daily statistics request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DailyType {
    Account,
    DomainsRank,
    SingleDomain,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SortField {
    Date,
    Total,
}

fn one_of<'a>(
    query: &'a QueryPairs,
    name: &str,
    allowed: &[&str],
) -> Result<Option<&'a str>, ApiError> {
    match query.get(name) {
        Some(value) if !allowed.contains(&value) => Err(ApiError::BadRequest(format!(
            "query parameter `{name}` must be one of {}, got {value:?}",
            allowed.join(", ")
        ))),
        other => Ok(other),
    }
}

/// `GET /api/delivery/tracemail/daily/{account}`. Checks: path (400), scope (403), account (404),
/// query (400), domain of the account (404). Days are local days in the account's time zone.
pub(crate) async fn daily(
    State(sim): State<Simulator>,
    auth: Management,
    TracemailAccount(id): TracemailAccount,
    query: QueryPairs,
) -> Result<Json<Value>, ApiError> {
    auth.check_account(id)?;
    let now = sim.clock().now();
    let world = sim.world();
    let account = world
        .accounts
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("Delivery account {id} not found")))?;
    let kind = match one_of(
        &query,
        "type",
        &["account", "domains-rank", "single-domain"],
    )? {
        None | Some("account") => DailyType::Account,
        Some("domains-rank") => DailyType::DomainsRank,
        _ => DailyType::SingleDomain,
    };
    let sort_field = match one_of(&query, "sort_field", &["date", "total"])? {
        Some("date") => SortField::Date,
        Some(_) => SortField::Total,
        None if kind == DailyType::DomainsRank => SortField::Total,
        None => SortField::Date,
    };
    let ascending = one_of(&query, "sort", &["asc", "desc"])? == Some("asc");
    let domain = query.get("domain").map(str::trim).filter(|d| !d.is_empty());
    if kind == DailyType::SingleDomain && domain.is_none() {
        return Err(ApiError::bad_request(
            "query parameter `domain` is required with `type=single-domain`",
        ));
    }
    let tz = account.time_zone();
    let today = now.to_zoned(tz.clone()).date();
    let mut filter = Filter {
        accounts: Some(vec![id]),
        domain: None,
    };
    let order = |ordering: Ordering| {
        if ascending {
            ordering
        } else {
            ordering.reverse()
        }
    };

    let mut items: Vec<(Value, i64, String)> = match kind {
        DailyType::Account | DailyType::SingleDomain => {
            if kind == DailyType::SingleDomain {
                let wanted = domain.unwrap_or_default();
                let own = account
                    .domains
                    .iter()
                    .find(|d| d.eq_ignore_ascii_case(wanted))
                    .ok_or_else(|| {
                        ApiError::NotFound(format!(
                            "domain {wanted:?} is not a sending domain of Delivery account {id}"
                        ))
                    })?;
                filter.domain = Some(own.clone());
            }
            let first = (1..DAILY_DAYS).fold(today, |d, _| d.yesterday().unwrap_or(d));
            dates(first, today)
                .into_iter()
                .map(|date| {
                    let counts = world.stats.day(&filter, &tz, date);
                    let key = date.to_string();
                    (
                        counts_object(&counts, &[("date", json!(key))]),
                        counts.total(),
                        key,
                    )
                })
                .collect()
        }
        DailyType::DomainsRank => {
            let (from, to) = range_bounds(&tz, today, today);
            let sums = world.stats.sum_by_domain(&filter, from, to);
            let mut seen: Vec<String> = Vec::new();
            account
                .domains
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
    };
    items.sort_by(
        |(_, a_total, a_key), (_, b_total, b_key)| match sort_field {
            SortField::Date => order(a_key.cmp(b_key)),
            SortField::Total => order(a_total.cmp(b_total)).then(a_key.cmp(b_key)),
        },
    );
    Ok(envelope(
        items.into_iter().map(|(item, _, _)| item).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_read_iso_or_day_first() {
        let expected = Some(jiff::civil::date(2026, 11, 22));
        assert_eq!(parse_date("2026-11-22"), expected);
        assert_eq!(parse_date("22/11/2026"), expected);
        for bad in [
            "2026-11-31",
            "31/02/2026",
            "11/22/2026",
            "2026/11/22",
            "22-11-2026",
            "",
            "2026-1-5",
            "1/1/2026",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }
}
