//! The record envelope every Management API answer of the simulator shares.

use axum::Json;
use serde_json::{Value, json};

/// `{resources: [...], pagination: {page, per_page, total}}`: every simulated list is one page
/// holding everything.
pub(crate) fn envelope(resources: Vec<Value>) -> Json<Value> {
    let total = resources.len();
    Json(json!({
        "resources": resources,
        "pagination": { "page": 1, "per_page": total, "total": total },
    }))
}
