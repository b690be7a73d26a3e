//! The `/_sim/` control plane: not part of the real API, it lets tests and benchmarks read the
//! simulator's state and set faults (per route, or on every route at once) and rate limits (per
//! token, and per route of a token) over HTTP. It needs an unrestricted management token.

use axum::body::Bytes;
use axum::extract::{FromRequestParts, RawPathParams, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::extract::{JsonBody, Management};
use super::faults::FaultSpec;
use crate::Simulator;
use crate::route::{Route, not_a_limited_route};
use crate::world::rate_limit::RateLimit;

pub(crate) fn router() -> Router<Simulator> {
    Router::new()
        .route("/_sim/state", get(state))
        .route("/_sim/faults", put(set_every_fault).delete(clear_faults))
        .route(
            "/_sim/faults/{route}",
            put(set_fault).post(add_fault).delete(clear_fault),
        )
        .route("/_sim/hits", get(hits))
        .route(
            "/_sim/rate_limit",
            put(set_rate_limit).delete(lift_rate_limit),
        )
        .route("/_sim/rate_limits", get(rate_limits))
}

/// Accounts as records, their API tokens, domains, suppression list, migration statistics,
/// mailbox records, faults and the requests held unanswered now.
async fn state(State(sim): State<Simulator>, auth: Management) -> Result<Json<Value>, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    let now = sim.clock().now();
    let faults = sim.faults().all();
    let mut dump = sim.world().dump(now);
    dump.insert("faults".to_owned(), json!(faults));
    dump.insert("held_requests".to_owned(), json!(sim.held_requests()));
    Ok(Json(Value::Object(dump)))
}

/// The `{route}` path parameter; an unknown name answers 404 listing the known ones.
struct RouteParam(Route);

impl<S: Send + Sync> FromRequestParts<S> for RouteParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::BadRequest(rejection.body_text()))?;
        let name = params
            .iter()
            .find_map(|(key, value)| (key == "route").then_some(value))
            .unwrap_or_default();
        name.parse::<Route>()
            .map(Self)
            .map_err(|e| ApiError::NotFound(e.to_string()))
    }
}

/// Answers the fault now in force, so a test can see what its JSON was read as.
async fn set_fault(
    State(sim): State<Simulator>,
    auth: Management,
    RouteParam(route): RouteParam,
    JsonBody(spec): JsonBody<FaultSpec>,
) -> Result<Json<Value>, ApiError> {
    let spec = checked(&auth, spec)?;
    sim.set_fault(route, spec.clone());
    Ok(Json(json!({ "route": route.name(), "fault": spec })))
}

/// Sets one fault on every route at once, one window for all (an outage of the whole API, the
/// Send API included), as `DELETE /_sim/faults` heals every route; answers the routes and the
/// fault now in force on each.
async fn set_every_fault(
    State(sim): State<Simulator>,
    auth: Management,
    JsonBody(spec): JsonBody<FaultSpec>,
) -> Result<Json<Value>, ApiError> {
    let spec = checked(&auth, spec)?;
    sim.set_fault_on_every_route(spec.clone());
    let routes: Vec<&str> = Route::ALL.iter().map(Route::name).collect();
    Ok(Json(json!({ "routes": routes, "fault": spec })))
}

/// Adds a fault beside those in force on the route (for per-target faults, each with its own
/// `only_ids`).
async fn add_fault(
    State(sim): State<Simulator>,
    auth: Management,
    RouteParam(route): RouteParam,
    JsonBody(spec): JsonBody<FaultSpec>,
) -> Result<Json<Value>, ApiError> {
    let spec = checked(&auth, spec)?;
    sim.add_fault(route, spec.clone());
    Ok(Json(json!({ "route": route.name(), "added": spec })))
}

/// A fault spec from a caller allowed on the control plane, refused when it contradicts itself.
fn checked(auth: &Management, spec: FaultSpec) -> Result<FaultSpec, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    spec.validate().map_err(ApiError::BadRequest)?;
    Ok(spec)
}

