//! Daily statistics collector: `GET /api/delivery/tracemail/daily/{account}` with
//! `type=account` (today and yesterday by outcome) and `type=domains-rank` (today per sending
//! domain, the top N kept) for each configured account.

use super::Context;
use crate::config::DailyConfig;
use crate::labels::{Endpoint, FailureReason};
use crate::upstream::UpstreamError;
use crate::upstream::model::{DailyStats, DomainCounts, read_daily, read_domains_rank};

#[derive(Clone, Debug, PartialEq)]
pub struct DailyData {
    pub stats: DailyStats,
    /// At most `top_domains`, largest first.
    pub domains: Vec<DomainCounts>,
}

pub async fn collect(
    ctx: &Context,
    cfg: &DailyConfig,
    account: i32,
) -> Result<DailyData, UpstreamError> {
    let today = ctx.clock.now().to_zoned(cfg.timezone.clone()).date();
    let (days, ranks) = tokio::join!(
        ctx.client.tracemail_daily(account),
        ctx.client.tracemail_domains_rank(account)
    );
    let days = days?;
    // The operation answers the account's recent days, zero days included: none at all is
    // not an answer we can read (and must not blank today's figures).
    if days.is_empty() {
        ctx.client
            .telemetry()
            .observe_failure(Endpoint::TracemailDaily, FailureReason::Decode);
        return Err(UpstreamError::new(
            FailureReason::Decode,
            "resources is empty: no days in the answer",
        ));
    }
    let (stats, problems) = read_daily(&days, &cfg.date_format, today);
    ctx.report(Endpoint::TracemailDaily, problems);
    let (domains, problems) = read_domains_rank(&ranks?, cfg.top_domains);
    ctx.report(Endpoint::TracemailDomainsRank, problems);
    Ok(DailyData { stats, domains })
}
