//! Migration collector: `GET /api/migrations/{code}/stats` for each configured code.

use super::Context;
use crate::labels::Endpoint;
use crate::upstream::UpstreamError;
use crate::upstream::model::Migration;

pub type MigrationData = Migration;

pub async fn collect(ctx: &Context, code: &str) -> Result<MigrationData, UpstreamError> {
    let aggregate = ctx.client.migration_stats(code).await?;
    let endpoint = Endpoint::MigrationStats;
    let (migration, problems) = Migration::from_aggregate(&aggregate)
        .map_err(|p| ctx.unreadable(endpoint, p, "aggregate"))?;
    ctx.report(endpoint, problems);
    Ok(migration)
}
