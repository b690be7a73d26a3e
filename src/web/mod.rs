//! The HTTP side: `/metrics` (prepared bytes plus the small self-metrics), the landing page,
//! and the health and readiness endpoints. Nothing here calls upstream.

mod landing;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tower_http::compression::CompressionLayer;

use crate::exposition::{EOF, Format, write_families};
use crate::snapshot::Store;
use crate::telemetry::Telemetry;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<Store>,
    pub telemetry: Arc<Telemetry>,
    pub telemetry_path: String,
}

/// The exporter's router; tests drive it with `tower::ServiceExt::oneshot`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(&state.telemetry_path, get(metrics))
        .route("/", get(landing::page))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .layer(CompressionLayer::new().gzip(true))
        .with_state(state)
}

async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let prepared = state.store.prepared();
    let prepared_body = prepared.body(format);
    let mut body = String::with_capacity(prepared_body.len() + 4096);
    body.push_str(prepared_body);
    write_families(&mut body, &state.telemetry.families(), format);
    if format == Format::OpenMetrics {
        body.push_str(EOF);
    }
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

async fn healthy() -> &'static str {
    "Healthy\n"
}

async fn ready(State(state): State<AppState>) -> Response {
    if state.store.prepared().snapshot.ready() {
        (StatusCode::OK, "Ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "Not ready: collectors have not finished their first run\n",
        )
            .into_response()
    }
}

/// An HTML page must not be cached by a proxy as if it were the metrics.
fn html(body: String) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Html(body)).into_response()
}
