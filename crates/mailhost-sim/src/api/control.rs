//! The `/_sim/` control plane: not part of the real API, it lets tests and benchmarks read the
//! simulator's state and set faults over HTTP. It needs an unrestricted management token.

use axum::extract::{FromRequestParts, RawPathParams, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::{delete, get, put};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::error::ApiError;
use super::extract::{JsonBody, Management};
use super::faults::FaultSpec;
use super::route::Route;
use crate::Simulator;

pub(crate) fn router() -> Router<Simulator> {
    Router::new()
        .route("/_sim/state", get(state))
        .route("/_sim/faults", delete(clear_faults))
        .route(
            "/_sim/faults/{route}",
            put(set_fault).post(add_fault).delete(clear_fault),
        )
        .route("/_sim/hits", get(hits))
}

/// Accounts as records, their API tokens, domains, suppression list, migration statistics,
/// mailbox records and faults.
async fn state(State(sim): State<Simulator>, auth: Management) -> Result<Json<Value>, ApiError> {
    auth.check_unscoped("the simulator control plane")?;
    let now = sim.clock().now();
    let faults = sim.faults().all();
    let mut dump = sim.world().dump(now);
    dump.insert("faults".to_owned(), json!(faults));
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
