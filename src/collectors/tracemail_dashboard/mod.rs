//! Mail-tracing dashboard: `POST /api/delivery/tracemail/dashboard` once per view (the whole
//! customer, and any configured or discovered account or domain filter), asking for yesterday
//! and today in the configured time zone. One call per view per interval.

mod model;
mod series;

pub use model::{DASHBOARD_FIELDS, Dashboard, DashboardParams, read_dashboard};

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::civil::Date;
use serde::Deserialize;
use serde_json::{Value, json};

use super::run::Context;
use super::{Collect, Encode, Extra, Read, Refers, Revealed, TargetKind};
use crate::redact::quote;
use crate::settings::error::{ConfigError, invalid};
use crate::settings::fields::{Day, account_list, distinct, in_bounds};
use crate::settings::schedule::{FromBlock, collector_block};
use crate::settings::{defaults, limits};
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::model::{ParseProblem, read_body};

/// `POST /api/delivery/tracemail/dashboard`
pub const DASHBOARD: Endpoint =
    Endpoint::new("tracemail_dashboard").at("POST /api/delivery/tracemail/dashboard");

/// A dashboard view: the whole customer, or filtered by one account or one domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum View {
    All,
    Account(i32),
    Domain(String),
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            View::All => f.write_str("all"),
            View::Account(id) => write!(f, "account:{id}"),
            View::Domain(d) => write!(f, "domain:{d}"),
        }
    }
}

/// A view as written: one of `account` or `domain`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawView {
    pub account: Option<i64>,
    pub domain: Option<String>,
}

collector_block! {
    /// `collectors.tracemail_dashboard`: the schedule, the day's zone and format, the size of
    /// the top lists, and the filtered views.
    pub struct Block {
        day;
        pub limit: Option<i64>,
    }
    /// A tenant's views.
    list views: RawView, tenant List;
}

/// How every view is asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub day: Day,
    pub limit: i32,
}

