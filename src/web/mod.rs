//! The HTTP side: `/metrics` (prepared bytes plus the small self-metrics), `/probe` (one
//! account), `/sd` (service discovery of the accounts), the landing page, and the health and
//! readiness endpoints. Nothing here calls upstream.

pub mod auth;
mod landing;
pub mod listen;
pub use landing::{SharedUpstream, Upstream};
mod debug;
pub mod negotiate;
mod probe;
pub mod scrape;
mod sd;
pub mod serve;
pub mod web_config;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tower_http::compression::CompressionLayer;

use crate::engine::poll_set::PollSets;
use crate::engine::store::Store;
use crate::metrics::self_metrics::Telemetry;
use crate::web::web_config::WebReload;

/// A reload request (from `POST /-/reload` or SIGHUP); the answer says what was taken.
pub type ReloadRequest = oneshot::Sender<ReloadAnswer>;

/// What a reload did: the config file's outcome, and the web config's.
#[derive(Clone, Debug)]
pub struct ReloadAnswer {
    pub config: Result<(), String>,
    pub web: WebReload,
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<Store>,
    pub telemetry: Arc<Telemetry>,
    pub telemetry_path: String,
    /// Where `POST /-/reload` sends its request.
    pub reload: mpsc::Sender<ReloadRequest>,
    pub enable_lifecycle: bool,
    /// Whether `/metrics` carries the `process_*` series.
    pub process_metrics: bool,
    /// Scrapes served at once at most (`--web.max-requests`); `None`: no limit.
    pub scrape_limit: Option<Arc<Semaphore>>,
    /// `/probe` and `/sd` at once at most: `--web.max-requests` less a reserve that only
    /// `/metrics` can take, so strangers probing made-up ids cannot crowd it out.
    pub probe_limit: Option<Arc<Semaphore>>,
    /// Probes waiting for an account's first fetch, at most; past it a probe gets 503 at once.
    pub probe_waits: Arc<Semaphore>,
    /// The self-metrics as last rendered, per format.
    pub tails: Arc<scrape::TailCache>,
    /// What `/probe` registers and `/sd` lists, per tenant.
    pub poll_sets: Arc<PollSets>,
}

/// The share of `--web.max-requests` only `/metrics` can take: a quarter (none below 4).
pub fn metrics_reserve(max_requests: usize) -> usize {
    max_requests / 4
}

/// Probes waiting for a first fetch at once at most: a quarter of `--web.max-requests` (at
/// least one), or 256 without a limit.
pub fn probe_waits(max_requests: usize) -> usize {
    if max_requests == 0 {
        256
    } else {
        (max_requests / 4).max(1)
    }
}

/// The exporter's router; tests drive it with `tower::ServiceExt::oneshot`.
pub fn router(state: AppState) -> Router {
    let limited = middleware::from_fn_with_state(state.scrape_limit.clone(), limit_scrapes);
    // /probe and /sd take a slot of their own share first, then one of all scrapes.
    let shared = middleware::from_fn_with_state(state.probe_limit.clone(), limit_scrapes);
    // The layer wraps only the routes added before it: /metrics negotiates gzip itself, with
    // its body gzipped once per refresh rather than per scrape.
    Router::new()
        .route("/", get(landing::page))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .route("/-/reload", post(reload))
        // A listing of every known account can be megabytes: bounded like a scrape.
        .route(
            "/sd",
            get(sd::sd).layer(limited.clone()).layer(shared.clone()),
        )
        .layer(CompressionLayer::new().gzip(true))
        .route(
            &state.telemetry_path,
            get(scrape::metrics).layer(limited.clone()),
        )
        .route("/probe", get(probe::probe).layer(limited).layer(shared))
        .with_state(state)
}

/// Past `--web.max-requests` scrapes at once, the next one is refused rather than queued.
async fn limit_scrapes(
    State(limit): State<Option<Arc<Semaphore>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(limit) = limit else {
        return next.run(request).await;
    };
    match limit.try_acquire_owned() {
        Ok(_permit) => next.run(request).await,
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many scrapes at once; retry, or raise --web.max-requests\n",
        )
            .into_response(),
    }
}

/// `POST /-/reload`: reads the config file and the web config file again; each old one keeps
/// running if its new file is bad, and the answer says what happened to both.
async fn reload(State(state): State<AppState>) -> Response {
    if !state.enable_lifecycle {
        return (
            StatusCode::FORBIDDEN,
            "Lifecycle API is not enabled; start with --web.enable-lifecycle\n",
        )
            .into_response();
    }
    let (tx, rx) = oneshot::channel();
    let sent = state.reload.send(tx).await.is_ok();
    let Some(answer) = (if sent { rx.await.ok() } else { None }) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    };
    let mut text = match &answer.config {
        Ok(()) => "Reloaded\n".to_owned(),
        Err(e) => format!("failed to reload config: {e}\n"),
    };
    if answer.web != WebReload::NoFile {
        text.push_str(&format!("{}\n", answer.web));
    }
    let status = if answer.config.is_err() || answer.web.is_refused() {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    (status, text).into_response()
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

/// The values of query parameter `key`, in order.
fn query_values<'a>(pairs: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Query pairs from string pairs, for the handlers' tests.
#[cfg(test)]
fn query_pairs(q: &[(&str, &str)]) -> Vec<(String, String)> {
    q.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
