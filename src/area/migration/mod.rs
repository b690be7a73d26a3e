//! Migration collector: `GET /api/migrations/{code}/stats` for each configured code.

use super::Context;
use crate::upstream::error::UpstreamError;
use crate::upstream::model::Migration;

pub type MigrationData = Migration;

pub async fn collect(ctx: Context, code: String) -> Result<MigrationData, UpstreamError> {
    ctx.client.migration_stats(&code).await
}
