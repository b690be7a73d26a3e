//! Daily statistics collector: `GET /api/delivery/tracemail/daily/{account}` with
//! `type=account` (today and yesterday by outcome) and `type=domains-rank` (today per sending
//! domain, the top N kept) for each configured account.

use std::sync::Arc;

use super::Context;
use crate::config::DailyConfig;
use crate::upstream::error::UpstreamError;
use crate::upstream::model::{DailyParams, DailyStats, DomainCounts};

#[derive(Clone, Debug, PartialEq)]
pub struct DailyData {
    pub stats: DailyStats,
    /// At most `top_domains`, largest first.
    pub domains: Vec<DomainCounts>,
}

pub async fn collect(
    ctx: Context,
    cfg: Arc<DailyConfig>,
    account: i32,
) -> Result<DailyData, UpstreamError> {
    let params = DailyParams {
        date_format: cfg.date_format.clone(),
        today: ctx.clock.now().to_zoned(cfg.timezone.clone()).date(),
    };
    let (stats, ranks) = tokio::join!(
        ctx.client.tracemail_daily(account, &params),
        ctx.client.tracemail_domains_rank(account, cfg.top_domains)
    );
    Ok(DailyData {
        stats: stats?,
        domains: ranks?.0,
    })
}
