//! Handler of migration statistics.

use axum::Json;
use axum::extract::State;
use serde_json::Value;

use super::error::ApiError;
use super::extract::{Management, MigrationCode};
use crate::Simulator;

/// `GET /api/migrations/{migration_code}/stats`: `{"aggregate": {...}}`, no envelope. Migrations
/// are not Delivery accounts, so a scoped token sees them too.
pub(crate) async fn get_stats(
    State(sim): State<Simulator>,
    _auth: Management,
    MigrationCode(code): MigrationCode,
) -> Result<Json<Value>, ApiError> {
    sim.migration_stats(&code)
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("migration {code} not found")))
}