/// How many requests each path received: `{"hits": {"/api/...": n, ...}}`.
async fn hits(State(sim): State<Simulator>, auth: Management) -> Result<Json<Value>, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    Ok(Json(json!({ "hits": sim.all_hits() })))
}

async fn clear_fault(
    State(sim): State<Simulator>,
    auth: Management,
    RouteParam(route): RouteParam,
) -> Result<StatusCode, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    sim.set_fault(route, FaultSpec::default());
    Ok(StatusCode::NO_CONTENT)
}

async fn clear_faults(
    State(sim): State<Simulator>,
    auth: Management,
) -> Result<StatusCode, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    sim.clear_faults();
    Ok(StatusCode::NO_CONTENT)
}

/// Sets a rate limit: the body is a rate limit plus an optional `"token"` (absent: every
/// management token, each with its own bucket) and an optional `"route"`, the name of a
/// Management API route (absent or null: the token-wide limit). Answers the limits now in force,
/// as `GET /_sim/rate_limits` does.
async fn set_rate_limit(
    State(sim): State<Simulator>,
    auth: Management,
    JsonBody(mut body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    // `token` and `route` are not members of the limit itself, which refuses unknown members:
    // take them out.
    let token = match body.remove("token") {
        None | Some(Value::Null) => None,
        Some(Value::String(token)) => Some(token),
        Some(_) => return Err(ApiError::bad_request("`token` must be a string")),
    };
    let route = match body.remove("route") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(limited_route(&name)?),
        Some(_) => return Err(ApiError::bad_request("`route` must be a string")),
    };
    let limit: RateLimit = serde_json::from_value(Value::Object(body))
        .map_err(|e| ApiError::BadRequest(format!("invalid rate limit: {e}")))?;
    scoped_limit(&sim, token.as_deref(), route, Some(limit))?;
    Ok(Json(rate_limit_listing(&sim)))
}

/// The Management API route a `route` member names; any other name answers 400 naming the
/// accepted ones.
fn limited_route(name: &str) -> Result<Route, ApiError> {
    name.parse::<Route>()
        .ok()
        .filter(Route::is_management)
        .ok_or_else(|| ApiError::BadRequest(not_a_limited_route(name)))
}

/// Sets or lifts the token-wide limit (`route` `None`) or a route's.
fn scoped_limit(
    sim: &Simulator,
    token: Option<&str>,
    route: Option<Route>,
    limit: Option<RateLimit>,
) -> Result<(), ApiError> {
    match route {
        None => sim.set_rate_limit(token, limit),
        Some(route) => sim.set_route_rate_limit(token, route, limit),
    }
    .map_err(ApiError::BadRequest)
}

/// The body of `DELETE /_sim/rate_limit`, which may also be empty.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LiftBody {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    route: Option<String>,
}

/// Lifts one limit: `{"token": "..."}` the token-wide limit of one management token,
/// `{"token": "...", "route": "..."}` the limit of one of its routes, and without `token` the
/// same limit of every management token. Without a `route` (or without a body) only token-wide
/// limits are lifted, as before route limits existed: route limits stay until lifted by name.
async fn lift_rate_limit(
    State(sim): State<Simulator>,
    auth: Management,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    let LiftBody { token, route } = if body.iter().all(u8::is_ascii_whitespace) {
        LiftBody::default()
    } else {
        serde_json::from_slice::<LiftBody>(&body)
            .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?
    };
    let route = route.as_deref().map(limited_route).transpose()?;
    scoped_limit(&sim, token.as_deref(), route, None)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every limit (the token a preview, never the whole token), its route (null for token-wide
/// limits, which come first), the limit and its own counts.
async fn rate_limits(
    State(sim): State<Simulator>,
    auth: Management,
) -> Result<Json<Value>, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    Ok(Json(rate_limit_listing(&sim)))
}

fn rate_limit_listing(sim: &Simulator) -> Value {
    json!({ "rate_limits": sim.rate_limiter().list() })
}
