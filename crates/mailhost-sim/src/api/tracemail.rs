//! Handlers of mail-tracing statistics: the dashboard (`POST /api/delivery/tracemail/dashboard`)
//! and the daily statistics of one account (`GET /api/delivery/tracemail/daily/{account}`): the
//! request checks here, the figures computed by `world::tracemail` at query time.

use axum::Json;
use axum::extract::State;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde_json::{Map, Value};

use super::envelope::envelope;
use super::error::ApiError;
use super::extract::{Fields, Management, OptionalJsonObject, QueryPairs, TracemailAccount};
use crate::Simulator;
use crate::world::stats::Filter;
use crate::world::tracemail::{DailySort, DailyView, DashboardQuery, Days, NotFound};

/// Longest date range a dashboard section accepts, in days (both ends included).
pub const DASHBOARD_MAX_DAYS: i32 = 31;
/// Bounds of the `limit` members of the dashboard body.
pub const DASHBOARD_MAX_LIMIT: i32 = 1000;
/// `limit` of `top_accounts` when absent.
pub const TOP_ACCOUNTS_DEFAULT_LIMIT: i32 = 10;
/// The most entries `top5` ever lists.
pub const TOP5_MAX: i32 = 5;

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
    days: Days,
    limit: Option<i32>,
}

fn section(body: &Map<String, Value>, name: &str, today: Date) -> Result<Section, ApiError> {
    let Some(object) = body.get(name).filter(|v| !v.is_null()) else {
        return Ok(Section {
            days: Days {
                first: today,
                last: today,
            },
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
    Ok(Section {
        days: Days { first, last },
        limit,
    })
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
    let query = DashboardQuery {
        filter,
        tz,
        zone_name,
        daily: daily.days,
        overview: overview.days,
        top_accounts: top_accounts.days,
        top_accounts_limit: top_accounts.limit.unwrap_or(TOP_ACCOUNTS_DEFAULT_LIMIT),
        top5: top5.days,
        top5_limit: top5.limit.unwrap_or(TOP5_MAX).min(TOP5_MAX),
    };
    Ok(envelope(vec![world.dashboard(&query)]))
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
    if !world.accounts.contains_key(&id) {
        return Err(ApiError::NotFound(format!(
            "Delivery account {id} not found"
        )));
    }
    let kind = one_of(
        &query,
        "type",
        &["account", "domains-rank", "single-domain"],
    )?;
    let sort = match one_of(&query, "sort_field", &["date", "total"])? {
        Some("date") => DailySort::Date,
        Some(_) => DailySort::Total,
        None if kind == Some("domains-rank") => DailySort::Total,
        None => DailySort::Date,
    };
    let ascending = one_of(&query, "sort", &["asc", "desc"])? == Some("asc");
    let domain = query.get("domain").map(str::trim).filter(|d| !d.is_empty());
    let view = match (kind, domain) {
        (None | Some("account"), _) => DailyView::Account,
        (Some("domains-rank"), _) => DailyView::DomainsRank,
        (_, Some(domain)) => DailyView::SingleDomain(domain),
        (_, None) => {
            return Err(ApiError::bad_request(
                "query parameter `domain` is required with `type=single-domain`",
            ));
        }
    };
    Ok(envelope(world.daily(id, view, sort, ascending, now)?))
}

impl From<NotFound> for ApiError {
    fn from(NotFound(message): NotFound) -> Self {
        Self::NotFound(message)
    }
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