impl crate::storage::targets::KeyFields for Settings {
    fn key_fields(&self) -> Vec<(&'static str, String)> {
        self.day.key_fields_and("limit", self.limit as usize)
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DashboardData {
    pub dashboard: Dashboard,
    /// Start of "today" in the configured zone, Unix seconds.
    pub day_start: f64,
}

/// Validates dashboard views: [`View::All`] first, then each listed one once.
fn views(field: &str, raw: &[RawView]) -> Result<Vec<View>, ConfigError> {
    let view = |at: &str, v: &RawView| match (v.account, &v.domain) {
        (Some(id), None) => Ok(View::Account(
            account_list(&format!("{at}.account"), &[id], true)?[0],
        )),
        (None, Some(raw)) => match crate::upstream::model::names::domain_name(raw) {
            Some(domain) => Ok(View::Domain(domain)),
            None => Err(invalid(
                format!("{at}.domain"),
                format!(
                    "{} is not a domain name, e.g. shop.example",
                    quote(&raw.trim().to_ascii_lowercase())
                ),
            )),
        },
        _ => Err(invalid(
            at,
            "give exactly one of account (an id) or domain (a name)",
        )),
    };
    let listed = distinct(field, raw, None, view, View::clone, |_| {
        "is listed twice".to_owned()
    })?;
    Ok([View::All].into_iter().chain(listed).collect())
}

/// Today in the configured zone at `now`, and when it started (Unix seconds).
fn today(settings: &Settings, now: Timestamp) -> Result<(Date, f64), UpstreamError> {
    let now = settings.day.zoned(now);
    let day_start = now
        .start_of_day()
        .map_err(|e| {
            UpstreamError::new(
                FailureReason::Decode,
                format!("cannot compute the start of the day: {e}"),
            )
        })?
        .timestamp()
        .as_second() as f64;
    Ok((now.date(), day_start))
}

fn params(settings: &Settings, today: Date) -> DashboardParams {
    DashboardParams {
        date_format: settings.day.date_format.clone(),
        today,
        limit: settings.limit as usize,
    }
}

/// The request body: activity for yesterday and today, overview and top lists for today.
pub fn body(settings: &Settings, view: &View, today: Date) -> Value {
    let t = settings.day.date_format.format(today);
    let y = today
        .yesterday()
        .map(|d| settings.day.date_format.format(d))
        .unwrap_or_else(|_| t.clone());
    let mut body = json!({
        "timezone": settings.day.timezone_name,
        "daily_activity": {"start_date": y, "end_date": t, "audience": "all"},
        "overview": {"start_date": t, "end_date": t},
        "top_accounts": {"start_date": t, "end_date": t, "limit": settings.limit},
        "top5": {"start_date": t, "end_date": t, "limit": settings.limit},
    });
    match view {
        View::All => {}
        View::Account(id) => body["account"] = json!(id.to_string()),
        View::Domain(d) => body["domain"] = json!(d),
    }
    body
}

impl FromBlock<Block> for Settings {
    fn from_block(raw: &Block, field: &str) -> Result<Self, ConfigError> {
        let limit = raw.limit.unwrap_or(defaults::TOP_LIMIT);
        let limit = in_bounds(format!("{field}.limit"), limit, limits::TOP_LIMIT)?;
        Ok(Settings {
            day: Day::from_keys(field, raw.timezone.clone(), raw.date_format.clone())?,
            limit: limit as i32,
        })
    }
}

/// A view is about its account or domain; an extra sending domain gets a view of its own.
impl TargetKind for View {
    fn refers_to(&self) -> Refers<'_> {
        match self {
            View::All => Refers::Other,
            View::Account(id) => Refers::Account(*id),
            View::Domain(d) => Refers::Domain(d),
        }
    }

    fn of_domain(domain: String) -> Option<View> {
        Some(View::Domain(domain))
    }
}

/// The collector.
#[derive(Debug)]
pub struct TracemailDashboard;

impl Collect for TracemailDashboard {
    const ENDPOINTS: &'static [Endpoint] = &[DASHBOARD];
    const EXTRA: Extra = Extra::Domains;
    const REVEALS: Extra = Extra::Accounts;
    type Raw = Block;
    type RawList = List;
    type Settings = Settings;
    type Target = View;
    type Data = DashboardData;
    const READ: Read<Self> = read;
    const ENCODE: Encode<Self> = series::encode;

    /// Never required: the whole customer's view is always there.
    fn parse_list(
        field: &str,
        list: &[RawView],
        _required: bool,
    ) -> Result<Vec<View>, ConfigError> {
        views(field, list)
    }

    async fn collect(
        ctx: Context,
        settings: Arc<Settings>,
        view: View,
    ) -> Result<DashboardData, UpstreamError> {
        let (today, day_start) = today(&settings, ctx.clock.now())?;
        let route = DASHBOARD.post(&[], body(&settings, &view, today));
        let dashboard = ctx
            .client
            .fetch(
                DASHBOARD,
                view.to_string(),
                route,
                &params(&settings, today),
            )
            .await?;
        Ok(DashboardData {
            dashboard,
            day_start,
        })
    }

    /// The accounts of the top lists.
    fn reveals(data: &DashboardData) -> Revealed<'_> {
        Revealed::Accounts(
            data.dashboard
                .top_accounts
                .iter()
                .filter_map(|(id, _)| id.trim().parse::<i32>().ok())
                .collect(),
        )
    }
}

/// Reads one run's answers (the collector's [`Collect::READ`]).
fn read(
    settings: &Settings,
    _view: &View,
    bodies: &[&[u8]],
    now: Timestamp,
) -> Result<(DashboardData, Vec<ParseProblem>), UpstreamError> {
    let (today, day_start) = today(settings, now)?;
    let (dashboard, problems) =
        read_body::<Dashboard>(super::body(bodies, 0), &params(settings, today))?;
    Ok((
        DashboardData {
            dashboard,
            day_start,
        },
        problems,
    ))
}
