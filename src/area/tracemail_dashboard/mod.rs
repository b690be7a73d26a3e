//! Mail-tracing dashboard collector: `POST /api/delivery/tracemail/dashboard` once per view
//! (the whole customer, and any configured account or domain filter), asking for yesterday and
//! today in the configured time zone.

use std::sync::Arc;

use jiff::civil::Date;
use serde_json::{Value, json};

use super::{Context, Target};
use crate::config::{DashboardConfig, View};
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::model::{Dashboard, DashboardParams};

#[derive(Clone, Debug, PartialEq)]
pub struct DashboardData {
    pub dashboard: Dashboard,
    /// Start of "today" in the configured zone, Unix seconds.
    pub day_start: f64,
}

pub async fn collect(
    ctx: Context,
    cfg: Arc<DashboardConfig>,
    view: View,
) -> Result<DashboardData, UpstreamError> {
    let now = ctx.clock.now().to_zoned(cfg.timezone.clone());
    let today = now.date();
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
    let params = DashboardParams {
        date_format: cfg.date_format.clone(),
        today,
        limit: cfg.limit as usize,
    };
    let body = body(&cfg, &view, today);
    let dashboard = ctx
        .client
        .tracemail_dashboard(Target::DashboardView(view).to_string(), &body, &params)
        .await?;
    Ok(DashboardData {
        dashboard,
        day_start,
    })
}

/// The request body: activity for yesterday and today, overview and top lists for today.
pub fn body(cfg: &DashboardConfig, view: &View, today: Date) -> Value {
    let t = cfg.date_format.format(today);
    let y = today
        .yesterday()
        .map(|d| cfg.date_format.format(d))
        .unwrap_or_else(|_| t.clone());
    let mut body = json!({
        "timezone": cfg.timezone_name,
        "daily_activity": {"start_date": y, "end_date": t, "audience": "all"},
        "overview": {"start_date": t, "end_date": t},
        "top_accounts": {"start_date": t, "end_date": t, "limit": cfg.limit},
        "top5": {"start_date": t, "end_date": t, "limit": cfg.limit},
    });
    match view {
        View::All => {}
        View::Account(id) => body["account"] = json!(id.to_string()),
        View::Domain(d) => body["domain"] = json!(d),
    }
    body
}
